"""Fewer, fatter steps: several asset definitions computed one after another in one Dagster step.

A step costs Dagster a fixed amount of bookkeeping whatever its size (start and end events, the version information
of every parent, a partition lookup per loaded input), and each step read its inputs from the warehouse again.
`fused_step` keeps every table, `code_version`, blocking check and lineage edge of its members: it is one
subsettable `multi_asset` with their specs and check specs, whose body calls each member's own compute function in
order. Inputs are read once per step (one read serves every member, each taking its own columns); a member reads a
table another member of the step wrote after that write, exactly as it would have loaded it as an input.

What a run of separate steps guaranteed still holds: a member downstream of a member that failed, or whose blocking
check failed, is not computed (its tables are not written); members that do not depend on it still are; and the
step then fails with the first error, or with Dagster's blocking-check failure.

A step may compute independent chains of members at the same time (`Concurrent`): the first chain on the step's
thread, every other on a thread of its own that writes its tables itself and hands the step their events (the step
yields them, so Dagster records every materialization and check as its own). A run is interpreter-bound for much of
its time and leaves the second core idle; the RAG and agent scorers of a run read nothing of each other's. Chains of
one group read no table another chain of the group writes; what follows the group reads their tables after every
chain has ended and their checks are in. Over 400 lines: it holds a step's whole execution, members and chains, which
share one set of failure rules.
"""

from __future__ import annotations

import contextvars
import inspect
import queue
import re
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import dagster as dg
import polars as pl

from eval_pipeline.defs.deferred import Deferred, deferring
from eval_pipeline.defs.resources import (
    MEMBER_UPSTREAM,
    RESTRICTED_METADATA_KEY,
    Written,
)
from eval_pipeline.defs.reuse import REUSE_TAG, inputs_fingerprint, recorded, replaced, replayed
from eval_pipeline.defs.step_reads import Reads
from eval_pipeline.io.warehouse import FrameBatches

__all__ = [
    "Concurrent",
    "MEMBER_DONE",
    "MEMBER_REUSED",
    "current_member_key",
    "fused_step",
    "materializing_key",
    "member_of_message",
    "restricted_keys",
]

WAREHOUSE_IO = "warehouse_io"
# The log line each member ends with (the progress logger and the benchmark read it): op name, then seconds.
MEMBER_DONE = "computed {name} in {seconds:.2f}s"
# ... or, for a member whose inputs did not change (defs.reuse), the line that says it was not computed again.
MEMBER_REUSED = "reused {name} in {seconds:.2f}s: its inputs are those of run {run}"
_MEMBER_LINE = re.compile(r"(?:computed|reused) (?P<name>\S+) in (?P<seconds>[0-9]+(?:\.[0-9]+)?)s(?:: .*)?", re.S)

_member_key: ContextVar[dg.AssetKey | None] = ContextVar("eval_pipeline_member_key", default=None)


def current_member_key() -> dg.AssetKey | None:
    """The key of the single-table member being computed in a fused step (None elsewhere)."""
    return _member_key.get()


def materializing_key(context: dg.AssetExecutionContext) -> dg.AssetKey:
    """The table being materialized: the fused step's current single-table member, else the context's asset."""
    return current_member_key() or context.asset_key


def member_of_message(message: str) -> tuple[str, float] | None:
    """(op name, seconds) of a MEMBER_DONE or MEMBER_REUSED log line, else None."""
    found = _MEMBER_LINE.fullmatch(message)
    return (found["name"], float(found["seconds"])) if found else None


