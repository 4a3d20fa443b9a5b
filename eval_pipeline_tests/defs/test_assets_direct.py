"""Assets called directly: thin wrappers that load, call a pure scorer and record metadata."""

import dagster as dg
import polars as pl

from eval_pipeline.contracts import frames
from eval_pipeline.defs.generation.assets import answer_scores
from eval_pipeline.defs.ingestion.assets import run_manifest
from eval_pipeline.defs.resources import EvalConfig
from eval_pipeline.io import inputs, loaders
from eval_pipeline.io.storage import open_location


def test_run_manifest_asset_reads_the_partitions_run_yaml(sample_data):
    context = dg.build_asset_context(partition_key="cand-42")
    result = run_manifest(context, eval_config=EvalConfig(data_root=str(sample_data)))
    row = result.value.row(0, named=True)
    assert row["run_id"] == "cand-42" and row["mode"] == "gate"
    assert result.metadata["dagster/row_count"] == 1
    assert result.metadata["versions"].value["dataset_version"] == row["dataset_version"]


def test_answer_scores_asset_records_rows_schema_headline_and_checks(sample_data):
    location = open_location(sample_data)
    manifest = frames.manifest_row(loaders.load_manifest(location, "base-41"))
    cases = inputs.load_cases(location, manifest["dataset_version"]).frame
    from eval_pipeline.io import ingest

    traces = ingest.parse_traces(ingest.read_raw_lines(location, "base-41"), cases, "base-41").traces
    result = answer_scores(
        eval_config=EvalConfig(data_root=str(sample_data)),
        run_manifest=pl.DataFrame([manifest]),
        deid_traces=traces,
        deid_cases=cases,
    )
    scores = result.value
    rag_traces = traces.join(
        cases.filter(pl.col("lanes").list.contains("rag")).select("case_id"), on="case_id", how="semi"
    )
    assert scores.height == rag_traces.height == result.metadata["dagster/row_count"]
    assert {c.name for c in result.metadata["dagster/column_schema"].columns} >= {
        "contains_all",
        "answer_stage",
        "code_version",
    }
    assert result.metadata["failed"].value == scores.filter(pl.col("answer_stage") == "fail").height
    assert {r.check_name for r in result.check_results} == {"schema", "value_ranges", "complete", "no_personal_data"}
    assert all(r.passed for r in result.check_results)
    assert scores["code_version"].unique().to_list() == ["answer-1"]
