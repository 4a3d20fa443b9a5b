"""Reused tables (defs.reuse): a pure member whose inputs did not change is materialized again as it was."""

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.fused import fused_step, member_of_message
from eval_pipeline.defs.resources import SKIP_COLUMNS_METADATA_KEY
from eval_pipeline.defs.reuse import REUSE_METADATA_KEY, REUSE_TAG
from eval_pipeline_tests.defs.memory_io import TABLES, WRITES, MemoryIO, forget

RUNS = dg.StaticPartitionsDefinition(["r1"])
PURE = {REUSE_TAG: "inputs"}

CALLED: list[str] = []
SOURCE: dict[str, pl.DataFrame] = {}


def _assets(*, b_passes: bool = True):
    common = {"partitions_def": RUNS, "io_manager_key": "warehouse_io"}

    @dg.asset(**common)
    def a():
        CALLED.append("a")
        return dg.MaterializeResult(value=SOURCE["a"])

    @dg.asset(
        **common,
        ins={"a": dg.AssetIn(metadata={SKIP_COLUMNS_METADATA_KEY: ["noise"]})},
        check_specs=[dg.AssetCheckSpec("positive", asset="b", blocking=True)],
        op_tags=PURE,
        code_version="b-1",
    )
    def b(context: dg.AssetExecutionContext, a: pl.DataFrame):
        CALLED.append("b")
        frame = a.select(pl.col("id").sum().alias("total"))
        return dg.MaterializeResult(
            value=frame,
            data_version=dg.DataVersion(f"total={frame['total'][0]}"),
            check_results=[
                dg.AssetCheckResult(check_name="positive", passed=b_passes, metadata={"rows": frame.height})
            ],
        )

    @dg.asset(**common)
    def c(b: pl.DataFrame):
        CALLED.append("c")
        return dg.MaterializeResult(value=b.with_columns(half=pl.col("total") / 2))

    return [a, b, c]


def _run(instance: dg.DagsterInstance, **options) -> dg.ExecuteInProcessResult:
    CALLED.clear()
    WRITES.clear()
    step = fused_step("abc", _assets(**options), description="three tables", restricted=frozenset())
    return dg.materialize(
        [step], instance=instance, partition_key="r1", resources={"warehouse_io": MemoryIO()}, raise_on_error=False
    )


def _b(result: dg.ExecuteInProcessResult) -> dg.AssetMaterialization:
    [event] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("b")]
    return event.materialization


@pytest.fixture
def instance():
    forget()
    SOURCE["a"] = pl.DataFrame({"id": [1, 2, 3], "noise": ["x", "y", "z"]})
    with dg.DagsterInstance.ephemeral() as fresh:
        yield fresh
    forget()


def test_a_pure_member_over_unchanged_inputs_is_materialized_again_without_compute_or_write(instance):
    first = _run(instance)
    assert first.success and CALLED == ["a", "b", "c"] and WRITES == ["a", "b", "c"]
    recorded = _b(first).metadata[REUSE_METADATA_KEY].value
    assert recorded["data_version"] == "total=6" and [c["check"] for c in recorded["checks"]] == ["positive"]
    table = TABLES[dg.AssetKey("b")]

    # the other column of a changes, but b skips it: b's inputs are what they were
    SOURCE["a"] = SOURCE["a"].with_columns(noise=pl.lit("changed"))
    second = _run(instance)
    assert second.success
    assert CALLED == ["a", "c"] and WRITES == ["a", "c"]
    assert TABLES[dg.AssetKey("b")] is table
    again = _b(second)
    assert again.metadata["reused_from_run"].value == first.run_id
    assert again.tags["dagster/data_version"] == "total=6"
    [check] = second.get_asset_check_evaluations()
    assert check.passed and check.asset_key == dg.AssetKey("b") and check.check_name == "positive"
    assert "reused" in check.description and check.metadata["rows"].value == 1
    logged = [member_of_message(r.user_message) for r in instance.all_logs(second.run_id) if not r.dagster_event]
    assert [name for name, _ in filter(None, logged)] == ["a", "b", "c"]
    assert any(r.user_message.startswith("reused b in ") for r in instance.all_logs(second.run_id))

    # a third run reuses it again (the replayed materialization carries the fingerprint on)
    assert _run(instance).success and CALLED == ["a", "c"]


def test_a_changed_input_or_a_changed_stored_table_computes_it_again(instance):
    assert _run(instance).success
    SOURCE["a"] = pl.DataFrame({"id": [1, 2, 4], "noise": ["x", "y", "z"]})
    changed = _run(instance)
    assert changed.success and CALLED == ["a", "b", "c"]
    assert _b(changed).tags["dagster/data_version"] == "total=7"

    # rows written since by something else, or deleted: the recorded data version no longer describes the table
    TABLES[dg.AssetKey("b")] = pl.DataFrame({"total": [99]})
    assert _run(instance).success and CALLED == ["a", "b", "c"]
    # c reads b as b wrote it now, not the rows found in the store when b's reuse was looked into
    assert TABLES[dg.AssetKey("c")].to_dicts() == [{"total": 7, "half": 3.5}]
    del TABLES[dg.AssetKey("b")]
    assert _run(instance).success and CALLED == ["a", "b", "c"]
    assert TABLES[dg.AssetKey("b")]["total"].to_list() == [7]


def test_a_replayed_failed_blocking_check_still_holds_back_the_readers(instance):
    first = _run(instance, b_passes=False)
    assert not first.success and CALLED == ["a", "b"]
    second = _run(instance, b_passes=False)
    assert not second.success and CALLED == ["a"]  # b replayed with its failed check; c still not computed
    [check] = second.get_asset_check_evaluations()
    assert not check.passed and "reused" in check.description


class Settings(dg.ConfigurableResource):
    """Something a member may read besides its input tables."""

    threshold: int = 1


def test_a_member_tagged_pure_that_reads_a_resource_is_refused():
    @dg.asset(partitions_def=RUNS, op_tags=PURE)
    def impure(settings: Settings):
        return None

    with pytest.raises(dg.DagsterInvariantViolationError, match="reads resources"):
        fused_step("impure", [impure], description="", restricted=frozenset())