@dataclass(frozen=True)
class _Member:
    """One asset definition inside a fused step."""

    name: str
    keys: frozenset[dg.AssetKey]
    compute: Callable[..., Any]
    takes_context: bool
    inputs: Mapping[str, tuple[dg.AssetKey, Mapping[str, Any]]]  # parameter -> (upstream key, input metadata)
    resources: tuple[str, ...]
    upstream: frozenset[dg.AssetKey]
    blocking_checks: frozenset[dg.AssetCheckKey]
    checks: Mapping[dg.AssetKey, frozenset[str]]  # every check of each table, by name
    code_versions: tuple[str | None, ...]
    reusable: bool  # a pure function of its input tables (defs.reuse)

    @classmethod
    def of(cls, assets_def: dg.AssetsDefinition) -> _Member:
        compute = assets_def.op.compute_fn.decorated_fn  # the function the @asset decorator wrapped
        signature = inspect.signature(compute).parameters
        parameters = [n for n, p in signature.items() if p.kind is not inspect.Parameter.VAR_KEYWORD]
        takes_context = bool(parameters) and parameters[0] == "context"
        # every loaded input is passed by name, to a function taking **inputs too (deps are not loaded)
        inputs = {
            name: (key, dict(assets_def.op.input_def_named(name).metadata or {}))
            for name, key in assets_def.keys_by_input_name.items()
            if not assets_def.op.input_def_named(name).dagster_type.is_nothing
        }
        resources = tuple(p for p in parameters[int(takes_context) :] if p not in inputs)
        unknown = [r for r in resources if r not in assets_def.required_resource_keys]
        if unknown:
            raise dg.DagsterInvariantViolationError(
                f"{assets_def.op.name}: parameters {unknown} are no input or resource"
            )
        reusable = (assets_def.op.tags or {}).get(REUSE_TAG) == "inputs"
        if reusable and resources:
            raise dg.DagsterInvariantViolationError(
                f"{assets_def.op.name}: tagged {REUSE_TAG} but reads resources {list(resources)}"
            )
        checks: dict[dg.AssetKey, set[str]] = {}
        for spec in assets_def.check_specs:
            checks.setdefault(spec.asset_key, set()).add(spec.name)
        return cls(
            name=assets_def.op.name,
            keys=frozenset(assets_def.keys),
            compute=compute,
            takes_context=takes_context,
            inputs=inputs,
            resources=resources,
            upstream=frozenset(assets_def.dependency_keys),
            blocking_checks=frozenset(s.key for s in assets_def.check_specs if s.blocking),
            checks={key: frozenset(names) for key, names in checks.items()},
            code_versions=tuple(assets_def.code_versions_by_key[key] for key in sorted(assets_def.keys, key=str)),
            reusable=reusable,
        )


@dataclass(frozen=True)
class Concurrent:
    """Chains of asset definitions computed at the same time in one step, each chain in graph order; with `rows_at_most`
    (table, count), only while the run's rows of that table are at most `count`, else one chain after the other (a
    large run's chains would each hold their working set at once)."""

    chains: tuple[tuple[dg.AssetsDefinition, ...], ...]
    rows_at_most: tuple[dg.AssetKey, int] | None

    def __init__(
        self, *chains: Sequence[dg.AssetsDefinition], rows_at_most: tuple[str | dg.AssetKey, int] | None = None
    ) -> None:
        object.__setattr__(self, "chains", tuple(tuple(chain) for chain in chains if chain))
        limit = None if rows_at_most is None else (dg.AssetKey.from_coercible(rows_at_most[0]), int(rows_at_most[1]))
        object.__setattr__(self, "rows_at_most", limit)

    def chains_flat(self) -> tuple[dg.AssetsDefinition, ...]:
        """Every chain's members, chain after chain."""
        return tuple(a for chain in self.chains for a in chain)


@dataclass(frozen=True)
class _Group:
    """A Concurrent group of a step, as its members."""

    chains: tuple[tuple[_Member, ...], ...]
    rows_at_most: tuple[dg.AssetKey, int] | None


# what a step computes, in order: a member, or chains of members computed at the same time
_Stage = _Member | _Group


def _keyed(event: Any, key: dg.AssetKey | None) -> Any:
    """A member's MaterializeResult with its asset key set (a single-table member may leave it to the context)."""
    if isinstance(event, dg.MaterializeResult) and event.asset_key is None and key is not None:
        return replaced(event, asset_key=key)
    return event


