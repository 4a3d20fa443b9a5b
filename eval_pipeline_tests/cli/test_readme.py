"""The README is a front page whose every command block runs as written on the bundled sample, with the exit status
its comment states, and whose words about exit codes agree with `--help` and docs/."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from eval_pipeline.cli import build_parser

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
MAX_README_BYTES = 8 * 1024
# The installed entry points of this interpreter stand in for the README's .venv/bin/.
BIN = Path(sys.executable).parent
# A command line's stated exit status, in its comment: "# … exit 1: release blocked".
STATED_EXIT = re.compile(r"#.*\bexit (\d)\b")


def _blocks(text: str) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", text, flags=re.S)


def _commands(block: str) -> list[str]:
    """The commands of a shell block: one per line, a here-document kept with the line that opens it."""
    commands, lines = [], block.splitlines()
    while lines:
        line = lines.pop(0)
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        here = re.search(r"<<'?(\w+)'?", line)
        if here:
            body = []
            while lines and lines[0] != here.group(1):
                body.append(lines.pop(0))
            line = "\n".join([line, *body, lines.pop(0) if lines else here.group(1)])
        commands.append(line)
    return commands


def _as_run_here(command: str) -> str | None:
    """The command as the test runs it: the installed entry points; the demo script's own command line without its
    install; None for the test script (this suite) and for the UI, which serves until stopped (the browser test
    walks it; here its --help must work)."""
    if command.startswith("bash scripts/test.sh"):
        return None
    if command.startswith("bash scripts/demo.sh"):
        demo = (REPO_ROOT / "scripts" / "demo.sh").read_text().strip().splitlines()[-1]
        assert demo.startswith(".venv/bin/eval-pipeline run --data data --deid-demo"), demo
        command = demo.replace(' "$@"', "")
    if re.match(r"\.venv/bin/eval-pipeline ui\b", command):
        command = ".venv/bin/eval-pipeline ui --help"
    return command.replace(".venv/bin/", f"{BIN}/")


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    """What a clone holds that the README's commands read: the sample data and the Dagster project files."""
    root = tmp_path_factory.mktemp("readme") / "eval_pipeline"
    shutil.copytree(
        REPO_ROOT / "data", root / "data", ignore=shutil.ignore_patterns("warehouse", "reports", ".judge_cache")
    )
    (root / "scripts").mkdir()
    for name in ("dagster.yaml", "workspace.yaml", "scripts/demo.sh"):
        shutil.copyfile(REPO_ROOT / name, root / name)
    return root


def test_the_readme_is_a_front_page():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) < MAX_README_BYTES
    # every docs link resolves inside the repository
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if not target.startswith("http"):
            assert (REPO_ROOT / target).exists(), target


def test_every_command_the_readme_names_exists_after_the_demos_install():
    text = README.read_text(encoding="utf-8")
    named = set(re.findall(r"eval-pipeline ([a-z][a-z-]+)", text))
    commands = set(build_parser()._subparsers._group_actions[0].choices)  # noqa: SLF001 - argparse has no public API
    # `bench` comes with the harness (pip install -e ./harness), which the demo does not install
    assert named and named <= commands - {"bench"}, named - commands


@pytest.mark.slow
def test_every_readme_command_block_runs_on_the_sample_with_its_stated_exit(project_copy):
    env = {**os.environ, "DAGSTER_HOME": str(project_copy / ".dagster_home"), "EVAL_PIPELINE_DEID_KEY": ""}
    env.pop("EVAL_PIPELINE_DEID_KEY")
    (project_copy / ".dagster_home").mkdir(exist_ok=True)
    shutil.copyfile(REPO_ROOT / "dagster.yaml", project_copy / ".dagster_home" / "dagster.yaml")
    ran = []
    for block in _blocks(README.read_text(encoding="utf-8")):
        for command in _commands(block):
            runnable = _as_run_here(command)
            if runnable is None:
                continue
            stated = STATED_EXIT.search(command.splitlines()[0])
            expected = int(stated.group(1)) if stated else 0
            done = subprocess.run(
                ["bash", "-c", runnable], cwd=project_copy, env=env, capture_output=True, text=True, timeout=600
            )
            assert done.returncode == expected, (
                f"{command}\nexit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            )
            assert not re.search(r"\bNone\b|Traceback", done.stdout + done.stderr), (command, done.stdout[-2000:])
            ran.append((command, done))
    demo = next(done for command, done in ran if command.startswith("bash scripts/demo.sh"))
    # the step counter counts the steps that run: every run reaches [N/N]
    counts = re.findall(r"\[\s*(\d+)/(\d+)\]", demo.stderr)
    finished = [n for n, total in counts if n == total]
    assert len(finished) == 2, demo.stderr[-3000:]
    assert "release blocked for cand-42" in demo.stdout
    # the instance is named, with the reason it was chosen
    assert f"Dagster instance: {project_copy / '.dagster_home'} (DAGSTER_HOME is set)" in demo.stderr
    assert any(
        command.startswith(f"{BIN}/eval-pipeline gate") or ".venv/bin/eval-pipeline gate" in command
        for command, _ in ran
    )


def _help(command: str) -> str:
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices[command]  # noqa: SLF001 - argparse has no public API
    return " ".join(sub.format_help().split())


def test_the_exit_codes_read_the_same_in_help_readme_and_docs():
    run_help, gate_help = _help("run"), _help("gate")
    assert "0 the evaluation completed, whatever the release decision" in run_help
    assert "1 a step or a blocking data check failed" in run_help and "2 bad input or configuration" in run_help
    assert "0 release allowed, every gate passed; 1 release blocked, a gate failed; 2 undecided" in gate_help
    gates_doc = " ".join((REPO_ROOT / "docs" / "gates.md").read_text(encoding="utf-8").split())
    assert (
        "| 0 | the evaluation completed: every step ran and every blocking data check passed, "
        "whatever the release decision" in gates_doc
    )
    assert "| 1 | release blocked: a gate failed" in gates_doc
    assert (
        "**`release_is_not_blocked`** (on `gate_results` and `gate_report`) is an ERROR-severity check "
        "that is **not blocking**" in gates_doc
    )
    readme = " ".join(README.read_text(encoding="utf-8").split())
    assert "and exits 0: the evaluation completed. The candidate's release is blocked" in readme
    assert "exit 1: release blocked" in readme


def test_the_baseline_rule_reads_the_same_in_the_ui_help_and_docs():
    import dagster as dg

    from eval_pipeline.defs.build import build_definitions

    described = build_definitions().resolve_asset_graph().get(dg.AssetKey("gate_results")).description
    assert "baseline_run_id of its run.yaml, else of the policy; never itself" in " ".join(described.split())
    assert "the run's baseline_run_id in its run.yaml, else the policy's" in _help("show")
    gates_doc = (REPO_ROOT / "docs" / "gates.md").read_text(encoding="utf-8")
    assert (
        "2. otherwise `baseline_run_id` of the candidate's `run.yaml`;\n"
        "3. otherwise `baseline_run_id` of the gate policy." in gates_doc
    )
    assert "the case pages and `eval-pipeline show` use rules 2 and 3" in " ".join(gates_doc.split())
