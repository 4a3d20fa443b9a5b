"""The warehouse and the inputs on an S3-compatible server (moto on loopback), through the same code as local paths."""

import io
import os
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.io.storage import storage_options_from_env
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline

pytestmark = pytest.mark.integration


def keys(client, bucket: str, prefix: str) -> list[str]:
    """Every object key under a prefix, without the empty directory markers pyarrow's create_dir leaves."""
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", []) if not item["Key"].endswith("/")]


def test_partitions_versions_and_the_restricted_area_on_s3(bucket, s3_env):
    warehouse = Warehouse.at(f"s3://{bucket}/warehouse", storage_options_from_env(os.environ))
    assert warehouse.storage_options["AWS_ENDPOINT_URL"] == s3_env.endpoint

    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a", "b"], "score": [0.5, 1.0]}), "r1") == 0
    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["c"], "score": [0.25]}), "r2") == 1
    # Re-scoring r1 replaces its rows as version 2; r2 is untouched.
    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a"], "score": [0.0]}), "r1") == 2

    latest = warehouse.read("scores").sort("run_id", "trace_id")
    assert latest.select("run_id", "trace_id", "score").rows() == [("r1", "a", 0.0), ("r2", "c", 0.25)]
    before = warehouse.read("scores", "r1", version=1).sort("trace_id")
    assert before.select("trace_id", "score").rows() == [("a", 0.5), ("b", 1.0)]
    assert warehouse.runs("scores") == ["r1", "r2"]
    assert [entry["operation"] for entry in warehouse.history("scores")] == ["WRITE", "WRITE", "WRITE"]

    # Lane-scoped replacement: rewriting the rag lane of r1 keeps the agent lane's rows.
    for lane, rows in (("rag", 2), ("agent", 1), ("rag", 1)):
        frame = pl.DataFrame({"trace_id": [f"{lane}{i}" for i in range(rows)], "lane": [lane] * rows})
        warehouse.write_partition("stage_results", frame, "r1", within={"lane": lane})
    lanes = warehouse.read("stage_results", "r1").sort("trace_id")
    assert lanes.select("lane", "trace_id").rows() == [("agent", "agent0"), ("rag", "rag0")]

    warehouse.write_partition(
        "raw_traces", pl.DataFrame({"trace_id": ["a"], "user_input": ["call me at 555-0100"]}), "r1", restricted=True
    )
    assert warehouse.exists("raw_traces", restricted=True) and not warehouse.exists("raw_traces")
    objects = keys(s3_env.client(), bucket, "warehouse/")
    restricted = [k for k in objects if k.startswith("warehouse/_restricted/")]
    assert restricted and all(k.startswith("warehouse/_restricted/raw_traces/") for k in restricted)
    assert not [k for k in objects if k.startswith("warehouse/raw_traces/")]
    assert "warehouse/scores/_delta_log/00000000000000000002.json" in objects


def upload(client, folder: Path, bucket: str, prefix: str) -> int:
    """Copy a local folder to s3://bucket/prefix/; the number of files."""
    files = [p for p in sorted(folder.rglob("*")) if p.is_file()]
    for path in files:
        client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(folder).as_posix()}")
    return len(files)


def test_a_sample_run_reads_inputs_from_s3_and_writes_warehouse_and_reports_there(bucket, s3_env, sample_inputs):
    client = s3_env.client()
    assert upload(client, sample_inputs, bucket, "data") > 0
    summary = io.StringIO()
    code = run_pipeline(
        data=f"s3://{bucket}/data",
        run_ids=["base-41"],
        warehouse=f"s3://{bucket}/warehouse",
        reports=f"s3://{bucket}/reports",
        deid_demo=True,
        quiet=True,
        instance=dg.DagsterInstance.ephemeral(),
        stream=summary,
    )
    assert code == 0, summary.getvalue()

    warehouse = Warehouse.at(f"s3://{bucket}/warehouse", storage_options_from_env(os.environ))
    # base-41: 84 agent + 52 rag trace lines, all valid.
    assert warehouse.read("deid_traces", "base-41").height == 136
    assert warehouse.read("trace_rejects", "base-41").height == 0
    # agent lane 84 traces x 7 stages; rag lane 61 traces (52 + 3 two-lane cases x 3 attempts) x 5 stages.
    assert warehouse.read("stage_results", "base-41", within={"lane": "agent"}).height == 588
    assert warehouse.read("stage_results", "base-41", within={"lane": "rag"}).height == 305
    assert warehouse.read("retrieval_scores", "base-41").height == 61
    assert warehouse.read("tool_scores", "base-41").height == 84
    written = keys(client, bucket, "reports/base-41/")
    reports = sorted(k.rsplit("/", 1)[1] for k in written if "/cases/" not in k)
    # the folder's ledger of what passed the privacy scan goes to the store too
    assert reports == [".published.json", "agent.html", "agent.md", "gate.html", "gate.md", "rag.html", "rag.md"]
    # the case pages and the index go to the same store
    assert any("/cases/" in k for k in written) and keys(client, bucket, "reports/index.html")
    assert "s3://" in summary.getvalue() and f"s3://{bucket}/reports/base-41/rag.md" in summary.getvalue()
    # Personal data stays in the restricted area: no restricted table leaks to the top level.
    top = {k.split("/")[1] for k in keys(client, bucket, "warehouse/")}
    assert "_restricted" in top and "raw_traces" not in top and "deid_traces" in top