def _failed_checks(event: Any, key: dg.AssetKey | None) -> Iterator[dg.AssetCheckKey]:
    """The checks an event reports failed with ERROR severity (a result without a key is on the member's table)."""
    results = (event.check_results or []) if isinstance(event, dg.MaterializeResult) else [event]
    for result in results:
        if isinstance(result, dg.AssetCheckResult) and not result.passed:
            target = dg.AssetKey.from_coercible(result.asset_key) if result.asset_key is not None else key
            if result.severity == dg.AssetCheckSeverity.ERROR and target is not None:
                yield dg.AssetCheckKey(target, result.check_name)


def _only_selected(event: Any, context: dg.AssetExecutionContext) -> Any | None:
    """The event as far as the step's selection covers it: a member that computes several tables together (not
    subsettable on its own) still computes them all, but only the selected ones are written and checked. A table
    produced batch by batch is drained, since the member may count what its batches hold."""
    checks = context.selected_asset_check_keys
    if isinstance(event, dg.AssetCheckResult):
        key = dg.AssetKey.from_coercible(event.asset_key) if event.asset_key is not None else current_member_key()
        return event if key is None or dg.AssetCheckKey(key, event.check_name) in checks else None
    if not isinstance(event, dg.MaterializeResult) or event.asset_key is None:
        return event
    key = dg.AssetKey.from_coercible(event.asset_key)
    if key not in context.selected_asset_keys:
        if isinstance(event.value, FrameBatches):
            for _ in event.value:
                pass
        return None
    kept = [r for r in event.check_results or [] if dg.AssetCheckKey(r.asset_key or key, r.check_name) in checks]
    if len(kept) == len(event.check_results or []):
        return event
    return replaced(event, check_results=kept)


def _events(produced: Any) -> Iterable[Any]:
    if produced is None:
        return ()
    return produced if inspect.isgenerator(produced) else (produced,)


def _fingerprint(context: dg.AssetExecutionContext, member: _Member, arguments: Mapping[str, Any]) -> str | None:
    """The fingerprint of a reusable member's inputs (defs.reuse), None for any other member."""
    if not member.reusable:
        return None
    return inputs_fingerprint(member.name, member.code_versions, context.partition_key, arguments)


def _member_events(
    context: dg.AssetExecutionContext, member: _Member, reads: Reads, selected: Collection[dg.AssetKey]
) -> tuple[Iterable[Any], str | None, str | None]:
    """(the member's events, its inputs' fingerprint when reusable, the run it is reused from when it is)."""
    arguments = {name: getattr(context.resources, name) for name in member.resources}
    arguments |= {name: reads.value(key, meta) for name, (key, meta) in member.inputs.items()}
    fingerprint = _fingerprint(context, member, arguments)
    if fingerprint:
        events = replayed(context, member.keys & set(selected), member.checks, fingerprint, reads.stored)
        if events is not None:
            return events, fingerprint, events[0].value.run_id if events else None
    produced = member.compute(context, **arguments) if member.takes_context else member.compute(**arguments)
    return _events(produced), fingerprint, None


def _answers(
    context: dg.AssetExecutionContext,
    results: Iterable[dg.AssetCheckResult],
    owners: Mapping[dg.AssetKey, _Member],
    not_written: set[dg.AssetKey],
) -> Iterator[dg.AssetCheckResult]:
    """Check results answered later (defs.deferred), as selected; a failed blocking one marks its member's tables
    as not written (`not_written` is updated)."""
    for result in results:
        event = _only_selected(result, context)
        if event is None:
            continue
        for check in _failed_checks(event, None):
            owner = owners[check.asset_key]
            if check in owner.blocking_checks:
                not_written |= owner.keys
        yield event


@dataclass
class _Outcome:
    """What the members computed so far left: the tables not written (failed, or held back), and the first error."""

    not_written: set[dg.AssetKey] = field(default_factory=set)
    error: BaseException | None = None


def _flat(stages: Sequence[_Stage]) -> list[_Member]:
    return [m for s in stages for m in ([s] if isinstance(s, _Member) else [m for chain in s.chains for m in chain])]


