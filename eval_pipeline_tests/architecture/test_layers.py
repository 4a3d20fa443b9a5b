"""The layers point down, only the edge reads environment variables, and nothing imports Dagster's private modules."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "eval_pipeline"


def _lint_imports() -> str:
    found = Path(sys.executable).with_name("lint-imports")
    if found.exists():
        return str(found)
    which = shutil.which("lint-imports")
    if which is None:
        pytest.fail("lint-imports is not installed: it comes with the test extra (import-linter)")
    return which


def test_every_import_linter_contract_is_kept():
    result = subprocess.run([_lint_imports(), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "BROKEN" not in result.stdout and " kept, 0 broken." in result.stdout


def _modules(folder: Path):
    for path in sorted(folder.rglob("*.py")):
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_module_imports_a_private_dagster_module():
    offenders = []
    for path, tree in _modules(PACKAGE):
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names if n.startswith("dagster._")]
    assert offenders == []


def test_the_dagster_layer_reads_no_environment_variable_itself():
    offenders = []
    for path, tree in _modules(PACKAGE / "defs"):
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in {"environ", "getenv"}:
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


# Where environment variables may be read: the command line, the Dagster layer (through Dagster's EnvVar, see the test
# above) and the runner with its instance. Every other module takes the values, or a mapping of them, as arguments.
# allocator.py sets polars' allocator options in the environment before polars loads, which no argument can do.
ENVIRONMENT_EDGE = frozenset({"cli", "defs", "runner.py", "instance.py", "allocator.py"})
ENVIRONMENT_NAMES = frozenset({"environ", "environb", "getenv", "getenvb"})


def _environment_reads(tree: ast.Module) -> list[int]:
    """Lines that read the process environment: `os.environ`, `os.getenv` (under any name of os), or those names
    imported from os."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT_NAMES:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in {"os", "posix", "nt"}:
            lines += [node.lineno for alias in node.names if alias.name in ENVIRONMENT_NAMES]
    return sorted(lines)


def test_the_environment_check_sees_every_form_of_read():
    source = "import os\nimport os as o\nfrom os import getenv\nos.environ['A']\no.getenv('B')\nenviron = {}\n"
    assert _environment_reads(ast.parse(source)) == [3, 4, 5]


def test_only_the_edge_reads_environment_variables():
    offenders = []
    for path, tree in _modules(PACKAGE):
        if path.relative_to(PACKAGE).parts[0] in ENVIRONMENT_EDGE:
            continue
        offenders += [f"{path.relative_to(ROOT)}:{line}" for line in _environment_reads(tree)]
    assert offenders == []
