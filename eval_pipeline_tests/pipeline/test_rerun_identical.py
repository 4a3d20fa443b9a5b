"""A rerun of the bundled sample over unchanged inputs writes the same tables and the same report bytes.

The first run is the shared `scored` fixture; the second runs from a fresh copy of data/ into its own warehouse and
report folder, so the two differ in every path. Tables are compared as read (row order included), not sorted.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNS = ("base-41", "cand-42")

# Fields that differ between two runs by design; everything else must be equal. Empty today: the local judge
# reports no latency or cost (a served judge's `latency_ms`, `input_tokens`, `output_tokens`, `cost_usd` and
# `cached` in `claims` and `judge_verdicts` would belong here), tables carry no timestamps or Dagster run ids,
# and reports hold no paths or times. The Delta logs (commit timestamps, file names) are not table content.
EXCLUDED: dict[str, tuple[str, ...]] = {}


@pytest.fixture(scope="module")
def rerun(tmp_path_factory):
    """The sample scored again from a fresh copy, into another warehouse and report folder."""
    root = tmp_path_factory.mktemp("rerun")
    data = root / "data"
    shutil.copytree(REPO_ROOT / "data", data, ignore=shutil.ignore_patterns("warehouse", "reports"))
    code = run_pipeline(data=str(data), warehouse=str(root / "warehouse"), reports=str(root / "reports"), deid_demo=True,
                        quiet=True, instance=dg.DagsterInstance.ephemeral(), stream=io.StringIO())
    return {"code": code, "warehouse": Warehouse.at(root / "warehouse"), "reports": root / "reports"}


def _tables(warehouse: Warehouse) -> list[tuple[str, bool]]:
    """(table, restricted) for every Delta table under the warehouse root."""
    root = Path(warehouse.root)
    found = []
    for log in sorted(root.rglob("_delta_log")):
        parts = log.parent.relative_to(root).parts
        found.append((parts[-1], len(parts) > 1))
    return found


def _first_difference(first: pl.DataFrame, second: pl.DataFrame) -> str:
    if first.columns != second.columns or first.height != second.height:
        return f"columns {first.columns} vs {second.columns}, rows {first.height} vs {second.height}"
    for column in first.columns:
        if not first[column].equals(second[column]):
            rows = (first[column].ne_missing(second[column]) if first[column].dtype.is_numeric() or first[column].dtype == pl.String
                    else pl.Series([a != b for a, b in zip(first[column].to_list(), second[column].to_list(), strict=True)]))
            index = rows.arg_true()[0]
            return f"column {column}, row {index}: {first[column][index]!r} vs {second[column][index]!r}"
    return "equal"


def test_the_rerun_succeeds_and_writes_the_same_tables(scored, rerun):
    assert scored["code"] == 0 and rerun["code"] == 0
    tables = _tables(scored["warehouse"])
    assert tables == _tables(rerun["warehouse"])
    assert len(tables) > 30
    differences = []
    for table, restricted in tables:
        drop = EXCLUDED.get(table, ())
        for run_id in RUNS:
            first = scored["warehouse"].read(table, run_id, restricted=restricted)
            second = rerun["warehouse"].read(table, run_id, restricted=restricted)
            if table != "judge_verdicts":
                assert first is not None and first.height == second.height, (table, run_id)
            first, second = first.drop(drop, strict=False), second.drop(drop, strict=False)
            if not first.equals(second):
                differences.append(f"{table}[{run_id}]: {_first_difference(first, second)}")
    assert differences == []


def test_the_rerun_writes_the_same_report_bytes(scored, rerun):
    names = sorted(p.relative_to(scored["reports"]) for p in scored["reports"].rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(rerun["reports"]) for p in rerun["reports"].rglob("*") if p.is_file())
    # six reports per run, the index across runs, and one page per blocking, failed or review-queue case
    assert len([n for n in names if n.parent.name != "cases"]) == 14
    assert {run: len([n for n in names if n.parent == Path(run, "cases")]) for run in ("base-41", "cand-42")} == {
        "base-41": 10, "cand-42": 40}  # cand-42: 37 planted cases and agent-016-cf, agent-019-cf, agent-020-cf
    changed = [str(name) for name in names if (scored["reports"] / name).read_bytes() != (rerun["reports"] / name).read_bytes()]
    assert changed == []
    for name in names:
        text = (rerun["reports"] / name).read_text()
        assert str(rerun["reports"].parent) not in text and str(scored["reports"].parent) not in text, name
