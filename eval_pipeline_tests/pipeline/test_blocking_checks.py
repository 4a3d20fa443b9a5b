"""A lane whose table fails a blocking check does not reach its report; the other lane still does."""

import io

import dagster as dg
import polars as pl

from eval_pipeline.defs.agent import assets as agent_defs
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline


def test_a_failed_agent_check_blocks_the_agent_report_only(sample_copy, tmp_path, monkeypatch):
    real_score_tools = agent_defs.tool_scoring.score_tools

    def out_of_range(*args, **kwargs):
        scores, diffs = real_score_tools(*args, **kwargs)
        # a scorer bug: an F1 above 1 must never reach a report
        return scores.with_columns(
            pl.when(pl.int_range(pl.len()) == 0).then(1.5).otherwise(pl.col("tool_call_f1")).alias("tool_call_f1")
        ), diffs

    monkeypatch.setattr(agent_defs.tool_scoring, "score_tools", out_of_range)
    instance = dg.DagsterInstance.ephemeral()
    code = run_pipeline(
        data=str(sample_copy),
        run_ids=["base-41"],
        warehouse=str(tmp_path / "wh"),
        reports=str(tmp_path / "reports"),
        deid_demo=True,
        quiet=True,
        instance=instance,
        stream=io.StringIO(),
    )
    assert code == 1
    reports = sorted(p.name for p in (tmp_path / "reports" / "base-41").iterdir())
    assert reports == [".published.json", "rag.html", "rag.md"]
    checks = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("tool_scores"), "value_ranges")]
    )
    evaluation = next(iter(checks.values())).event.dagster_event.event_specific_data
    assert evaluation.passed is False
    assert "tool_call_f1" in evaluation.metadata["failures"].text
    warehouse = Warehouse.at(tmp_path / "wh")
    assert (
        warehouse.read("stage_results", "base-41", within={"lane": "agent"}) is None
        or warehouse.read("stage_results", "base-41", within={"lane": "agent"}).height == 0
    )
    assert warehouse.read("stage_results", "base-41", within={"lane": "rag"}).height > 0
