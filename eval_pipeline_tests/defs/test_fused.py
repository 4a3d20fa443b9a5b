"""Fused steps (defs.fused): assets sharing one step keep the tables, reads, checks and failure semantics each had."""

import threading

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.fused import MEMBER_DONE, Concurrent, fused_step, member_of_message
from eval_pipeline.defs.resources import ONLY_COLUMNS_METADATA_KEY, SKIP_COLUMNS_METADATA_KEY
from eval_pipeline.io.warehouse import FrameBatches
from eval_pipeline_tests.defs.memory_io import READS, TABLES, WRITES, MemoryIO

RUNS = dg.StaticPartitionsDefinition(["r1"])


CALLED: list[str] = []


def _assets(*, c_passes: bool = True, b_raises: bool = False):
    common = {"partitions_def": RUNS, "io_manager_key": "warehouse_io"}

    @dg.asset(**common)
    def a(context: dg.AssetExecutionContext):
        CALLED.append("a")
        return dg.MaterializeResult(value=pl.DataFrame({"id": [1, 2], "big": ["x", "y"]}))

    @dg.asset(**common, ins={"a": dg.AssetIn(metadata={SKIP_COLUMNS_METADATA_KEY: ["big"]})})
    def b(a: pl.DataFrame):
        CALLED.append("b")
        if b_raises:
            raise dg.Failure(description="b could not complete")
        return dg.MaterializeResult(value=a.with_columns(double=pl.col("id") * 2))

    @dg.asset(**common, check_specs=[dg.AssetCheckSpec("positive", asset="c", blocking=True)])
    def c(context: dg.AssetExecutionContext, a: pl.DataFrame):
        CALLED.append("c")
        assert context.partition_key == "r1"
        return dg.MaterializeResult(
            value=a.select(pl.col("id").sum()),
            check_results=[dg.AssetCheckResult(check_name="positive", passed=c_passes)],
        )

    @dg.asset(**common)
    def d(c: pl.DataFrame, b: pl.DataFrame):
        CALLED.append("d")
        return dg.MaterializeResult(value=c.join(b, how="cross"))

    return [a, b, c, d]


INSTANCE = dg.DagsterInstance.ephemeral()


def _run(step: dg.AssetsDefinition, selection=None) -> dg.ExecuteInProcessResult:
    before = dict(TABLES)
    READS.clear()
    CALLED.clear()
    result = dg.materialize(
        [step],
        instance=INSTANCE,
        selection=selection,
        partition_key="r1",
        resources={"warehouse_io": MemoryIO()},
        raise_on_error=False,
    )
    assert before.keys() <= TABLES.keys()
    return result


@pytest.fixture(autouse=True)
def _empty():
    TABLES.clear()
    yield
    TABLES.clear()


def _step(**options) -> dg.AssetsDefinition:
    return fused_step("abcd", _assets(**options), description="four tables", restricted=frozenset())


def test_one_step_writes_every_table_with_its_own_spec_and_reads_a_once_for_both_readers():
    step = _step()
    assert {k.to_user_string() for k in step.keys} == {"a", "b", "c", "d"}
    assert step.can_subset
    # lineage: each table keeps its own upstream edges
    assert step.asset_deps[dg.AssetKey("d")] == {dg.AssetKey("b"), dg.AssetKey("c")}
    result = _run(step)
    assert result.success
    assert CALLED == ["a", "b", "c", "d"]
    assert TABLES[dg.AssetKey("d")].to_dicts() == [
        {"id": 3, "id_right": 1, "double": 2},
        {"id": 3, "id_right": 2, "double": 4},
    ]
    # a is read once (b skips "big", c needs it: the shared read keeps it) and each of b and c once by d
    assert sorted(READS) == [("a", "r1", []), ("b", "r1", []), ("c", "r1", [])]
    assert len(result.get_step_success_events()) == 1
    done = [member_of_message(r.user_message) for r in INSTANCE.all_logs(result.run_id) if not r.dagster_event]
    assert [name for name, _ in filter(None, done)] == ["a", "b", "c", "d"]


def test_a_failed_blocking_check_holds_back_its_readers_only_and_fails_the_step():
    result = _run(_step(c_passes=False))
    assert not result.success
    assert CALLED == ["a", "b", "c"]  # d reads c: not computed
    assert set(TABLES) == {dg.AssetKey("a"), dg.AssetKey("b"), dg.AssetKey("c")}
    [failure] = result.get_step_failure_events()
    assert "blocking asset check" in failure.event_specific_data.error.message


