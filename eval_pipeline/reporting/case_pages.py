"""Case pages of a run: its de-identified tables read once from the warehouse, one HTML page per case worth one."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from eval_pipeline.gating.facts import manifest_from_warehouse
from eval_pipeline.io.storage import Location, open_location
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting.case_story import (
    CASE_TABLES,
    RUN_TABLES,
    CaseTables,
    build_story,
    case_page_html,
    case_page_name,
)
from eval_pipeline.reporting.publish import ReportFile, publish_or_raise
from eval_pipeline.settings import ScoringSettings

CASES_FOLDER = "cases"
DEFAULT_LIMIT = 500


def read_case_tables(
    warehouse: Warehouse,
    run_id: str,
    case_ids: Iterable[str] | None = None,
    relevance_threshold: int | None = None,
    manifest: dict | None = None,
) -> CaseTables | None:
    """A run's tables for some cases (all with None), each table read once; None when the run was never scored
    (`manifest`, when the caller has read it already, saves reading it again)."""
    manifest = manifest if manifest is not None else manifest_from_warehouse(warehouse, run_id)
    if manifest is None:
        return None
    wanted = None if case_ids is None else list(dict.fromkeys(case_ids))
    # the case filter reaches the Delta scan: a large run is never read whole for a few pages
    reads = [(table, None if wanted is None else {key: wanted}) for table, key in CASE_TABLES.items()]
    reads += [(table, None) for table in RUN_TABLES]
    # two at a time: each read spends most of its time in Delta's and polars' native code, outside the interpreter
    with ThreadPoolExecutor(2, thread_name_prefix="case-tables") as pool:
        read = pool.map(lambda args: warehouse.read(args[0], run_id, within=args[1]), reads)
        frames = {table: frame for (table, _), frame in zip(reads, read, strict=True) if frame is not None}
    threshold = ScoringSettings().relevance_threshold if relevance_threshold is None else relevance_threshold
    return CaseTables(run_id=run_id, manifest=manifest, frames=frames, relevance_threshold=threshold)


def _frames(value: pl.DataFrame | Sequence[pl.DataFrame | None] | None) -> list[pl.DataFrame]:
    if value is None:
        return []
    if isinstance(value, pl.DataFrame):
        return [value]
    return [frame for frame in value if frame is not None]


def case_ids_worth_a_page(
    gate_results: pl.DataFrame | None,
    attribution_frames: pl.DataFrame | Sequence[pl.DataFrame | None] | None,
    review_queue: pl.DataFrame | None,
    limit: int = DEFAULT_LIMIT,
    cases: pl.DataFrame | None = None,
) -> list[str]:
    """Case ids by priority, unique, at most `limit`: blocking cases of failed gates, failed cases of high criticality
    (criticality from `cases`, the deid_cases), other failed cases, review-queue cases, incomplete cases; each group by
    case id."""
    blocking = set()
    if gate_results is not None and gate_results.height:
        blocking = set(
            gate_results.filter(pl.col("status") == "fail")["blocking_cases"].explode().drop_nulls().to_list()
        )
    failed, incomplete = set(), set()
    for frame in _frames(attribution_frames):
        failed |= set(frame.filter(pl.col("outcome") == "fail")["case_id"].to_list())
        incomplete |= set(frame.filter(pl.col("outcome") == "incomplete")["case_id"].to_list())
    high = set()
    if cases is not None and "criticality" in cases.columns:
        high = set(cases.filter(pl.col("criticality") == "high")["case_id"].to_list())
    review = (
        set(review_queue["case_id"].drop_nulls().to_list())
        if review_queue is not None and review_queue.height
        else set()
    )
    ordered: dict[str, None] = {}
    for group in (blocking, failed & high, failed, review, incomplete):
        ordered.update(dict.fromkeys(sorted(group)))
    return list(ordered)[: max(limit, 0)]


def case_page_files(
    warehouse: Warehouse,
    run_id: str,
    case_ids: Iterable[str],
    baseline_run_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    relevance_threshold: int | None = None,
) -> list[ReportFile]:
    """The page of each of at most `limit` of the cases (in the order given) that the run knows, against the baseline
    when it is another scored run, rendered and not yet written; every table is read once for all pages."""
    wanted = list(dict.fromkeys(case_ids))[: max(limit, 0)]
    if not wanted:
        return []
    tables = read_case_tables(warehouse, run_id, wanted, relevance_threshold)
    if tables is None:
        raise LookupError(f"run {run_id!r} has not been scored in {warehouse.root}")
    baseline = (
        read_case_tables(warehouse, baseline_run_id, wanted, tables.relevance_threshold)
        if baseline_run_id and baseline_run_id != run_id
        else None
    )
    per_case = tables.split_by_case(wanted)
    base_per_case = baseline.split_by_case(wanted) if baseline is not None else {}

    def page(case_id: str) -> ReportFile | None:
        story = build_story(per_case[case_id], case_id)
        if not story.known:
            return None
        base_story = build_story(base_per_case[case_id], case_id) if case_id in base_per_case else None
        return ReportFile((run_id, CASES_FOLDER, case_page_name(case_id)), case_page_html(story, base_story))

    # The few queries a story still runs are over a few rows each: the in-memory engine starts one in half the time.
    with pl.Config(engine_affinity="in-memory"):
        return [f for f in map(page, wanted) if f is not None]


def write_case_pages(
    warehouse: Warehouse,
    reports: Location | str | os.PathLike,
    run_id: str,
    case_ids: Iterable[str],
    baseline_run_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    relevance_threshold: int | None = None,
) -> list[str]:
    """Write reports/<run_id>/cases/<case_id>.html for at most `limit` of the cases (case_page_files), only when no
    page holds personal data (publish: ReportLeakError otherwise, and no page written). The URIs written, in order."""
    location = reports if isinstance(reports, Location) else open_location(reports)
    files = case_page_files(warehouse, run_id, case_ids, baseline_run_id, limit, relevance_threshold)
    return publish_or_raise(location, files, "case_pages") if files else []