def _run(
    context: dg.AssetExecutionContext, stages: Sequence[_Stage], restricted: frozenset[dg.AssetKey]
) -> Iterator[Any]:
    deferred = Deferred()  # checks answered while the step goes on (defs.deferred)
    owners = {key: member for member in _flat(stages) for key in member.keys}
    outcome = _Outcome()
    try:
        members: list[_Member] = []
        for stage in [*stages, None]:
            if isinstance(stage, _Member):
                members.append(stage)
                continue
            if members:  # the members before a concurrent group (or the end) share their reads
                yield from _run_members(context, members, restricted, deferred, owners, outcome)
                members = []
            if stage is not None:
                yield from _concurrently(context, stage, restricted, deferred, owners, outcome)
        yield from _answers(context, deferred.take(), owners, outcome.not_written)
    finally:
        deferred.close()
    if outcome.error is not None:
        raise outcome.error


def _run_members(
    context: dg.AssetExecutionContext,
    members: Sequence[_Member],
    restricted: frozenset[dg.AssetKey],
    deferred: Deferred,
    owners: Mapping[dg.AssetKey, _Member],
    outcome: _Outcome,
) -> Iterator[Any]:
    selected = context.selected_asset_keys
    reads = Reads(getattr(context.resources, WAREHOUSE_IO), context.partition_key, members, restricted)
    not_written = outcome.not_written
    for position, member in enumerate(members):
        if not member.keys & selected:
            continue
        # a member reads a table only once its checks are in: a failed blocking one holds it back
        yield from _answers(context, deferred.take(member.upstream), owners, not_written)
        if member.upstream & not_written:
            context.log.warning(f"{member.name} not computed: a table it reads failed in this step")
            not_written |= member.keys
            continue
        started = time.perf_counter()
        token = _member_key.set(next(iter(member.keys)) if len(member.keys) == 1 else None)
        upstream_token = MEMBER_UPSTREAM.set(member.upstream)
        reused_from = None
        yielded: set[dg.AssetKey] = set()
        try:
            # a reused table's record holds its check results: a reusable member's checks are answered at once
            with deferring(None if member.reusable else deferred):
                events, fingerprint, reused_from = _member_events(context, member, reads, selected)
                for event in events:
                    event = _only_selected(_keyed(event, current_member_key()), context)
                    if event is None:
                        continue
                    if fingerprint and reused_from is None and isinstance(event, dg.MaterializeResult):
                        event = recorded(event, dg.AssetKey.from_coercible(event.asset_key), fingerprint)
                    if any(check in member.blocking_checks for check in _failed_checks(event, current_member_key())):
                        not_written |= member.keys
                    if isinstance(event, dg.MaterializeResult):
                        yielded.add(dg.AssetKey.from_coercible(event.asset_key))
                    yield event
        except Exception as exc:  # the step fails with it once the members that do not need this one ran
            outcome.error = outcome.error or exc
            not_written |= member.keys
            # the checks of a table it did write are still answered; those of the tables it did not are forgotten
            deferred.drop(member.keys - yielded)
            context.log.error(f"{member.name} failed: {exc}")
        finally:
            _member_key.reset(token)
            MEMBER_UPSTREAM.reset(upstream_token)
        if reused_from is None:
            reads.forget(member.keys)
        reads.release(position)
        if member.keys.isdisjoint(not_written):
            seconds = time.perf_counter() - started
            context.log.info(
                MEMBER_DONE.format(name=member.name, seconds=seconds)
                if reused_from is None
                else MEMBER_REUSED.format(name=member.name, seconds=seconds, run=reused_from)
            )


@dataclass(frozen=True)
class _ChainEnd:
    """A chain's thread has ended, leaving this."""

    outcome: _Outcome


def _together(context: dg.AssetExecutionContext, group: _Group, restricted: frozenset[dg.AssetKey]) -> bool:
    """Whether a group's chains run at the same time for this run (its row limit, where it has one, holds)."""
    if group.rows_at_most is None:
        return True
    key, limit = group.rows_at_most
    rows = getattr(context.resources, WAREHOUSE_IO).rows(key, context.partition_key, restricted=key in restricted)
    if rows is not None and rows <= limit:
        return True
    context.log.info(
        f"chains {', '.join(chain[0].name for chain in group.chains)} one after the other: "
        f"{key.to_user_string()} holds {'an unknown number of' if rows is None else f'{rows:,}'} rows of this run "
        f"(at the same time up to {limit:,})"
    )
    return False


