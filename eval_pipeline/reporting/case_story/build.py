"""The story of one case built from a run's tables (`build_story`).

Every attempt with its stages, lane outcomes, metrics and lane views; the gates the case blocks; its reliability.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import polars as pl

from eval_pipeline.reporting.case_story.model import Attempt, CaseStory
from eval_pipeline.reporting.case_story.rows import CaseRows, by_trace, nulls_first, nulls_last, rows_frame
from eval_pipeline.reporting.case_story.tables import LANE_KEYS, CaseTables, empty_frame, ranked_traces, with_retrieval
from eval_pipeline.reporting.case_story.views import Grades, RankedDocs, agent_view, rag_view
from eval_pipeline.scoring.attribution import lane_outcomes

HARNESS_FAILED = ("error", "timeout")

# (table, column, label) of every per-attempt metric compared with the baseline. Both retrieval_scores and
# context_scores have a context_precision (ranked list vs assembled context): the second is labelled apart.
ATTEMPT_METRICS: tuple[tuple[str, str, str], ...] = (
    *(("retrieval_scores", f"recall_at_{k}", f"recall_at_{k}") for k in (1, 3, 5, 10, 20)),
    *(("retrieval_scores", f"precision_at_{k}", f"precision_at_{k}") for k in (1, 3, 5, 10)),
    ("retrieval_scores", "mrr", "mrr"),
    ("retrieval_scores", "first_hit_rank", "first_hit_rank"),
    *(("retrieval_scores", f"ndcg_at_{k}", f"ndcg_at_{k}") for k in (3, 5, 10)),
    ("retrieval_scores", "context_precision", "context_precision"),
    ("retrieval_scores", "judged_at_10", "judged_at_10"),
    ("retrieval_scores", "failure_class", "failure_class"),
    ("retrieval_scores", "evidence_round", "evidence_round"),
    ("context_scores", "context_recall", "context_recall"),
    ("context_scores", "context_precision", "assembled_context_precision"),
    ("context_scores", "context_tokens", "context_tokens"),
    ("grounding_scores", "grounding_rate", "grounding_rate"),
    ("grounding_scores", "n_claims", "n_claims"),
    ("grounding_scores", "n_supported", "n_supported"),
    ("grounding_scores", "n_contradicted", "n_contradicted"),
    ("grounding_scores", "n_not_in_evidence", "n_not_in_evidence"),
    ("citation_scores", "citation_precision", "citation_precision"),
    ("citation_scores", "citation_recall", "citation_recall"),
    ("citation_scores", "citation_resolution_rate", "citation_resolution_rate"),
    ("citation_scores", "n_dead_citations", "n_dead_citations"),
    ("answer_scores", "contains_all", "contains_all"),
    ("answer_scores", "exact_match", "exact_match"),
    ("answer_scores", "token_f1", "token_f1"),
    ("answer_scores", "refused", "refused"),
    ("answer_scores", "answer_correct", "answer_correct"),
    ("tool_scores", "n_calls", "n_calls"),
    ("tool_scores", "tool_call_precision", "tool_call_precision"),
    ("tool_scores", "tool_call_recall", "tool_call_recall"),
    ("tool_scores", "tool_call_f1", "tool_call_f1"),
    ("tool_scores", "strict_order_accuracy", "strict_order_accuracy"),
    ("tool_scores", "args_valid_rate", "args_valid_rate"),
    ("tool_scores", "unnecessary_call_rate", "unnecessary_call_rate"),
    ("tool_scores", "loop_detected", "loop_detected"),
    ("tool_scores", "policy_violation", "policy_violation"),
    ("outcome_scores", "success", "success"),
    ("outcome_scores", "success_claimed", "success_claimed"),
    ("outcome_scores", "fault_outcome", "fault_outcome"),
    ("outcome_scores", "n_steps", "n_steps"),
    ("outcome_scores", "cost_usd", "cost_usd"),
)
METRIC_TABLES = tuple(dict.fromkeys(t for t, _, _ in ATTEMPT_METRICS))

OUTCOME_COLUMNS = ("trace_id", "lane", "outcome", "first_failing_stage", "owner", "reason", "hazard")
STAGE_COLUMNS = {
    "lane": pl.String,
    "stage": pl.String,
    "stage_order": pl.Int64,
    "status": pl.String,
    "reason": pl.String,
}


def _lane_order(case: dict | None, seen: Iterable[str | None]) -> list[str]:
    lanes = list(case["lanes"]) if case and case.get("lanes") else []
    return [*lanes, *(lane for lane in dict.fromkeys(seen) if lane not in lanes)]


def _outcomes(stages: pl.DataFrame, attribution: pl.DataFrame) -> pl.DataFrame:
    """Per (trace, lane): pass, fail or incomplete with first failing stage and owner; the stored attribution wins."""
    columns = ["trace_id", "lane", "outcome", "first_failing_stage", "owner", "reason", "hazard"]
    if stages.height == 0:
        return empty_frame({c: pl.String for c in columns})
    if attribution.height == 0 or not set(columns) <= set(attribution.columns):
        return lane_outcomes(stages).select(columns)
    stored = attribution.select(columns)
    # outcomes are per (trace, lane): only the pairs without a stored row need computing, usually none
    unstored = stages.join(
        stored.select("trace_id", "lane"), on=["trace_id", "lane"], how="anti", maintain_order="left"
    )
    if unstored.height == 0:
        return stored
    return pl.concat([stored, lane_outcomes(unstored).select(columns)])


def _attempt_metrics(rows: CaseRows, trace_id: str) -> dict[str, object]:
    metrics: dict[str, object] = {}
    found = {name: rows.first(name, trace_id) for name in METRIC_TABLES}
    for table, column, label in ATTEMPT_METRICS:
        row = found[table]
        if row is not None and column in row:
            metrics[label] = row[column]
    return metrics


def _columns(schema: Mapping[str, pl.DataType], columns: Iterable[str]) -> dict[str, pl.DataType]:
    return {c: schema[c] for c in columns}


def _outcome_rows(
    rows: CaseRows, stages: list[dict], stage_schema: pl.Schema
) -> tuple[list[dict], dict[str, pl.DataType]]:
    """`_outcomes` as rows: the stored attribution, then the outcomes split_by_case computed for the (trace, lane)
    pairs it lacks, in the order the stages name them; `_outcomes` itself when they were not computed."""
    if not stages:
        return [], {c: pl.String for c in OUTCOME_COLUMNS}
    frame = rows.tables.frame("attribution")
    stored = rows.all("attribution")
    schema: dict[str, pl.DataType] = {}
    pairs: set[tuple] = set()
    if stored and set(OUTCOME_COLUMNS) <= set(frame.columns):
        schema = _columns(rows.schema("attribution"), OUTCOME_COLUMNS)
        # null keys join nothing, so a stage with one is never stored
        pairs = {(r["trace_id"], r["lane"]) for r in stored if r["trace_id"] is not None and r["lane"] is not None}
    else:
        stored = []
    unstored = [s for s in stages if (s["trace_id"], s["lane"]) not in pairs]
    if not unstored:
        return stored, schema
    computed = rows.tables.outcomes
    if computed is not None:
        # lane_outcomes gives one row per key, each of the key's stages alone, in the order the stages first name them
        found = {tuple(r[k] for k in LANE_KEYS): r for r in computed.to_dicts()}
        keys = list(dict.fromkeys(tuple(s[k] for k in LANE_KEYS) for s in unstored))
        new_schema = _columns(computed.schema, OUTCOME_COLUMNS)
        if all(k in found for k in keys) and (not stored or schema == new_schema):
            return [*stored, *(found[k] for k in keys)], new_schema
    outcomes = _outcomes(rows_frame(stages, stage_schema), frame if frame is not None else pl.DataFrame())
    return outcomes.to_dicts(), dict(outcomes.schema)


def build_story(tables: CaseTables, case_id: str, trace_id: str | None = None) -> CaseStory:
    """The story of one case (every attempt; `trace_id` marks the attempt to show in full) from a run's tables."""
    tables = tables.for_cases([case_id])  # every lookup below is then within the case
    rows = CaseRows(tables)
    cases = rows.all("deid_cases")
    case = cases[0] if cases else None
    traces = rows.all("deid_traces")
    stage_frame = tables.frame("stage_results")
    stages = rows.all("stage_results")
    lanes = _lane_order(
        case, [s["lane"] for s in stages] if stage_frame is not None and "lane" in stage_frame.columns else []
    )
    lane_rank = {lane: i for i, lane in enumerate(lanes)}
    stages = sorted(
        stages,
        key=lambda s: (
            nulls_first(s["attempt"]),
            nulls_first(s["trace_id"]),
            lane_rank.get(s["lane"], len(lanes)),
            nulls_first(s["stage_order"]),
        ),
    )
    stage_schema = rows.schema("stage_results") if stages else STAGE_COLUMNS
    attempt_stage_schema = {c: stage_schema[c] for c in STAGE_COLUMNS}
    stages_of = by_trace(stages)
    outcome_rows, outcome_schema = _outcome_rows(rows, stages, stage_schema)
    outcomes_of = by_trace(outcome_rows)
    outcome_schema = {k: v for k, v in outcome_schema.items() if k != "trace_id"}
    grades = Grades.of(tables.frame("qrels"))
    traces_frame = tables.frame("deid_traces")
    traces_frame = traces_frame if traces_frame is not None else pl.DataFrame()
    ranking = RankedDocs.of(
        *(tables.ranked if tables.ranked is not None else ranked_traces(with_retrieval(traces_frame)))
    )

    # the traces and any trace only the stage results know, each once when there are stage results
    ids = [(t["trace_id"], t["attempt"]) for t in traces]
    if stages:
        first: dict[str | None, int | None] = {}
        for tid, number in [*ids, *((s["trace_id"], s["attempt"]) for s in stages)]:
            first.setdefault(tid, number)
        ids = list(first.items())
    ids.sort(key=lambda pair: (nulls_last(pair[1]), nulls_last(pair[0])))
    attempts = []
    for tid, number in ids:
        trace = rows.first("deid_traces", tid) or {"trace_id": tid}
        trace_stages = stages_of.get(tid, []) if tid is not None else []
        # a harness that did not complete left no evidence to show, only its error
        trace_lanes = set() if trace.get("status") in HARNESS_FAILED else {s["lane"] for s in trace_stages} | set(lanes)
        attempts.append(
            Attempt(
                trace_id=tid,
                attempt=number,
                harness_status=trace.get("status"),
                harness_error=trace.get("error"),
                answer_text=trace.get("answer_text"),
                outcomes=rows_frame(
                    [{k: o[k] for k in outcome_schema} for o in outcomes_of.get(tid, [])], outcome_schema
                ),
                stages=rows_frame(trace_stages, attempt_stage_schema),
                metrics=_attempt_metrics(rows, tid),
                rag=rag_view(trace, rows, grades, ranking) if "rag" in trace_lanes else None,
                agent=agent_view(trace, rows, case) if "agent" in trace_lanes else None,
            )
        )

    gates = []
    for gate in rows.all("gate_results"):
        for role, column in (("blocks", "blocking_cases"), ("excluded from", "excluded_cases")):
            if case_id in (gate.get(column) or []):
                gates.append(
                    {
                        "gate": gate["gate"],
                        "role": role,
                        "status": gate.get("status"),
                        "owner": gate.get("owner"),
                        "reason": gate.get("reason"),
                        "metric": gate.get("metric"),
                        "baseline_run_id": gate.get("baseline_run_id"),
                        "baseline_value": gate.get("baseline_value"),
                        "candidate_value": gate.get("candidate_value"),
                        "delta": gate.get("delta"),
                        "threshold": gate.get("threshold"),
                    }
                )
    review = tables.frame("review_queue")
    return CaseStory(
        run_id=tables.run_id,
        case_id=case_id,
        manifest=tables.manifest,
        case=case,
        attempts=attempts,
        focus=trace_id,
        reliability=rows.all("reliability"),
        quarantine=rows.all("quarantine"),
        gates=gates,
        review=review if review is not None and review.height else None,
        relevance_threshold=tables.relevance_threshold,
    )
