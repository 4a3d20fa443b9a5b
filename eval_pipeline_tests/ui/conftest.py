"""Fixtures of the browser test.

One sample run on a persistent instance in tmp, `dagster dev` on loopback, headless Chromium.
"""

import io
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_pipeline.defs.build import build_definitions
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.runner import run_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_ID = "base-41"
# the candidate, evaluated after its baseline, whose release the gates block
CANDIDATE_RUN_ID = "cand-42"
RUN_IDS = (RUN_ID, CANDIDATE_RUN_ID)
# Debian's chromium; Playwright drives it as is and never downloads a browser of its own.
CHROMIUM = Path(os.environ.get("EVAL_PIPELINE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SERVER_START_S = 150
SERVER_STOP_S = 5
UI_TIMEOUT_MS = 30_000
WORKSPACE_QUERY = (
    "{ workspaceOrError { __typename ... on Workspace { locationEntries { name loadStatus "
    "locationOrLoadError { __typename ... on PythonError { message } } } } } }"
)


@dataclass(frozen=True)
class UiRun:
    """The served instance: its URL, where its outputs went, and what the instance recorded for the run."""

    url: str
    run_id: str
    candidate_run_id: str
    reports: Path
    pipeline_exit: int
    pipeline_summary: str
    check_passed: dict[tuple[str, str], bool]
    materialized: frozenset[str]
    server_log: Path
    # run id (partition) -> the Dagster run that evaluated it
    dagster_runs: dict[str, str]


def pytest_runtest_makereport(item, call):
    """Remember whether a test's call failed, so the page fixture can name its screenshot."""
    if call.when == "call":
        item.ui_failed = call.excinfo is not None


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The system Chromium, or a skip that says how to install it."""
    pytest.importorskip(
        "playwright.sync_api",
        reason="the Python package playwright is not installed (pip install -e '.[test]'); the browser test needs it",
    )
    if not (CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)):
        pytest.skip(
            f"no Chromium at {CHROMIUM}: install Debian's package (apt-get install chromium; .ci/run does) "
            "or point EVAL_PIPELINE_CHROMIUM at a Chromium binary; `playwright install` is never used"
        )
    return CHROMIUM


def _sample_with_the_runs(target: Path) -> Path:
    """A copy of data/ holding only the traces of RUN_IDS, so the new-batch sensor finds nothing to launch."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        if Path(folder) == REPO_ROOT / "data" / "traces":
            return [name for name in names if name not in RUN_IDS]
        return [name for name in names if Path(folder) == REPO_ROOT / "data" and name in {"warehouse", "reports"}]

    shutil.copytree(REPO_ROOT / "data", target, ignore=ignore)
    return target


def _instance_home(target: Path) -> Path:
    """A DAGSTER_HOME configured like the repository's dagster.yaml, without the UI's first-visit newsletter dialog."""
    config = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    config["nux"] = {"enabled": False}
    target.mkdir(parents=True)
    (target / "dagster.yaml").write_text(yaml.safe_dump(config))
    return target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _log_tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def _location_loaded(url: str) -> bool:
    """True once the server answers and its one code location has loaded; fails on a load error."""
    try:
        with urllib.request.urlopen(f"{url}/server_info", timeout=5) as reply:
            json.load(reply)
        request = urllib.request.Request(
            f"{url}/graphql",
            data=json.dumps({"query": WORKSPACE_QUERY}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            entries = json.load(reply)["data"]["workspaceOrError"]["locationEntries"]
    except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError, TypeError, json.JSONDecodeError):
        return False
    for entry in entries:
        loaded = entry.get("locationOrLoadError") or {}
        if loaded.get("__typename") == "PythonError":
            pytest.fail(f"code location {entry['name']} failed to load in dagster dev: {loaded.get('message')}")
    return bool(entries) and all(entry["loadStatus"] == "LOADED" for entry in entries)


def _wait_until_serving(server: subprocess.Popen, url: str, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"dagster dev exited with {server.returncode} before serving:\n{_log_tail(log)}")
        if _location_loaded(url):
            return
        time.sleep(1)
    pytest.fail(f"dagster dev did not serve {url} within {SERVER_START_S}s:\n{_log_tail(log)}")


def _signal_group(pgid: int, sig: int) -> bool:
    """Send sig to a process group; False when none of its processes is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    return True


def _stop(server: subprocess.Popen) -> None:
    """Terminate dagster dev and all it started (its own process group); SIGKILL whatever outlives the grace time."""
    _signal_group(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + SERVER_STOP_S
    # The webserver, daemon and code servers share the group and may outlive the parent, which is reaped here.
    while server.poll() is None or _signal_group(server.pid, 0):
        if time.monotonic() > deadline:
            _signal_group(server.pid, signal.SIGKILL)
            break
        time.sleep(0.5)
    server.wait(timeout=10)


def _recorded(instance: dg.DagsterInstance) -> tuple[dict[tuple[str, str], bool], frozenset[str]]:
    """What the instance holds: (asset, check) -> whether its latest evaluation passed, and the materialized assets."""
    graph = build_definitions().resolve_asset_graph()
    records = instance.event_log_storage.get_latest_asset_check_execution_by_key(list(graph.asset_check_keys))
    passed = {}
    for key, record in records.items():
        evaluation = (
            record.event.dagster_event.event_specific_data if record.event and record.event.dagster_event else None
        )
        if evaluation is not None:
            passed[(key.asset_key.to_user_string(), key.name)] = evaluation.passed
    materialized = frozenset(
        key.to_user_string()
        for key in graph.get_all_asset_keys()
        if instance.get_latest_materialization_event(key) is not None
    )
    return passed, materialized


@pytest.fixture(scope="session")
def ui_run(chromium, tmp_path_factory) -> Iterator[UiRun]:
    """RUN_IDS materialized on a persistent sqlite instance while `dagster dev` starts on it; stopped at session end."""
    root = tmp_path_factory.mktemp("ui")
    data = _sample_with_the_runs(root / "data")
    home = _instance_home(root / "dagster_home")
    warehouse, reports, log = root / "warehouse", root / "reports", root / "dagster_dev.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "EVAL_PIPELINE_DATA": str(data),
        "EVAL_PIPELINE_WAREHOUSE": str(warehouse),
        "EVAL_PIPELINE_REPORTS": str(reports),
        "EVAL_PIPELINE_DEID_DEMO": "1",
    }
    server = None
    try:
        with pytest.MonkeyPatch.context() as patch:
            # The instance's dagster.yaml reads DAGSTER_HOME; other tests get theirs back once the run is recorded.
            patch.setenv("DAGSTER_HOME", str(home))
            instance = dg.DagsterInstance.from_config(str(home))
            # Known before the daemon's first tick, so the new-batch sensor does not launch a second evaluation.
            instance.add_dynamic_partitions(runs_partitions.name, list(RUN_IDS))
            with log.open("wb") as server_out:
                # It boots while the run is evaluated; the pages are opened only after the run is recorded.
                server = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "dagster",
                        "dev",
                        "-w",
                        "workspace.yaml",
                        "-h",
                        "127.0.0.1",
                        "-p",
                        str(port),
                    ],
                    cwd=REPO_ROOT,
                    env=env,
                    stdout=server_out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            summary = io.StringIO()
            code = run_pipeline(
                data=str(data),
                run_ids=list(RUN_IDS),
                warehouse=str(warehouse),
                reports=str(reports),
                deid_demo=True,
                quiet=True,
                instance=instance,
                stream=summary,
            )
            checks, materialized = _recorded(instance)
            dagster_runs = {run.tags.get("dagster/partition"): run.run_id for run in instance.get_runs()}
            instance.dispose()
        _wait_until_serving(server, url, log)
        yield UiRun(
            url=url,
            run_id=RUN_ID,
            candidate_run_id=CANDIDATE_RUN_ID,
            reports=reports,
            pipeline_exit=code,
            pipeline_summary=summary.getvalue(),
            check_passed=checks,
            materialized=materialized,
            server_log=log,
            dagster_runs=dagster_runs,
        )
    finally:
        if server is not None:
            _stop(server)


@pytest.fixture(scope="session")
def browser_context(chromium):
    """One headless system Chromium context for the session (fresh temporary profile), so the UI's bundle is cached."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=UI_TIMEOUT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(chromium), headless=True, args=CHROMIUM_ARGS, timeout=60_000
        )
        context = launched.new_context(viewport={"width": 1600, "height": 1000})
        context.set_default_timeout(UI_TIMEOUT_MS)
        yield context
        context.close()
        launched.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """Where each browser test leaves a screenshot of its last view (kept in pytest's tmp, never committed)."""
    return tmp_path_factory.mktemp("ui_screenshots")


@pytest.fixture()
def page(browser_context, screenshots, request):
    """A new page; its last view is saved as <test>.png (FAILED-<test>.png when the test failed)."""
    opened = browser_context.new_page()
    yield opened
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)
    prefix = "FAILED-" if getattr(request.node, "ui_failed", False) else ""
    try:
        opened.screenshot(path=str(screenshots / f"{prefix}{name}.png"), timeout=10_000)
    finally:
        opened.close()