def test_a_member_that_raises_lets_the_members_not_reading_it_run_then_fails_with_its_error():
    result = _run(_step(b_raises=True))
    assert not result.success
    assert CALLED == ["a", "b", "c"]  # c does not read b and runs; d does
    assert dg.AssetKey("c") in TABLES and dg.AssetKey("d") not in TABLES
    [failure] = result.get_step_failure_events()
    assert "b could not complete" in str(failure.event_specific_data.error.to_string())


def test_a_selection_computes_only_its_members_and_reads_the_others_tables_from_the_store():
    assert _run(_step()).success
    stored_a = TABLES[dg.AssetKey("a")]
    result = _run(_step(), selection=["c", "d"])
    assert result.success
    assert CALLED == ["c", "d"]
    assert TABLES[dg.AssetKey("a")] is stored_a
    assert {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()} == {"c", "d"}


def test_the_done_line_parses_back():
    line = MEMBER_DONE.format(name="parsed_traces", seconds=3.25)
    assert member_of_message(line) == ("parsed_traces", 3.25)
    assert member_of_message("computed nothing useful") is None


def test_a_member_computing_two_tables_together_writes_only_the_selected_one_and_still_drains_its_batches():
    drained = []

    def batches():
        for i in range(3):
            drained.append(i)
            yield pl.DataFrame({"id": [i]})

    @dg.multi_asset(
        partitions_def=RUNS,
        outs={
            "lines": dg.AssetOut(io_manager_key="warehouse_io"),
            "rejects": dg.AssetOut(io_manager_key="warehouse_io"),
        },
        check_specs=[dg.AssetCheckSpec("counted", asset="rejects", blocking=True)],
    )
    def split(context: dg.AssetExecutionContext):
        # what parsed_traces does: the second table is counted while the first one's batches are written
        yield dg.MaterializeResult(asset_key="lines", value=FrameBatches(batches(), {"id": pl.Int64}))
        yield dg.MaterializeResult(
            asset_key="rejects",
            value=pl.DataFrame({"seen": [len(drained)]}),
            check_results=[dg.AssetCheckResult(check_name="counted", passed=len(drained) == 3)],
        )

    step = fused_step("split_step", [split], description="two tables", restricted=frozenset())
    result = _run(step, selection=["rejects"])
    assert result.success
    assert set(TABLES) == {dg.AssetKey("rejects")}
    assert TABLES[dg.AssetKey("rejects")]["seen"].to_list() == [3]
    [check] = result.get_asset_check_evaluations()
    assert (check.asset_key, check.passed) == (dg.AssetKey("rejects"), True)


def test_members_out_of_graph_order_are_refused_when_the_step_is_defined():
    a, b, c, d = _assets()
    with pytest.raises(dg.DagsterInvariantViolationError, match="d reads a table a later member writes"):
        fused_step("wrong_order", [a, d, b, c], description="d before its inputs", restricted=frozenset())


def test_a_member_that_names_its_columns_gets_only_those_from_the_one_read_the_step_makes():
    common = {"partitions_def": RUNS, "io_manager_key": "warehouse_io"}
    seen: dict[str, list[str]] = {}

    @dg.asset(**common)
    def wide(context: dg.AssetExecutionContext):
        return dg.MaterializeResult(value=pl.DataFrame({"id": [1], "score": [0.5], "verdict": ["pass"]}))

    @dg.asset(**common, ins={"wide": dg.AssetIn(metadata={ONLY_COLUMNS_METADATA_KEY: ["id", "verdict", "absent"]})})
    def narrow(wide: pl.DataFrame):
        seen["narrow"] = wide.columns
        return dg.MaterializeResult(value=wide)

    @dg.asset(**common)
    def whole(wide: pl.DataFrame):
        seen["whole"] = wide.columns
        return dg.MaterializeResult(value=wide)

    result = _run(fused_step("cols", [wide, narrow, whole], description="three tables", restricted=frozenset()))
    assert result.success
    assert seen == {"narrow": ["id", "verdict"], "whole": ["id", "score", "verdict"]}
    assert [r for r in READS if r[0] == "wide"] == [("wide", "r1", [])]  # one read, every column