# how long a failing step waits for a chain to end its member before it leaves it (a daemon thread that writes nothing
# more once told to stop)
_CHAIN_STOP_SECONDS = 5.0


def _concurrently(
    context: dg.AssetExecutionContext,
    group: _Group,
    restricted: frozenset[dg.AssetKey],
    deferred: Deferred,
    owners: Mapping[dg.AssetKey, _Member],
    outcome: _Outcome,
) -> Iterator[Any]:
    """The chains of a Concurrent group: the first on this thread, each other on a thread of its own, whose events
    are yielded here as they come (between this thread's events, then until every chain has ended); one after the
    other on this thread where the group's row limit does not hold."""
    chains = group.chains
    selected = context.selected_asset_keys
    if not any(member.keys & selected for chain in chains for member in chain):
        return
    upstream = frozenset().union(*(member.upstream for chain in chains for member in chain))
    yield from _answers(context, deferred.take(upstream), owners, outcome.not_written)
    if not _together(context, group, restricted):
        # each chain with reads of its own, dropped when it ends: one read shared by all (deid_traces with every column
        # any chain needs, held to the last chain) took a 1M run from 7.07 to 8.50 GiB
        for chain in chains:
            yield from _run_members(context, chain, restricted, deferred, owners, outcome)
        return
    events: queue.SimpleQueue = queue.SimpleQueue()
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=contextvars.copy_context().run,
            args=(_run_chain, context, chain, restricted, owners, set(outcome.not_written), events, stop),
            name=f"step-chain-{chain[0].name}",
            daemon=True,
        )
        for chain in chains[1:]
        if any(member.keys & selected for member in chain)
    ]
    ended: list[_Outcome] = []

    def arrived(wait: bool) -> Iterator[Any]:
        while len(ended) < len(threads):
            try:
                event = events.get(block=wait)
            except queue.Empty:
                return
            if isinstance(event, _ChainEnd):
                ended.append(event.outcome)
            else:
                yield event

    finished = False
    try:
        for thread in threads:
            thread.start()
        for event in _run_members(context, chains[0], restricted, deferred, owners, outcome):
            yield event
            yield from arrived(wait=False)
        yield from arrived(wait=True)
        finished = True
    except Exception:
        # this thread's chain failed outside its members: what the other chains already wrote is still recorded
        stop.set()
        for thread in threads:
            thread.join(_CHAIN_STOP_SECONDS)
        yield from arrived(wait=False)
        raise
    finally:
        if not finished:  # the step is failing or was closed: the chains write nothing after their current member
            stop.set()
            unrecorded = [e.asset_key for e in _queued(events) if isinstance(e, dg.MaterializeResult)]
            if unrecorded:
                context.log.error(f"tables written but not recorded as the step ended: {unrecorded}")
    for chain in ended:
        outcome.not_written |= chain.not_written
        outcome.error = outcome.error or chain.error


def _queued(events: queue.SimpleQueue) -> list[Any]:
    """What is in the queue now."""
    found = []
    while True:
        try:
            found.append(events.get_nowait())
        except queue.Empty:
            return found


