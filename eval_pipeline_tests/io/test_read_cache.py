"""A table read again at the version it was read at is the frame read before; any new version is read anew."""

import shutil

import dagster as dg
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from eval_pipeline.defs.resources import ONLY_COLUMNS_METADATA_KEY, SKIP_COLUMNS_METADATA_KEY, DeltaWarehouseIOManager
from eval_pipeline.io.read_cache import READS, ReadCache
from eval_pipeline.io.warehouse import Warehouse


@pytest.fixture(autouse=True)
def _empty_cache():
    READS.clear()
    yield
    READS.clear()


def test_a_second_read_at_the_same_version_is_the_frame_read_before(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a", "b"], "recall": [1.0, 0.5]}), "r1")
    first = warehouse.read("scores", "r1")
    hits = READS.hits
    again = warehouse.read("scores", "r1")
    assert again is first and READS.hits == hits + 1
    # another filter or other columns are other reads
    assert warehouse.read("scores", "r1", columns=["recall"]).columns == ["recall"]
    assert warehouse.read("scores", "r1", within={"trace_id": ["b"]})["trace_id"].to_list() == ["b"]
    assert READS.hits == hits + 1


def test_a_new_version_is_read_anew_and_an_old_one_still_reads_as_it_was(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a"], "recall": [1.0]}), "r1")
    before = warehouse.read("scores", "r1")
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a"], "recall": [0.0]}), "r1")
    assert warehouse.read("scores", "r1")["recall"].to_list() == [0.0]
    assert_frame_equal(warehouse.read("scores", "r1", version=0), before)


def test_a_table_made_again_at_the_same_place_is_not_taken_for_the_old_one(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a"], "recall": [1.0]}), "r1")
    assert warehouse.read("scores", "r1")["recall"].to_list() == [1.0]
    shutil.rmtree(tmp_path / "scores")
    assert warehouse.write_partition("scores", pl.DataFrame({"trace_id": ["a"], "recall": [0.25]}), "r1") == 0
    assert warehouse.read("scores", "r1")["recall"].to_list() == [0.25]


def test_the_budget_drops_the_least_recently_used_and_large_frames_are_not_kept():
    frame = pl.DataFrame({"x": list(range(1000))})  # 8,000 bytes
    cache = ReadCache(budget_bytes=20_000, entry_bytes=10_000)
    cache.put("a", frame)
    cache.put("b", frame)
    assert cache.get("a") is frame  # "b" is now the least recently used
    cache.put("c", frame)
    assert cache.get("b") is None and cache.get("a") is frame and cache.get("c") is frame
    assert cache.held_bytes() == 16_000
    cache.put("big", pl.DataFrame({"x": list(range(2000))}))
    assert cache.get("big") is None and cache.held_bytes() == 16_000


def test_the_io_manager_reads_only_the_named_columns_a_table_has(tmp_path):
    warehouse = Warehouse.at(tmp_path)
    frame = pl.DataFrame({"trace_id": ["a"], "recall": [1.0], "retrieval_stage": ["pass"]})
    warehouse.write_partition("scores", frame, "r1")
    io = DeltaWarehouseIOManager(warehouse_root=str(tmp_path))
    only = {ONLY_COLUMNS_METADATA_KEY: ["trace_id", "retrieval_stage", "answer_stage"]}
    loaded = io.load(dg.AssetKey("scores"), "r1", restricted=False, metadata=only)
    assert loaded.columns == ["trace_id", "retrieval_stage"]
    skipped = io.load(dg.AssetKey("scores"), "r1", restricted=False, metadata={SKIP_COLUMNS_METADATA_KEY: ["recall"]})
    assert skipped.columns == ["trace_id", "retrieval_stage", "run_id"]
    lines = pl.DataFrame({"source_file": ["t.jsonl"], "line": [1], "raw": [b"{}"]})
    warehouse.write_partition("lines", lines, "r1")
    ordered = io.load(dg.AssetKey("lines"), "r1", restricted=False, metadata={ONLY_COLUMNS_METADATA_KEY: ["raw"]})
    assert sorted(ordered.columns) == ["line", "raw", "run_id", "source_file"]  # the columns of its order come along