def _chains(*, e_raises: bool = False, f_passes: bool = True):
    """a → (b, c on one chain; e → f → g on another, at the same time) → d: b and e wait for each other."""
    common = {"partitions_def": RUNS, "io_manager_key": "warehouse_io"}
    b_started, e_started = threading.Event(), threading.Event()

    @dg.asset(**common)
    def a():
        CALLED.append("a")
        return dg.MaterializeResult(value=pl.DataFrame({"id": [1, 2]}))

    @dg.asset(**common)
    def b(context: dg.AssetExecutionContext, a: pl.DataFrame):
        b_started.set()
        # one after the other, e would only start once b has ended: this waits for e to have started
        assert e_started.wait(10), "e did not start while b was being computed"
        CALLED.append(f"b:{threading.current_thread().name}")
        return dg.MaterializeResult(value=a.with_columns(b=pl.col("id") * 10))

    @dg.asset(**common)
    def c(b: pl.DataFrame):
        CALLED.append("c")
        return dg.MaterializeResult(value=b.select(total=pl.col("b").sum()))

    @dg.asset(**common)
    def e(context: dg.AssetExecutionContext, a: pl.DataFrame):
        e_started.set()
        assert b_started.wait(10), "b did not start while e was being computed"
        context.log.info("e logs from its own thread")
        CALLED.append(f"e:{threading.current_thread().name}")
        if e_raises:
            raise dg.Failure(description="e could not complete")
        return dg.MaterializeResult(value=a.with_columns(e=pl.col("id") + 100))

    @dg.asset(**common, check_specs=[dg.AssetCheckSpec("small", asset="f", blocking=True)])
    def f(e: pl.DataFrame):
        CALLED.append("f")
        return dg.MaterializeResult(
            value=e.select(top=pl.col("e").max()),
            check_results=[dg.AssetCheckResult(check_name="small", passed=f_passes)],
        )

    @dg.asset(**common)
    def g(f: pl.DataFrame):
        CALLED.append("g")
        return dg.MaterializeResult(value=f)

    @dg.asset(**common)
    def d(c: pl.DataFrame):
        CALLED.append("d")
        return dg.MaterializeResult(value=c.with_columns(done=pl.lit(True)))

    return a, Concurrent([b, c], [e, f, g]), d


def _called(name: str) -> str:
    return next(c for c in CALLED if c.startswith(f"{name}:"))


def test_chains_of_a_concurrent_group_are_computed_at_the_same_time_each_writing_its_own_tables():
    WRITES.clear()
    step = fused_step("chains", _chains(), description="two chains", restricted=frozenset())
    assert step.asset_deps[dg.AssetKey("d")] == {dg.AssetKey("c")}
    result = _run(step)
    assert result.success
    assert _called("b") != _called("e")  # two threads
    assert _called("e").startswith("e:step-chain-e")
    assert TABLES[dg.AssetKey("g")].to_dicts() == [{"top": 102}]
    assert TABLES[dg.AssetKey("d")].to_dicts() == [{"total": 30, "done": True}]
    # every table is materialized once, as the step's own event, with the metadata of the write that stored it
    materialized = result.get_asset_materialization_events()
    assert sorted(e.asset_key.to_user_string() for e in materialized) == ["a", "b", "c", "d", "e", "f", "g"]
    by_key = {e.asset_key.to_user_string(): e.materialization.metadata for e in materialized}
    assert by_key["g"]["rows_written"].value == 1 and by_key["b"]["rows_written"].value == 2
    assert WRITES.count("g") == 1
    [check] = result.get_asset_check_evaluations()
    assert (check.asset_key, check.passed) == (dg.AssetKey("f"), True)
    messages = [r.user_message for r in INSTANCE.all_logs(result.run_id) if not r.dagster_event]
    assert "e logs from its own thread" in messages
    assert sorted(name for name, _ in filter(None, map(member_of_message, messages))) == list("abcdefg")


def test_a_member_failing_on_one_chain_leaves_the_other_chain_whole_and_fails_the_step_with_its_error():
    result = _run(fused_step("chains", _chains(e_raises=True), description="", restricted=frozenset()))
    assert not result.success
    assert {c.split(":")[0] for c in CALLED} == set("abcde")  # e raised: f and g, which read it, are not computed
    assert set(TABLES) == {dg.AssetKey(k) for k in "abcd"}
    [failure] = result.get_step_failure_events()
    assert "e could not complete" in str(failure.event_specific_data.error.to_string())


