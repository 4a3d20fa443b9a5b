"""The Delta warehouse: one partition replaced per write, a new version each time, older versions readable."""

import polars as pl
import pytest

from eval_pipeline.gating.versions import metric_versions
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.scoring.retrieval import side_by_side


def test_rewriting_a_partition_replaces_only_that_run_and_keeps_history(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a", "b"], "recall": [1.0, 0.5]}), "r1") == 0
    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["c"], "recall": [0.0]}), "r2") == 1
    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a", "b"], "recall": [1.0, 1.0]}), "r1") == 2
    assert warehouse.read("scores", "r1").sort("trace_id")["recall"].to_list() == [1.0, 1.0]
    assert warehouse.read("scores", "r2")["recall"].to_list() == [0.0]
    assert warehouse.read("scores", "r1", version=1).sort("trace_id")["recall"].to_list() == [1.0, 0.5]
    assert warehouse.runs("scores") == ["r1", "r2"]


def test_a_runs_row_count_comes_from_the_file_statistics_of_its_latest_version(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    assert warehouse.rows("scores", "r1") is None  # no table
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a", "b", "c"]}), "r1")
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["d"]}), "r2")
    assert (warehouse.rows("scores", "r1"), warehouse.rows("scores", "r2"), warehouse.rows("scores", "r3")) == (3, 1, 0)
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a"]}), "r1")  # replaced: the old files are gone
    assert warehouse.rows("scores", "r1") == 1
    warehouse.write_partition("lines", pl.DataFrame({"x": list(range(5))}), "r1", restricted=True)
    assert warehouse.rows("lines", "r1", restricted=True) == 5


def test_lane_scoped_write_keeps_the_other_lane(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    both = pl.DataFrame({"lane": ["rag", "agent"], "failures": [3, 4]})
    warehouse.write_partition("attribution_rollup", both, "r1")
    warehouse.write_partition(
        "attribution_rollup", pl.DataFrame({"lane": ["rag"], "failures": [9]}), "r1", within={"lane": "rag"}
    )
    rows = dict(warehouse.read("attribution_rollup", "r1").select("lane", "failures").iter_rows())
    assert rows == {"rag": 9, "agent": 4}


def test_restricted_tables_live_apart(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    warehouse.write_partition("traces", pl.DataFrame({"x": [1]}), "r1", restricted=True)
    assert (tmp_path / "_restricted" / "traces" / "_delta_log").is_dir()
    assert warehouse.read("traces", "r1") is None
    assert warehouse.read("traces", "r1", restricted=True)["x"].to_list() == [1]


def test_all_null_columns_and_empty_frames_are_writable(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    warehouse.write_partition("t", pl.DataFrame({"a": [None, None], "b": [[None], []]}), "r1")
    warehouse.write_partition("e", pl.DataFrame(schema={"a": pl.Int64}), "r1")
    assert warehouse.read("t", "r1").schema["a"] == pl.String
    assert warehouse.read("e", "r1").height == 0


def test_a_row_of_another_run_is_refused(tmp_path):
    with pytest.raises(ValueError, match="belong to another run"):
        Warehouse.at(tmp_path).write_partition("t", pl.DataFrame({"run_id": ["r2"], "x": [1]}), "r1")


def test_metric_side_by_side_across_versions(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    warehouse.write_partition(
        "retrieval_scores", pl.DataFrame({"trace_id": ["a", "b"], "recall_at_10": [0.5, 1.0]}), "r1"
    )
    warehouse.write_partition("retrieval_scores", pl.DataFrame({"trace_id": ["z"], "recall_at_10": [0.0]}), "r2")
    warehouse.write_partition(
        "retrieval_scores", pl.DataFrame({"trace_id": ["a", "b"], "recall_at_10": [1.0, 1.0]}), "r1"
    )
    table, old, new = metric_versions(warehouse, "retrieval_scores", "recall_at_10", "r1")
    assert (old, new) == (0, 2)
    assert table.select("trace_id", "old", "new", "delta", "changed").rows() == [
        ("a", 0.5, 1.0, 0.5, True),
        ("b", 1.0, 1.0, 0.0, False),
    ]
    assert side_by_side(
        pl.DataFrame({"run_id": ["r"], "trace_id": ["x"], "m": [None]}),
        pl.DataFrame({"run_id": ["r"], "trace_id": ["x"], "m": [1.0]}),
        "m",
    )["changed"].to_list() == [True]


def test_lanes_committing_in_either_order_leave_the_same_columns_and_rows(tmp_path):
    from eval_pipeline_tests.fixtures.warehouse_compare import local_tables, table_differences

    rag = pl.DataFrame({"run_id": ["r"], "case_id": ["c"], "pass_hat_1": [1.0], "pass_hat_2": [0.5], "lane": ["rag"]})
    agent = pl.DataFrame(
        {"run_id": ["r"], "case_id": ["d"], "pass_hat_1": [1.0], "pass_hat_2": [1.0], "pass_hat_3": [1.0]}
    ).with_columns(lane=pl.lit("agent"))
    first, second = Warehouse.at(tmp_path / "rag_first"), Warehouse.at(tmp_path / "agent_first")
    for warehouse, lanes in ((first, (rag, agent)), (second, (agent, rag))):
        for frame in lanes:
            warehouse.write_partition("reliability", frame, "r", within={"lane": frame["lane"][0]})
    # the agent lane's new column is appended and the partition column moved last by the merge: positions differ
    assert first.columns("reliability") == ["case_id", "pass_hat_1", "pass_hat_2", "lane", "run_id", "pass_hat_3"]
    assert second.columns("reliability") == ["run_id", "case_id", "pass_hat_1", "pass_hat_2", "pass_hat_3", "lane"]
    # names and rows agree, which is what the unordered comparison (the Celery test's) asks
    tables = local_tables(first)
    assert table_differences(first, second, tables, ["r"], ordered=False) == []
    assert table_differences(first, second, tables, ["r"]) != []
    # a missing column is still a difference
    second.write_partition("reliability", agent.drop("pass_hat_3"), "r", within={"lane": "agent"})
    assert table_differences(first, second, tables, ["r"], ordered=False) != []
