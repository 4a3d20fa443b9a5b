"""A rerun of the bundled sample over unchanged inputs writes the same tables and the same report bytes.

The first run is the shared `scored` fixture; the second runs from a fresh copy of data/ into its own warehouse and
report folder, so the two differ in every path. Tables are compared as read (row order included), not sorted.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline
from eval_pipeline_tests.fixtures.warehouse_compare import local_tables, table_differences

pytestmark = pytest.mark.slow

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNS = ("base-41", "cand-42")

# Fields that differ between two runs by design; everything else must be equal. Empty today: the local judge
# reports no latency or cost (a served judge's fresh `latency_ms`, `input_tokens`, `output_tokens` and `cost_usd` in
# `claims` and `judge_verdicts` would belong here; reused verdicts keep what was recorded), tables carry no timestamps
# or Dagster run ids, and reports hold no paths or times.
# The Delta logs (commit timestamps, file names) are not table content.
EXCLUDED: dict[str, tuple[str, ...]] = {}


@pytest.fixture(scope="module")
def rerun(tmp_path_factory):
    """The sample scored again from a fresh copy, into another warehouse and report folder."""
    root = tmp_path_factory.mktemp("rerun")
    data = root / "data"
    shutil.copytree(REPO_ROOT / "data", data, ignore=shutil.ignore_patterns("warehouse", "reports"))
    code = run_pipeline(
        data=str(data),
        warehouse=str(root / "warehouse"),
        reports=str(root / "reports"),
        deid_demo=True,
        quiet=True,
        instance=dg.DagsterInstance.ephemeral(),
        stream=io.StringIO(),
    )
    return {"code": code, "warehouse": Warehouse.at(root / "warehouse"), "reports": root / "reports"}


def test_the_rerun_succeeds_and_writes_the_same_tables(scored, rerun):
    assert scored["code"] == 0 and rerun["code"] == 0
    tables = local_tables(scored["warehouse"])
    assert tables == local_tables(rerun["warehouse"])
    assert len(tables) > 30
    for table, restricted in tables:
        if table != "judge_verdicts":
            for run_id in RUNS:
                assert scored["warehouse"].read(table, run_id, restricted=restricted) is not None, (table, run_id)
    assert table_differences(scored["warehouse"], rerun["warehouse"], tables, RUNS, EXCLUDED) == []


def test_the_rerun_writes_the_same_report_bytes(scored, rerun):
    names = sorted(p.relative_to(scored["reports"]) for p in scored["reports"].rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(rerun["reports"]) for p in rerun["reports"].rglob("*") if p.is_file())
    # each report folder's ledger of what passed the privacy scan (compared byte for byte below, like the reports)
    ledgers = [str(n) for n in names if n.name == ".published.json"]
    assert ledgers == [
        ".published.json",
        "base-41/.published.json",
        "base-41/cases/.published.json",
        "cand-42/.published.json",
        "cand-42/cases/.published.json",
    ]
    reports = [n for n in names if n.name != ".published.json"]
    # six reports per run, the index across runs, and one page per blocking, failed or review-queue case
    assert len([n for n in reports if n.parent.name != "cases"]) == 14
    assert {run: len([n for n in reports if n.parent == Path(run, "cases")]) for run in ("base-41", "cand-42")} == {
        "base-41": 10,
        "cand-42": 40,
    }  # cand-42: 37 planted cases and agent-016-cf, agent-019-cf, agent-020-cf
    changed = [
        str(name) for name in names if (scored["reports"] / name).read_bytes() != (rerun["reports"] / name).read_bytes()
    ]
    assert changed == []
    for name in names:
        text = (rerun["reports"] / name).read_text()
        assert str(rerun["reports"].parent) not in text and str(scored["reports"].parent) not in text, name


# The pool of a run is the union over every run of its dataset that exists when its qrels step runs (docs/privacy.md,
# Reruns; pooling over runs): on a warehouse that already holds cand-42, base-41's rerun pools cand-42's retrievals too.
# That growth is the pool's meaning, not a rerun artefact,
# so it is the one table left out of the same-warehouse comparison.
GROWS_WITH_THE_WAREHOUSE = ("judging_queue",)


@pytest.fixture(scope="module")
def rerun_in_place(rerun):
    """The second run scored once more over its own data root, warehouse and report folder."""
    warehouse, reports = rerun["warehouse"], rerun["reports"]
    code = run_pipeline(
        data=str(reports.parent / "data"),
        warehouse=str(warehouse.root),
        reports=str(reports),
        deid_demo=True,
        quiet=True,
        instance=dg.DagsterInstance.ephemeral(),
        stream=io.StringIO(),
    )
    return {"code": code, "warehouse": warehouse, "reports": reports}


def test_a_rerun_on_the_same_warehouse_equals_a_fresh_run(scored, rerun_in_place):
    """Reused verdicts keep what was recorded; claims, judge tables, every report and the index are the fresh run's."""
    assert rerun_in_place["code"] == 0
    tables = [t for t in local_tables(scored["warehouse"]) if t[0] not in GROWS_WITH_THE_WAREHOUSE]
    assert {"claims", "judge_verdicts", "judge_family_verdicts"} <= {table for table, _ in tables}
    assert table_differences(scored["warehouse"], rerun_in_place["warehouse"], tables, RUNS, EXCLUDED) == []
    names = sorted(p.relative_to(scored["reports"]) for p in scored["reports"].rglob("*") if p.is_file())
    assert Path("index.html") in names and Path("cand-42", "rag.html") in names
    assert names == sorted(
        p.relative_to(rerun_in_place["reports"]) for p in rerun_in_place["reports"].rglob("*") if p.is_file()
    )
    changed = [
        str(n) for n in names if (scored["reports"] / n).read_bytes() != (rerun_in_place["reports"] / n).read_bytes()
    ]
    assert changed == []
