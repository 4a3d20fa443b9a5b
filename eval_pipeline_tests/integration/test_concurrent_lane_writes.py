"""Two lanes replacing their own rows of one table partition at the same time, from two processes, keep both lanes."""

import os
import subprocess
import sys

import polars as pl
import pytest

from eval_pipeline.io.storage import storage_options_from_env
from eval_pipeline.io.warehouse import Warehouse

pytestmark = pytest.mark.integration

WRITES = 12
ROWS = 3

# One lane's writer, as the multiprocess executor runs it: its own process, the warehouse's own write path. A lane-only
# column makes the two lanes' first writes race to create the table with different schemas.
WRITER = f"""
import os
import sys
import polars as pl
from eval_pipeline.io.storage import storage_options_from_env
from eval_pipeline.io.warehouse import Warehouse

root, lane = sys.argv[1], sys.argv[2]
warehouse = Warehouse.at(root, storage_options_from_env(os.environ))
print("ready", flush=True)
sys.stdin.readline()
for i in range({WRITES}):
    frame = pl.DataFrame({{"trace_id": [f"{{lane}}-{{k}}" for k in range({ROWS})], "lane": [lane] * {ROWS},
                          "iteration": [i] * {ROWS}, f"only_{{lane}}": [f"{{lane}}{{i}}"] * {ROWS}}})
    warehouse.write_partition("stage_results", frame, "r1", within={{"lane": lane}})
"""


def race(root: str) -> list[subprocess.CompletedProcess]:
    """Start both writers, release them together once both have imported everything, wait for both."""
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, root, lane],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for lane in ("rag", "agent")
    ]
    for writer in writers:
        assert writer.stdout.readline().strip() == "ready"
    for writer in writers:
        writer.stdin.write("go\n")
        writer.stdin.flush()
    outcomes = []
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        outcomes.append(subprocess.CompletedProcess(writer.args, writer.returncode, out, err))
    return outcomes


def assert_both_lanes_survive(root: str) -> None:
    for outcome in race(root):
        assert outcome.returncode == 0, outcome.stderr[-3000:]
    warehouse = Warehouse.at(root, storage_options_from_env(os.environ))
    table = warehouse.read("stage_results", "r1").sort("lane", "trace_id")
    # Each lane's rows are exactly its last write: 3 rows, iteration 11, its own column filled, the other's null.
    assert table.select("lane", "trace_id", "iteration", "only_rag", "only_agent").rows() == [
        ("agent", "agent-0", WRITES - 1, None, "agent11"),
        ("agent", "agent-1", WRITES - 1, None, "agent11"),
        ("agent", "agent-2", WRITES - 1, None, "agent11"),
        ("rag", "rag-0", WRITES - 1, "rag11", None),
        ("rag", "rag-1", WRITES - 1, "rag11", None),
        ("rag", "rag-2", WRITES - 1, "rag11", None),
    ]
    # Every successful write is exactly one commit: 2 lanes x 12 writes, none lost or doubled.
    assert len(warehouse.history("stage_results")) == 2 * WRITES


def test_concurrent_lane_writes_on_a_local_warehouse(tmp_path):
    assert_both_lanes_survive(str(tmp_path / "warehouse"))


def test_concurrent_lane_writes_on_s3(bucket):
    assert_both_lanes_survive(f"s3://{bucket}/warehouse")


def test_a_lane_write_replaces_only_its_own_rows_of_its_run(tmp_path):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    for run_id, lane, n in (("r1", "rag", 2), ("r1", "agent", 2), ("r2", "rag", 1), ("r1", "rag", 1)):
        frame = pl.DataFrame({"trace_id": [f"{run_id}-{lane}-{k}" for k in range(n)], "lane": [lane] * n})
        warehouse.write_partition("stage_results", frame, run_id, within={"lane": lane})
    # r1/rag rewritten from 2 rows to 1; r1/agent (2 rows) and r2/rag (1 row) untouched: 4 rows.
    assert warehouse.read("stage_results").sort("run_id", "trace_id").select("run_id", "trace_id").rows() == [
        ("r1", "r1-agent-0"),
        ("r1", "r1-agent-1"),
        ("r1", "r1-rag-0"),
        ("r2", "r2-rag-0"),
    ]


def test_a_first_write_merges_into_a_table_the_other_lane_created_meanwhile(tmp_path, monkeypatch):
    warehouse = Warehouse.at(tmp_path / "warehouse")
    agent = pl.DataFrame({"trace_id": ["a1"], "lane": ["agent"], "only_agent": ["x"]})
    warehouse.write_partition("stage_results", agent, "r1", within={"lane": "agent"})
    # The interleaving of a creation race, made deterministic: the rag writer looked before the agent lane's commit
    # (no table yet) and writes after it.
    real_table = Warehouse._table
    looks = []

    def first_look_before_the_commit(self, *args, **kwargs):
        looks.append(args)
        return None if len(looks) == 1 else real_table(self, *args, **kwargs)

    monkeypatch.setattr(Warehouse, "_table", first_look_before_the_commit)
    rag = pl.DataFrame({"trace_id": ["r1"], "lane": ["rag"], "only_rag": ["y"]})
    warehouse.write_partition("stage_results", rag, "r1", within={"lane": "rag"})
    monkeypatch.undo()
    rows = (
        warehouse.read("stage_results", "r1").sort("lane").select("lane", "trace_id", "only_agent", "only_rag").rows()
    )
    assert rows == [("agent", "a1", "x", None), ("rag", "r1", None, "y")]
