"""Checks answered while a fused step goes on (defs.deferred): with a validator process, a table's Great Expectations
checks come after its materialization, and still hold back its readers when they fail."""

import threading

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs import checks
from eval_pipeline.defs.deferred import Deferred
from eval_pipeline.defs.fused import fused_step
from eval_pipeline.defs.recording import materialized
from eval_pipeline.quality import remote, validator
from eval_pipeline.quality.contracts import NO_PERSONAL_DATA, RANGES, SCHEMA, TableContract
from eval_pipeline_tests.defs.memory_io import TABLES, MemoryIO, forget

RUNS = dg.StaticPartitionsDefinition(["r1"])
CONTRACT = TableContract(
    columns=("trace_id", "status", "note"),
    value_sets={"status": ("pass", "fail")},
    unique=("trace_id",),
    per_trace=False,
)
CALLED: list[str] = []


def _assets(status: str, note: str):
    common = {"partitions_def": RUNS, "io_manager_key": "warehouse_io"}

    @dg.asset(**common, check_specs=checks.specs("scores", CONTRACT))
    def scores():
        CALLED.append("scores")
        frame = pl.DataFrame({"trace_id": ["t1", "t2"], "status": ["pass", status], "note": ["ok", note]})
        return materialized(frame, check_results=checks.results("scores", CONTRACT, frame))

    @dg.asset(**common)
    def other():
        CALLED.append("other")
        return dg.MaterializeResult(value=pl.DataFrame({"x": [1]}))

    @dg.asset(**common)
    def report(scores: pl.DataFrame):
        CALLED.append("report")
        return dg.MaterializeResult(value=scores.head(1))

    return [scores, other, report]


@pytest.fixture(scope="module")
def running():
    own = validator.Validator(remote.__name__)
    yield own
    own.close()


@pytest.fixture
def served(running, monkeypatch):
    monkeypatch.setattr(validator, "_CURRENT", [running])
    forget()
    CALLED.clear()
    yield running


def _run(status: str, note: str = "fine") -> dg.ExecuteInProcessResult:
    step = fused_step("sor", _assets(status, note), description="three tables", restricted=frozenset())
    return dg.materialize(
        [step],
        instance=dg.DagsterInstance.ephemeral(),
        partition_key="r1",
        resources={"warehouse_io": MemoryIO()},
        raise_on_error=False,
    )


def _order(result: dg.ExecuteInProcessResult) -> list[str]:
    """The step's materializations and check evaluations by table, in the order they happened."""
    order = []
    for event in result.all_events:
        if event.is_step_materialization:
            order.append(event.asset_key.to_user_string())
        elif event.event_type_value == "ASSET_CHECK_EVALUATION":
            order.append(f"check {event.event_specific_data.asset_key.to_user_string()}")
    return order


def _evaluations(result: dg.ExecuteInProcessResult) -> dict[str, bool]:
    return {e.check_name: e.passed for e in result.get_asset_check_evaluations()}


def test_checks_answered_later_come_as_check_results_of_the_step(served):
    result = _run("fail")
    assert result.success and CALLED == ["scores", "other", "report"]
    assert _evaluations(result) == {SCHEMA: True, RANGES: True, NO_PERSONAL_DATA: True}
    # the two Great Expectations checks and the personal data scan were answered while `other` was computed and
    # written: they come after it, before `report`, which reads `scores`
    assert _order(result) == ["scores", "other", "check scores", "check scores", "check scores", "report"]


def test_a_failed_check_answered_later_still_holds_back_its_readers(served):
    result = _run("bogus")
    assert not result.success
    assert CALLED == ["scores", "other"]  # other does not read scores; report does, and is held back
    assert _evaluations(result) == {SCHEMA: True, RANGES: False, NO_PERSONAL_DATA: True}
    assert dg.AssetKey("report") not in TABLES


def test_personal_data_found_in_a_deferring_step_fails_its_check_once(served):
    result = _run("pass", note="write to jane.doe@example.com")
    assert not result.success and CALLED == ["scores", "other"]
    [privacy] = [e for e in result.get_asset_check_evaluations() if e.check_name == NO_PERSONAL_DATA]
    assert not privacy.passed and "EMAIL" in privacy.description


def test_without_a_validator_every_check_comes_with_the_materialization(monkeypatch):
    monkeypatch.setattr(validator, "_CURRENT", [])  # another test of this process may have started one
    forget()
    CALLED.clear()
    result = _run("bogus")
    assert not result.success and CALLED == ["scores", "other"]
    [materialization] = [e for e in result.get_asset_materialization_events() if e.asset_key == dg.AssetKey("scores")]
    types = [e.event_type_value for e in result.all_events if e.step_key == "sor"]
    # each check result right after its own materialization, before the next member's
    assert types.index("ASSET_CHECK_EVALUATION") < types.index(
        "ASSET_MATERIALIZATION", types.index("ASSET_MATERIALIZATION") + 1
    )
    assert materialization is not None


def test_a_member_that_fails_after_writing_a_table_still_answers_that_tables_checks(served):
    @dg.multi_asset(
        partitions_def=RUNS,
        specs=[dg.AssetSpec("scores").with_io_manager_key("warehouse_io"), dg.AssetSpec("rollup")],
        check_specs=[*checks.specs("scores", CONTRACT), *checks.specs("rollup", CONTRACT)],
    )
    def scores_then_rollup():
        frame = pl.DataFrame({"trace_id": ["t1"], "status": ["pass"], "note": ["ok"]})
        yield materialized(frame, asset_key="scores", check_results=checks.results("scores", CONTRACT, frame))
        checks.results("rollup", CONTRACT, frame)  # asked, but the rollup is never written
        raise dg.Failure("the rollup does not add up")

    step = fused_step("one", [scores_then_rollup], description="two tables", restricted=frozenset())
    result = dg.materialize(
        [step],
        instance=dg.DagsterInstance.ephemeral(),
        partition_key="r1",
        resources={"warehouse_io": MemoryIO()},
        raise_on_error=False,
    )
    assert not result.success
    assert {(e.asset_key.to_user_string(), e.check_name) for e in result.get_asset_check_evaluations()} == {
        ("scores", SCHEMA),
        ("scores", RANGES),
        ("scores", NO_PERSONAL_DATA),
    }
    assert dg.AssetKey("rollup") not in TABLES


def test_work_given_to_the_check_thread_runs_there_in_order_and_the_thread_ends_with_the_step():
    later = Deferred()
    threads: list[str] = []
    first = later.run(lambda: threads.append(threading.current_thread().name) or 1)
    second = later.run(lambda x: x * 2, 21)
    failing = later.run(lambda: 1 / 0)
    assert (first(), second()) == (1, 42) and threads[0].startswith("deferred-checks")
    with pytest.raises(ZeroDivisionError):
        failing()
    later.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("deferred-checks")]