def _run_chain(
    context: dg.AssetExecutionContext,
    members: Sequence[_Member],
    restricted: frozenset[dg.AssetKey],
    owners: Mapping[dg.AssetKey, _Member],
    not_written: set[dg.AssetKey],
    events: queue.SimpleQueue,
    stop: threading.Event,
) -> None:
    """One chain of a Concurrent group, on its own thread: its members as _run_members computes them, each table
    written here (the event handed on says so), then its checks' answers; _ChainEnd last, whatever happens."""
    deferred = Deferred()
    outcome = _Outcome(not_written=not_written)
    io = getattr(context.resources, WAREHOUSE_IO)
    run = _run_members(context, members, restricted, deferred, owners, outcome)
    handed: set[dg.AssetKey] = set()
    try:
        for event in run:
            if stop.is_set():
                break
            event = _written(event, io, context.partition_key, restricted)
            if isinstance(event, dg.MaterializeResult):
                handed.add(dg.AssetKey.from_coercible(event.asset_key))
            events.put(event)
        else:
            for event in _answers(context, deferred.take(), owners, outcome.not_written):
                events.put(event)
    except BaseException as exc:  # a table that could not be written ends its chain, as it ends a step
        outcome.error = outcome.error or exc
        # what the chain did not hand on was not written: its readers after the group are held back
        outcome.not_written |= {key for member in members for key in member.keys} - handed
        context.log.error(f"chain {members[0].name} stopped: {exc}")
    finally:
        events.put(_ChainEnd(outcome))
        try:
            run.close()
        finally:
            deferred.close()


def _written(event: Any, io: Any, run_id: str, restricted: frozenset[dg.AssetKey]) -> Any:
    """A materialization of a frame with its table written now: the event then carries what the write returned (any
    other event, a materialization without a value included, is left to Dagster as it is)."""
    if not isinstance(event, dg.MaterializeResult) or not isinstance(event.value, pl.DataFrame | FrameBatches):
        return event
    key = dg.AssetKey.from_coercible(event.asset_key)
    return replaced(event, value=Written(io.write(key, run_id, event.value, restricted=key in restricted)))


def restricted_keys(assets_defs: Iterable[dg.AssetsDefinition]) -> frozenset[dg.AssetKey]:
    """The keys whose tables are kept in the restricted area (read from there)."""
    return frozenset(
        key
        for assets_def in assets_defs
        for key in assets_def.keys
        if (assets_def.metadata_by_key.get(key) or {}).get(RESTRICTED_METADATA_KEY)
    )


def fused_step(
    name: str,
    members: Sequence[dg.AssetsDefinition | Concurrent],
    *,
    description: str,
    restricted: frozenset[dg.AssetKey],
) -> dg.AssetsDefinition:
    """One subsettable multi-asset computing `members` (in graph order; a Concurrent group's chains at the same time)
    in one step, with their tables, code versions, blocking checks and lineage; `restricted` names the tables it may
    read from the restricted area."""
    stages: list[_Stage] = [
        _Group(tuple(tuple(_Member.of(a) for a in chain) for chain in item.chains), item.rows_at_most)
        if isinstance(item, Concurrent)
        else _Member.of(item)
        for item in members
    ]
    parts = _flat(stages)
    for position, member in enumerate(parts):
        later = {key for other in parts[position + 1 :] for key in other.keys}
        if member.upstream & later:
            raise dg.DagsterInvariantViolationError(f"step {name}: {member.name} reads a table a later member writes")
    for stage in stages:
        chains = stage.chains if isinstance(stage, _Group) else ()
        for index, chain in enumerate(chains):
            others = {key for other in chains[:index] + chains[index + 1 :] for member in other for key in member.keys}
            for member in chain:
                if member.upstream & others:
                    raise dg.DagsterInvariantViolationError(
                        f"step {name}: {member.name} reads a table a chain computed at the same time writes"
                    )
    assets_defs = [a for item in members for a in (item.chains_flat() if isinstance(item, Concurrent) else (item,))]
    specs = [spec.replace_attributes(skippable=True) for assets_def in assets_defs for spec in assets_def.specs]
    resources = set().union(*(a.required_resource_keys for a in assets_defs)) | {WAREHOUSE_IO}

    @dg.multi_asset(
        name=name,
        specs=[spec.with_io_manager_key(WAREHOUSE_IO) for spec in specs],
        check_specs=[check for assets_def in assets_defs for check in assets_def.check_specs],
        can_subset=True,
        required_resource_keys=resources,
        description=description,
    )
    def step(context):  # not annotated: the module's postponed annotations are strings Dagster cannot check
        yield from _run(context, stages, restricted)

    return step
