"""Case pages of a run: its de-identified tables read once from the warehouse, one HTML page per case worth one."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
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
from eval_pipeline.reporting.publish import ReportFile, publish_or_raise, published_texts
from eval_pipeline.settings import ScoringSettings

CASES_FOLDER = "cases"
DEFAULT_LIMIT = 500
# A stamp on every row that no story shows, left out of the tables read: a qrels bump changes it on every retrieval and
# context row, and a page's source (page_sources) should change only with what the page shows.
UNSHOWN_COLUMNS = ("qrels_version",)


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
        frames = {
            table: frame.drop(UNSHOWN_COLUMNS, strict=False)
            for (table, _), frame in zip(reads, read, strict=True)
            if frame is not None
        }
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


def _renderer_digest() -> str:
    digest = hashlib.sha256(f"{sys.version}\npolars=={pl.__version__}".encode())
    package = Path(__file__).resolve().parents[1]
    for source in sorted(package.rglob("*.py")):
        digest.update(f"\n{source.relative_to(package)}\n".encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


# Taken when this module loads (about 7 ms), as the scanner's is: a process whose files were replaced after it
# started still names the code it renders with.
_RENDERER_IDENTITY = _renderer_digest()


def renderer_identity() -> str:
    """A digest of the code a page is rendered by: this package's source as this process loaded it, Python's and
    polars' versions."""
    return _RENDERER_IDENTITY


def _row_hashes(frame: pl.DataFrame) -> pl.Series:
    """Polars' row hashes, telling -0.0 from 0.0 in float columns as a page does (`-0.0000`): the hash does not."""
    floats = [c for c, dtype in frame.schema.items() if dtype.is_float()]
    return frame.with_columns((1.0 / pl.col(c) < 0).alias(f"__negative_{c}") for c in floats).hash_rows(seed=0)


def _case_digests(tables: CaseTables | None, case_ids: Sequence[str]) -> dict[str, str]:
    """Per case, a digest of everything a story of it reads from these tables: the run, its manifest and threshold,
    each whole-run table, and the case's rows of every case table in the order read (row hashes: polars' own, stable
    within one polars version, which renderer_identity names)."""
    if tables is None:
        return dict.fromkeys(case_ids, "none")
    run = [tables.run_id, tables.manifest, tables.relevance_threshold]
    common = hashlib.sha256(json.dumps(run, sort_keys=True, default=str).encode())
    per_case = {case: hashlib.sha256() for case in case_ids}
    for name, frame in sorted(tables.frames.items()):
        common.update(f"\n{name}: {frame.schema}".encode())
        if name not in CASE_TABLES:
            common.update(_row_hashes(frame).to_numpy().tobytes())
            continue
        key = CASE_TABLES[name]
        rows = frame.select(pl.col(key).alias("key"), _row_hashes(frame).alias("row"))
        grouped = dict(rows.group_by("key", maintain_order=True).agg("row").iter_rows())
        for case, digest in per_case.items():
            digest.update(f"\n{name}\n".encode())
            digest.update(np.asarray(grouped.get(case, []), dtype=np.uint64).tobytes())
    shared = common.hexdigest()
    return {case: hashlib.sha256(f"{shared}\n{d.hexdigest()}".encode()).hexdigest() for case, d in per_case.items()}


def page_sources(tables: CaseTables, baseline: CaseTables | None, case_ids: Sequence[str]) -> dict[str, str]:
    """Per case, a digest of everything its page is rendered from: the renderer, this run's tables for the case and
    the baseline's (publish.published_texts finds a page rendered from the same source in place)."""
    own, base = _case_digests(tables, case_ids), _case_digests(baseline, case_ids)
    return {
        case: hashlib.sha256(f"{renderer_identity()}\n{own[case]}\n{base[case]}".encode()).hexdigest()
        for case in case_ids
    }


def case_page_files(
    warehouse: Warehouse,
    run_id: str,
    case_ids: Iterable[str],
    baseline_run_id: str | None = None,
    limit: int = DEFAULT_LIMIT,
    relevance_threshold: int | None = None,
    *,
    reports: Location | None = None,
) -> list[ReportFile]:
    """The page of each of at most `limit` of the cases (in the order given) that the run knows, against the baseline
    when it is another scored run, rendered and not yet written; every table is read once for all pages. With
    `reports`, a page whose source is unchanged since it was published there is taken as it stands, not rendered."""
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
    sources = page_sources(tables, baseline, wanted)
    parts = {case: (run_id, CASES_FOLDER, case_page_name(case)) for case in wanted}
    in_place = (
        dict.fromkeys(wanted)
        if reports is None
        else dict(zip(wanted, published_texts(reports, [(parts[c], sources[c]) for c in wanted]), strict=True))
    )
    to_render = [case for case in wanted if in_place[case] is None]
    per_case = tables.split_by_case(to_render)
    base_per_case = baseline.split_by_case(to_render) if baseline is not None else {}

    def page(case_id: str) -> ReportFile | None:
        if in_place[case_id] is not None:
            return ReportFile(parts[case_id], in_place[case_id], sources[case_id])
        story = build_story(per_case[case_id], case_id)
        if not story.known:
            return None
        base_story = build_story(base_per_case[case_id], case_id) if case_id in base_per_case else None
        return ReportFile(parts[case_id], case_page_html(story, base_story), sources[case_id])

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
    files = case_page_files(warehouse, run_id, case_ids, baseline_run_id, limit, relevance_threshold, reports=location)
    return publish_or_raise(location, files, "case_pages") if files else []
