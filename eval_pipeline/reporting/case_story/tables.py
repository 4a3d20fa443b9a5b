"""A run's de-identified tables for case stories (`CaseTables`), split per case once, with the case's rankings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import polars as pl

from eval_pipeline.scoring.attribution import lane_outcomes
from eval_pipeline.trec.ranking import first_occurrences, ranked_entries, ranked_hits, retrieval_rounds

# Warehouse table -> the column naming its case; these are read filtered to the cases shown.
CASE_TABLES: dict[str, str] = {
    "deid_cases": "case_id",
    "deid_traces": "case_id",
    "stage_results": "case_id",
    "attribution": "case_id",
    "retrieval_scores": "case_id",
    "qrels": "query_id",
    "context_scores": "case_id",
    "claims": "case_id",
    "grounding_scores": "case_id",
    "citation_scores": "case_id",
    "answer_scores": "case_id",
    "tool_scores": "case_id",
    "tool_call_diffs": "case_id",
    "outcome_scores": "case_id",
    "reliability": "case_id",
    "quarantine": "case_id",
    "review_queue": "case_id",
}
# Whole-run tables: a gate names its blocking cases in a list column.
RUN_TABLES: tuple[str, ...] = ("gate_results",)

LANE_KEYS = ("run_id", "trace_id", "case_id", "attempt", "lane")  # lane_outcomes' key


@dataclass(frozen=True)
class CaseTables:
    """One run's de-identified tables (all cases or some); a table the run lacks is simply absent."""

    run_id: str
    manifest: dict | None = None
    frames: dict[str, pl.DataFrame] = field(default_factory=dict)
    relevance_threshold: int = 2
    # the one case these tables already hold only (set by split_by_case), so a story need not filter them again
    only_case: str | None = None
    # (hits, candidates) of the case's traces, ranked once for every case split_by_case split
    ranked: tuple[pl.DataFrame, pl.DataFrame] | None = None
    # lane outcomes of every (trace, lane) of the case's stage results, computed once for every case split_by_case
    # split (a story still prefers the stored attribution)
    outcomes: pl.DataFrame | None = None

    def frame(self, name: str) -> pl.DataFrame | None:
        return self.frames.get(name)

    def for_cases(self, case_ids: Iterable[str]) -> CaseTables:
        """The same tables with only the rows of these cases (whole-run tables kept)."""
        wanted = list(dict.fromkeys(case_ids))
        if self.only_case is not None and wanted == [self.only_case]:
            return self
        frames = {
            name: frame.filter(pl.col(CASE_TABLES[name]).is_in(wanted)) if name in CASE_TABLES else frame
            for name, frame in self.frames.items()
        }
        return replace(self, frames=frames)

    def split_by_case(self, case_ids: Iterable[str]) -> dict[str, CaseTables]:
        """Tables per case, each table partitioned once (not filtered once per case), the rankings and lane outcomes
        computed once."""
        wanted = list(dict.fromkeys(case_ids))
        parts: dict[str, dict[str, pl.DataFrame]] = {case: {} for case in wanted}
        for name, frame in self.frames.items():
            if name not in CASE_TABLES:
                for case in wanted:
                    parts[case][name] = frame
                continue
            groups = parts_by(frame.filter(pl.col(CASE_TABLES[name]).is_in(wanted)), CASE_TABLES[name])
            for case in wanted:
                parts[case][name] = groups[case] if case in groups else frame.clear()
        ranked = self._ranked_by_case(wanted)
        outcomes = self._outcomes_by_case(wanted)
        return {
            case: replace(
                self, frames=parts[case], only_case=case, ranked=ranked.get(case), outcomes=outcomes.get(case)
            )
            for case in wanted
        }

    def _outcomes_by_case(self, wanted: list[str]) -> dict[str, pl.DataFrame]:
        # one lane_outcomes over all the cases: each is some milliseconds of queries however few its stages
        stages = self.frames.get("stage_results")
        if stages is None or not {*LANE_KEYS, "stage", "stage_order", "status", "reason"} <= set(stages.columns):
            return {}
        outcomes = lane_outcomes(stages.filter(pl.col("case_id").is_in(wanted)))
        groups = parts_by(outcomes, "case_id")
        return {case: groups[case] if case in groups else outcomes.clear() for case in wanted}

    def _ranked_by_case(self, wanted: list[str]) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
        traces = self.frames.get("deid_traces")
        if traces is None or "retrieval" not in traces.columns or "case_id" not in traces.columns:
            return {}
        traces = traces.filter(pl.col("case_id").is_in(wanted))
        hits, candidates = ranked_traces(with_retrieval(traces))
        case_of = traces.select("trace_id", "case_id")
        split = []
        for ranking in (hits, candidates):
            groups = ranking.join(case_of, on="trace_id", how="left", maintain_order="left").partition_by(
                "case_id", as_dict=True, maintain_order=True, include_key=False
            )
            split.append({case: groups.get((case,), ranking.clear()) for case in wanted})
        return {case: (split[0][case], split[1][case]) for case in wanted}


def empty_frame(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """A frame of this schema without rows."""
    return pl.DataFrame(schema=schema)


def parts_by(frame: pl.DataFrame, key: str) -> dict[object, pl.DataFrame]:
    """A frame partitioned by one column, in order; named by each part's first key, as partition_by's as_dict would
    name them with a query per part."""
    return {part.get_column(key)[0]: part for part in frame.partition_by(key, maintain_order=True)}


def with_retrieval(traces: pl.DataFrame) -> pl.DataFrame:
    """The traces that logged a retrieval."""
    return traces.filter(pl.col("retrieval").is_not_null()) if "retrieval" in traces.columns else traces.clear()


def ranked_traces(traces: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(hits, candidates) ranked per trace as docs/metrics.md#retrieval ranks them: rounds in order, first occurrence
    of a doc wins."""
    schema = {
        "trace_id": pl.String,
        "rank": pl.Int64,
        "doc_id": pl.String,
        "score": pl.Float64,
        "round": pl.Int64,
        "variant": pl.String,
    }
    if traces.height == 0 or "retrieval" not in traces.columns or not isinstance(traces.schema["retrieval"], pl.List):
        return empty_frame(schema), empty_frame(
            {"trace_id": pl.String, "candidate_rank": pl.Int64, "doc_id": pl.String}
        )
    numbered = traces.select("trace_id", "retrieval").with_row_index("_tid")
    ids = numbered.select("_tid", "trace_id")
    hits = ranked_hits(numbered)
    hits = hits.join(ids, on="_tid", how="left").select(list(schema)) if hits.height else empty_frame(schema)
    rounds = retrieval_rounds(numbered)
    candidates = ranked_entries(rounds, "candidates") if rounds.height else pl.DataFrame()
    if candidates.height == 0:
        return hits, empty_frame({"trace_id": pl.String, "candidate_rank": pl.Int64, "doc_id": pl.String})
    candidates = (
        first_occurrences(candidates)
        .join(ids, on="_tid", how="left")
        .select("trace_id", pl.col("rank").alias("candidate_rank"), "doc_id")
    )
    return hits, candidates
