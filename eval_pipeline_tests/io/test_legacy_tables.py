"""A table written unpartitioned by an earlier version (judge_verdicts, once an append-only store) is rewritten
partitioned by run on the first write of a run's rows, every row kept."""

import polars as pl
from deltalake import DeltaTable, write_deltalake

from eval_pipeline.io.warehouse import Warehouse


def test_an_unpartitioned_store_becomes_partitioned_by_run_and_keeps_its_rows(tmp_path):
    warehouse = Warehouse.at(str(tmp_path / "wh"))
    legacy = pl.DataFrame({"judge_version": ["v1", "v1"], "digest_a": [1, 2], "run_id": ["base-41", "base-41"]})
    write_deltalake(warehouse.uri("judge_verdicts"), legacy.to_arrow(), mode="append")
    assert DeltaTable(warehouse.uri("judge_verdicts")).metadata().partition_columns == []

    warehouse.write_partition(
        "judge_verdicts", pl.DataFrame({"judge_version": ["v1"], "digest_a": [3], "run_id": ["cand-42"]}), "cand-42"
    )
    assert DeltaTable(warehouse.uri("judge_verdicts")).metadata().partition_columns == ["run_id"]
    assert warehouse.read("judge_verdicts").sort("digest_a").rows() == [
        ("v1", 1, "base-41"),
        ("v1", 2, "base-41"),
        ("v1", 3, "cand-42"),
    ]

    # from then on a run's rows are replaced as in any other table
    warehouse.write_partition(
        "judge_verdicts", pl.DataFrame({"judge_version": ["v2"], "digest_a": [1], "run_id": ["base-41"]}), "base-41"
    )
    assert warehouse.read("judge_verdicts").sort("run_id", "digest_a").rows() == [
        ("v2", 1, "base-41"),
        ("v1", 3, "cand-42"),
    ]
    assert sorted(warehouse.runs("judge_verdicts")) == ["base-41", "cand-42"]
