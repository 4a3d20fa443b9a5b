"""Headline numbers are typed metadata on every partition's materialization, so Dagster's asset plots draw them."""

import dagster as dg
import pytest


def _latest(instance, key: dg.AssetKey, run: str):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[run]), limit=1
    ).records
    assert records, f"{key.to_user_string()} of {run} was never materialized"
    return records[0].asset_materialization.metadata


@pytest.mark.parametrize(
    ("asset", "name", "kind"),
    [
        ("retrieval_scores", "mean_recall_at_10", dg.FloatMetadataValue),
        ("grounding_scores", "mean_grounding_rate", dg.FloatMetadataValue),
        ("tool_scores", "mean_tool_call_f1", dg.FloatMetadataValue),
        ("gate_results", "gates_failed", dg.IntMetadataValue),
        ("gate_report", "gates_failed", dg.IntMetadataValue),
        ("deid_cases", "cases", dg.IntMetadataValue),
    ],
)
def test_a_headline_metric_is_a_number_on_each_runs_materialization(scored, asset, name, kind):
    values = {}
    for run in ("base-41", "cand-42"):
        entry = _latest(scored["instance"], dg.AssetKey(asset), run)[name]
        assert isinstance(entry, kind), (asset, name, type(entry))
        values[run] = entry.value
    if asset.startswith("gate_"):
        # the baseline is not gated; the candidate fails the planted gates
        assert values == {"base-41": 0, "cand-42": 8}