def test_a_failed_blocking_check_on_one_chain_holds_back_its_own_readers_only():
    result = _run(fused_step("chains", _chains(f_passes=False), description="", restricted=frozenset()))
    assert not result.success
    assert "g" not in CALLED and "d" in CALLED
    assert set(TABLES) == {dg.AssetKey(k) for k in "abcdef"}
    [failure] = result.get_step_failure_events()
    assert "blocking asset check" in failure.event_specific_data.error.message


def test_a_selection_starts_no_thread_for_a_chain_it_does_not_touch():
    assert _run(fused_step("chains", _chains(), description="", restricted=frozenset())).success
    threads = threading.active_count()
    result = _run(fused_step("chains", _chains(), description="", restricted=frozenset()), selection=["c", "d"])
    assert result.success
    assert CALLED == ["c", "d"]
    assert threading.active_count() == threads


def test_a_chain_reading_what_another_chain_of_its_group_writes_is_refused_when_the_step_is_defined():
    a, group, d = _chains()
    b, c = group.chains[0]
    e, f, g = group.chains[1]
    with pytest.raises(dg.DagsterInvariantViolationError, match="c reads a table a chain computed at the same time"):
        fused_step("crossed", [a, Concurrent([b, e], [c])], description="", restricted=frozenset())


def test_a_group_with_a_row_limit_runs_its_chains_one_after_the_other_on_a_larger_run():
    a, group, _ = _chains()
    limited = Concurrent([_copy_of("b_alone", "a")], [_copy_of("e_alone", "a")], rows_at_most=("a", 1))
    result = _run(fused_step("limited", [a, limited], description="", restricted=frozenset()))
    assert result.success
    assert [c.split(":")[0] for c in CALLED] == ["a", "b_alone", "e_alone"]
    assert len({c.split(":")[1] for c in CALLED[1:]}) == 1  # both on the step's thread
    messages = [r.user_message for r in INSTANCE.all_logs(result.run_id) if not r.dagster_event]
    assert (
        "chains b_alone, e_alone one after the other: a holds 2 rows of this run (at the same time up to 1)" in messages
    )
    # within the limit, chains that wait for each other run on two threads
    within = Concurrent(*group.chains, rows_at_most=("a", 2))
    result = _run(fused_step("within", [a, within], description="", restricted=frozenset()))
    assert result.success
    assert _called("b") != _called("e")


class _FailingWrites(MemoryIO):
    """The memory warehouse, failing to write table e."""

    def write(self, asset_key, run_id, obj, *, restricted) -> dict:
        if asset_key == dg.AssetKey("e"):
            raise OSError("disk full while writing e")
        return super().write(asset_key, run_id, obj, restricted=restricted)


def _copy_of(name: str, upstream: str) -> dg.AssetsDefinition:
    """A toy member writing what it reads of `upstream`, recording its name and thread in CALLED."""

    @dg.asset(name=name, partitions_def=RUNS, io_manager_key="warehouse_io", ins={"rows": dg.AssetIn(key=upstream)})
    def member(rows: pl.DataFrame):
        CALLED.append(f"{name}:{threading.current_thread().name}")
        return dg.MaterializeResult(value=rows)

    return member


def test_a_table_a_chain_could_not_write_holds_back_its_readers_after_the_group():
    @dg.asset(partitions_def=RUNS, io_manager_key="warehouse_io")
    def a():
        return dg.MaterializeResult(value=pl.DataFrame({"id": [1]}))

    b, e, f, d = _copy_of("b", "a"), _copy_of("e", "a"), _copy_of("f", "e"), _copy_of("d", "f")
    # rows of an earlier run of the partition are in the store: nothing may be computed from them
    TABLES[dg.AssetKey("e")] = TABLES[dg.AssetKey("f")] = pl.DataFrame({"id": [99]})
    CALLED.clear()

    step = fused_step("failing", [a, Concurrent([b], [e, f]), d], description="", restricted=frozenset())
    result = dg.materialize(
        [step],
        instance=INSTANCE,
        partition_key="r1",
        resources={"warehouse_io": _FailingWrites()},
        raise_on_error=False,
    )
    assert not result.success
    assert sorted(c.split(":")[0] for c in CALLED) == ["b", "e"]  # f and d read e, which was not written
    assert TABLES[dg.AssetKey("f")]["id"].to_list() == [99]
    assert dg.AssetKey("d") not in TABLES
    [failure] = result.get_step_failure_events()
    assert "disk full while writing e" in str(failure.event_specific_data.error.to_string())
    messages = [r.user_message for r in INSTANCE.all_logs(result.run_id) if not r.dagster_event]
    assert "chain e stopped: disk full while writing e" in messages
