"""The story of one case in one run, stage by stage, from de-identified tables: as terminal text and as an HTML page.

Everything here is a pure function of polars frames (`CaseTables`); reading them from the warehouse is
`case_pages.read_case_tables`. Only de-identified tables are ever read: no `_restricted` table reaches a story.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from html import escape
from urllib.parse import quote

import polars as pl

from eval_pipeline.contracts.identifiers import bounded_file_name
from eval_pipeline.reporting.render import Section, render_html
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

ABSENT = "(absent)"
HARNESS_FAILED = ("error", "timeout")
TEXT_PREVIEW = 160

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
CASE_METRICS = ("n_attempts", "n_complete", "n_success", "pass_at_1", "flaky")
PASS_HAT = re.compile(r"pass_hat_\d+")


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
            groups = _parts(frame.filter(pl.col(CASE_TABLES[name]).is_in(wanted)), CASE_TABLES[name])
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
        groups = _parts(outcomes, "case_id")
        return {case: groups[case] if case in groups else outcomes.clear() for case in wanted}

    def _ranked_by_case(self, wanted: list[str]) -> dict[str, tuple[pl.DataFrame, pl.DataFrame]]:
        traces = self.frames.get("deid_traces")
        if traces is None or "retrieval" not in traces.columns or "case_id" not in traces.columns:
            return {}
        traces = traces.filter(pl.col("case_id").is_in(wanted))
        hits, candidates = _ranked(_with_retrieval(traces))
        case_of = traces.select("trace_id", "case_id")
        split = []
        for ranking in (hits, candidates):
            groups = ranking.join(case_of, on="trace_id", how="left", maintain_order="left").partition_by(
                "case_id", as_dict=True, maintain_order=True, include_key=False
            )
            split.append({case: groups.get((case,), ranking.clear()) for case in wanted})
        return {case: (split[0][case], split[1][case]) for case in wanted}


# ---------------------------------------------------------------- the story


@dataclass
class RagView:
    """What the RAG lane saw and decided in one attempt."""

    retrieval: dict | None
    queries: list[str]
    ranked: pl.DataFrame  # rank, doc_id, score, round, variant, grade, relevant, in_context
    missed: pl.DataFrame  # doc_id, grade, source, candidate_rank: relevant docs not in the ranked list
    context: pl.DataFrame  # chunk, doc_id, tokens, relevant, text
    context_scores: dict | None
    claims: (
        pl.DataFrame
    )  # claim_index (0-based, as stage reasons name claims), verdict, score, text, evidence, quote ...
    logged_citations: pl.DataFrame  # doc_id, quote, claim_index as logged by the assistant
    grounding: dict | None
    citations: dict | None
    answer: dict | None


@dataclass
class AgentView:
    """The tool calls of one attempt against the reference, and the verified world state."""

    tools: dict | None
    calls: pl.DataFrame  # position, match, actual_call, expected_call, actual_status, matched_path
    argument_diffs: pl.DataFrame  # position, tool, field, expected, actual (JSON text)
    step_errors: pl.DataFrame  # step, tool, status, error
    outcome: dict | None
    milestones: pl.DataFrame  # name, path, op, expected, actual, passed


@dataclass
class Attempt:
    """One trace of the case: harness status, per-lane outcome, every stage, and the lanes' views."""

    trace_id: str
    attempt: int | None
    harness_status: str | None
    harness_error: str | None
    answer_text: str | None
    outcomes: pl.DataFrame  # lane, outcome, first_failing_stage, owner, reason, hazard
    stages: pl.DataFrame  # lane, stage, stage_order, status, reason
    metrics: dict[str, object]
    rag: RagView | None = None
    agent: AgentView | None = None


@dataclass
class CaseStory:
    """One case of one run end to end."""

    run_id: str
    case_id: str
    manifest: dict | None
    case: dict | None
    attempts: list[Attempt]
    focus: str | None = None
    reliability: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)
    gates: list[dict] = field(default_factory=list)  # gate, role (blocks / excluded), status, owner, reason, ...
    review: pl.DataFrame | None = None
    relevance_threshold: int = 2

    @property
    def known(self) -> bool:
        return self.case is not None or bool(self.attempts)

    def attempt_of(self, number: int | None) -> Attempt | None:
        return next((a for a in self.attempts if a.attempt == number), None)


def _empty(schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


_EMPTY: dict[tuple, pl.DataFrame] = {}


def _frame(rows: list[dict], schema: Mapping[str, pl.DataType]) -> pl.DataFrame:
    """Row dicts as a frame of this schema (other keys ignored): one construction instead of a query."""
    if rows:
        return pl.DataFrame(rows, schema=schema)
    # clearing a kept empty frame is a fifth of the cost of building one
    key = tuple(schema.items())
    if key not in _EMPTY:
        _EMPTY[key] = _empty(dict(schema))
    return _EMPTY[key].clear()


def _parts(frame: pl.DataFrame, key: str) -> dict[object, pl.DataFrame]:
    """A frame partitioned by one column, in order; named by each part's first key, as partition_by's as_dict would
    name them with a query per part."""
    return {part.get_column(key)[0]: part for part in frame.partition_by(key, maintain_order=True)}


def _nulls_first(value) -> tuple[bool, object]:
    # a sort key ordering None first, as polars sorts nulls
    return value is not None, value


def _nulls_last(value) -> tuple[bool, object]:
    return value is None, value


def _by_trace(rows: Iterable[dict]) -> dict[str, list[dict]]:
    """Rows by trace id, in order; a null id is left out, as a filter on it matches nothing."""
    index: dict[str, list[dict]] = {}
    for row in rows:
        if row["trace_id"] is not None:
            index.setdefault(row["trace_id"], []).append(row)
    return index


class _CaseRows:
    """One case's tables as row dicts, each table converted once and indexed by trace id on first use: a story looks
    rows up a hundred times, and a polars query costs ~50 µs however few rows it has."""

    def __init__(self, tables: CaseTables) -> None:
        self.tables = tables
        self._all: dict[str, list[dict]] = {}
        self._traces: dict[str, dict[str, list[dict]]] = {}
        self._schemas: dict[str, pl.Schema] = {}

    def all(self, name: str) -> list[dict]:
        """Every row of a table; none for a table the run lacks."""
        rows = self._all.get(name)
        if rows is None:
            frame = self.tables.frame(name)
            rows = self._all[name] = frame.to_dicts() if frame is not None else []
        return rows

    def of_trace(self, name: str, trace_id: str | None) -> list[dict]:
        """The rows of one trace in table order; none for a table without a trace_id column."""
        index = self._traces.get(name)
        if index is None:
            frame = self.tables.frame(name)
            index = self._traces[name] = (
                _by_trace(self.all(name)) if frame is not None and "trace_id" in frame.columns else {}
            )
        return index.get(trace_id, []) if trace_id is not None else []

    def first(self, name: str, trace_id: str | None) -> dict | None:
        rows = self.of_trace(name, trace_id)
        return rows[0] if rows else None

    def schema(self, name: str) -> pl.Schema:
        """The column types of a table the run has (a frame builds its schema anew each time it is asked)."""
        if name not in self._schemas:
            self._schemas[name] = self.tables.frames[name].schema
        return self._schemas[name]


def _json(text: str | None):
    if text is None:
        return None
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def json_text(value) -> str:
    """A value as compact JSON (strings quoted, so "88171" and 88171 read apart)."""
    if value is ABSENT:
        return ABSENT
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def split_call(call: str | None) -> tuple[str | None, object]:
    """(tool, arguments) of a canonical call key `name({...})`; arguments stay text when they are not JSON."""
    if call is None:
        return None, None
    name, bracket, rest = call.partition("(")
    if not bracket or not rest.endswith(")"):
        return call, None
    return name, _json(rest[:-1])


def _same(a, b) -> bool:
    # bool is an int in Python: True must not equal 1, nor 1 equal "1"
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def field_diffs(expected, actual, path: str = "") -> list[tuple[str, str, str]]:
    """(dotted path, expected JSON, actual JSON) of every leaf where two argument values differ."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(expected) | set(actual), key=str):
            where = f"{path}.{key}" if path else str(key)
            out.extend(field_diffs(expected.get(key, ABSENT), actual.get(key, ABSENT), where))
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (e, a) in enumerate(zip(expected, actual, strict=True)):
            out.extend(field_diffs(e, a, f"{path}[{i}]"))
        return out
    if expected is ABSENT and actual is ABSENT:
        return []
    if expected is not ABSENT and actual is not ABSENT and _same(expected, actual):
        return []
    return [(path, json_text(expected), json_text(actual))]


def call_argument_diffs(expected_call: str | None, actual_call: str | None) -> list[tuple[str, str, str]]:
    """(tool.field, expected, actual) for a call whose arguments differ from the reference; the whole calls when no
    field differs as a value (the scorer's value rules, such as strict types, decided)."""
    expected_tool, expected_args = split_call(expected_call)
    actual_tool, actual_args = split_call(actual_call)
    tool = actual_tool or expected_tool or "call"
    if expected_tool != actual_tool:
        return [(f"{tool} (tool)", json_text(expected_tool), json_text(actual_tool))]
    diffs = field_diffs(expected_args, actual_args)
    if not diffs:
        return [(f"{tool} (arguments)", expected_call or ABSENT, actual_call or ABSENT)]
    return [(f"{tool}.{where}" if where else tool, e, a) for where, e, a in diffs]


def _at_path(state, path: str | None):
    """The value at a dotted path of a world state (ABSENT when a key is missing)."""
    if state is None or path is None:
        return ABSENT
    value = state
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return ABSENT
    return value


def _lane_order(case: dict | None, seen: Iterable[str | None]) -> list[str]:
    lanes = list(case["lanes"]) if case and case.get("lanes") else []
    return [*lanes, *(lane for lane in dict.fromkeys(seen) if lane not in lanes)]


def _outcomes(stages: pl.DataFrame, attribution: pl.DataFrame) -> pl.DataFrame:
    """Per (trace, lane): pass, fail or incomplete with first failing stage and owner; the stored attribution wins."""
    columns = ["trace_id", "lane", "outcome", "first_failing_stage", "owner", "reason", "hazard"]
    if stages.height == 0:
        return _empty({c: pl.String for c in columns})
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


def _with_retrieval(traces: pl.DataFrame) -> pl.DataFrame:
    return traces.filter(pl.col("retrieval").is_not_null()) if "retrieval" in traces.columns else traces.clear()


def _ranked(traces: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(hits, candidates) ranked per trace as docs/metrics.md#retrieval ranks them: rounds in order, first occurrence of a doc wins."""
    schema = {
        "trace_id": pl.String,
        "rank": pl.Int64,
        "doc_id": pl.String,
        "score": pl.Float64,
        "round": pl.Int64,
        "variant": pl.String,
    }
    if traces.height == 0 or "retrieval" not in traces.columns or not isinstance(traces.schema["retrieval"], pl.List):
        return _empty(schema), _empty({"trace_id": pl.String, "candidate_rank": pl.Int64, "doc_id": pl.String})
    numbered = traces.select("trace_id", "retrieval").with_row_index("_tid")
    ids = numbered.select("_tid", "trace_id")
    hits = ranked_hits(numbered)
    hits = hits.join(ids, on="_tid", how="left").select(list(schema)) if hits.height else _empty(schema)
    rounds = retrieval_rounds(numbered)
    candidates = ranked_entries(rounds, "candidates") if rounds.height else pl.DataFrame()
    if candidates.height == 0:
        return hits, _empty({"trace_id": pl.String, "candidate_rank": pl.Int64, "doc_id": pl.String})
    candidates = (
        first_occurrences(candidates)
        .join(ids, on="_tid", how="left")
        .select("trace_id", pl.col("rank").alias("candidate_rank"), "doc_id")
    )
    return hits, candidates


@dataclass
class _Ranked:
    """A case's hits and candidates by trace, with their column types."""

    hits: dict[str, list[dict]]
    hit_schema: dict[str, pl.DataType]  # without trace_id
    candidates: dict[str, list[dict]]
    candidate_rank: pl.DataType

    @classmethod
    def of(cls, hits: pl.DataFrame, candidates: pl.DataFrame) -> _Ranked:
        return cls(
            hits=_by_trace(hits.to_dicts()),
            hit_schema={k: v for k, v in hits.schema.items() if k != "trace_id"},
            candidates=_by_trace(candidates.to_dicts()),
            candidate_rank=candidates.schema["candidate_rank"],
        )


@dataclass
class _Grades:
    """The case's qrels, one row per doc (the first), and the column types they came with."""

    rows: dict[str | None, dict]
    schema: dict[str, pl.DataType]

    @classmethod
    def of(cls, qrels: pl.DataFrame | None) -> _Grades:
        if qrels is None or qrels.height == 0:
            return cls({}, {"doc_id": pl.String, "grade": pl.Int64, "source": pl.String})
        rows: dict[str | None, dict] = {}
        for doc, grade, source in zip(
            qrels["doc_id"].to_list(), qrels["grade"].cast(pl.Int64).to_list(), qrels["source"].to_list(), strict=True
        ):
            rows.setdefault(doc, {"doc_id": doc, "grade": grade, "source": source})
        schema = qrels.schema
        return cls(rows, {"doc_id": schema["doc_id"], "grade": pl.Int64, "source": schema["source"]})

    def grade(self, doc_id: str | None) -> int | None:
        # a null doc id joins nothing
        row = self.rows.get(doc_id) if doc_id is not None else None
        return row["grade"] if row else None


# (column shown, column of the claims table): the claim, its verdicts and their reasons first, the evidence after
CLAIM_COLUMNS = (
    ("claim_index", "claim_index"),
    ("verdict", "verdict"),
    ("text", "claim"),
    ("judge_reason", "reason"),
    ("citation_verdict", "citation_verdict"),
    ("citation_reason", "citation_reason"),
    ("score", "score"),
    ("evidence_doc_id", "evidence_doc_id"),
    ("evidence_quote", "evidence_quote"),
    ("quote_verified", "quote_verified"),
    ("cited_doc_ids", "cited_doc_ids"),
    ("status", "status"),
)


def _rag_view(trace: dict, rows: _CaseRows, grades: _Grades, ranking: _Ranked) -> RagView:
    trace_id = trace["trace_id"]
    threshold = rows.tables.relevance_threshold
    relevant = [g for g in grades.rows.values() if g["grade"] is not None and g["grade"] >= threshold]
    relevant_ids = {g["doc_id"] for g in relevant}
    # a null doc id is neither relevant nor in the context (null, as polars' is_in has it)
    context = [
        {
            "chunk": i,
            "doc_id": c.get("doc_id"),
            "tokens": c.get("tokens"),
            "relevant": None if c.get("doc_id") is None else c.get("doc_id") in relevant_ids,
            "text": _preview(c.get("text")),
        }
        for i, c in enumerate(trace.get("context") or [], start=1)
    ]
    in_context = {c["doc_id"] for c in context}
    ranked = []
    for hit in ranking.hits.get(trace_id, []):
        grade = grades.grade(hit["doc_id"])
        ranked.append(
            {
                **hit,
                "grade": grade,
                "relevant": grade is not None and grade >= threshold,
                "in_context": None if hit["doc_id"] is None else hit["doc_id"] in in_context,
            }
        )
    ranked_ids = {r["doc_id"] for r in ranked if r["doc_id"] is not None}
    candidate_ranks: dict[str, list] = {}
    for candidate in ranking.candidates.get(trace_id, []):
        if candidate["doc_id"] is not None:
            candidate_ranks.setdefault(candidate["doc_id"], []).append(candidate["candidate_rank"])
    missed = [
        {**g, "candidate_rank": rank}
        for g in relevant
        if g["doc_id"] is None or g["doc_id"] not in ranked_ids
        for rank in candidate_ranks.get(g["doc_id"]) or [None]
    ]
    missed.sort(key=lambda m: _nulls_first(m["doc_id"]))
    claims_frame = rows.tables.frame("claims")
    claims = rows.of_trace("claims", trace_id)
    if claims_frame is None:
        claims_view = pl.DataFrame()
    elif not claims:
        claims_view = claims_frame.clear()
    else:
        schema = rows.schema("claims")
        claims_view = _frame(
            [
                {shown: c[column] for shown, column in CLAIM_COLUMNS}
                for c in sorted(claims, key=lambda c: _nulls_first(c["claim_index"]))
            ],
            {shown: schema[column] for shown, column in CLAIM_COLUMNS},
        )
    logged = pl.DataFrame(
        trace.get("citations") or [], schema={"doc_id": pl.String, "quote": pl.String, "claim_index": pl.Int64}
    )
    queries = [r.get("query") for r in trace.get("retrieval") or [] if r.get("query")]
    return RagView(
        retrieval=rows.first("retrieval_scores", trace_id),
        queries=queries,
        ranked=_frame(
            ranked, {**ranking.hit_schema, "grade": pl.Int64, "relevant": pl.Boolean, "in_context": pl.Boolean}
        ),
        missed=_frame(missed, {**grades.schema, "candidate_rank": ranking.candidate_rank}),
        context=_frame(
            context,
            {"chunk": pl.Int64, "doc_id": pl.String, "tokens": pl.Int64, "relevant": pl.Boolean, "text": pl.String},
        ),
        context_scores=rows.first("context_scores", trace_id),
        claims=claims_view,
        logged_citations=logged,
        grounding=rows.first("grounding_scores", trace_id),
        citations=rows.first("citation_scores", trace_id),
        answer=rows.first("answer_scores", trace_id),
    )


def _preview(text: str | None) -> str | None:
    return text if text is None or len(text) <= TEXT_PREVIEW else text[: TEXT_PREVIEW - 1] + "…"


CALL_COLUMNS = ("position", "match", "actual_call", "expected_call", "actual_status", "matched_path")


def _agent_view(trace: dict, rows: _CaseRows, case: dict | None) -> AgentView:
    trace_id = trace["trace_id"]
    found = rows.of_trace("tool_call_diffs", trace_id)
    if found:
        schema = rows.schema("tool_call_diffs")
        calls = [
            {c: call[c] for c in CALL_COLUMNS}
            for call in sorted(found, key=lambda call: _nulls_first(call["position"]))
        ]
        calls_view = _frame(calls, {c: schema[c] for c in CALL_COLUMNS})
    else:
        calls = []
        calls_view = _empty({"position": pl.Int64, **{c: pl.String for c in CALL_COLUMNS[1:]}})
    diffs = [
        {"position": call["position"], "field": where, "expected": e, "actual": a}
        for call in calls
        if call["match"] == "args_differ"
        for where, e, a in call_argument_diffs(call["expected_call"], call["actual_call"])
    ]
    argument_diffs = pl.DataFrame(
        diffs, schema={"position": pl.Int64, "field": pl.String, "expected": pl.String, "actual": pl.String}
    )
    steps = [
        s
        for s in trace.get("steps") or []
        if s.get("kind") == "tool_call" and (s.get("error") or s.get("status") not in (None, "ok"))
    ]
    step_errors = pl.DataFrame(
        [
            {"step": s.get("index"), "tool": s.get("tool"), "status": s.get("status"), "error": s.get("error")}
            for s in steps
        ],
        schema={"step": pl.Int64, "tool": pl.String, "status": pl.String, "error": pl.String},
    )
    outcome = rows.first("outcome_scores", trace_id)
    expected = {m["name"]: m for m in (case or {}).get("milestones") or []}
    state = _json(trace.get("final_state_json"))
    milestones = [
        {
            "name": m.get("name"),
            "path": m.get("path"),
            "op": m.get("op"),
            "expected": expected.get(m.get("name"), {}).get("value_json"),
            "actual": json_text(_at_path(state, m.get("path"))) if state is not None else None,
            "passed": m.get("passed"),
        }
        for m in (outcome or {}).get("milestones") or []
    ]
    return AgentView(
        tools=rows.first("tool_scores", trace_id),
        calls=calls_view,
        argument_diffs=argument_diffs,
        step_errors=step_errors,
        outcome=outcome,
        milestones=pl.DataFrame(
            milestones,
            schema={
                "name": pl.String,
                "path": pl.String,
                "op": pl.String,
                "expected": pl.String,
                "actual": pl.String,
                "passed": pl.Boolean,
            },
        ),
    )


METRIC_TABLES = tuple(dict.fromkeys(t for t, _, _ in ATTEMPT_METRICS))


def _attempt_metrics(rows: _CaseRows, trace_id: str) -> dict[str, object]:
    metrics: dict[str, object] = {}
    found = {name: rows.first(name, trace_id) for name in METRIC_TABLES}
    for table, column, label in ATTEMPT_METRICS:
        row = found[table]
        if row is not None and column in row:
            metrics[label] = row[column]
    return metrics


LANE_KEYS = ("run_id", "trace_id", "case_id", "attempt", "lane")  # lane_outcomes' key
OUTCOME_COLUMNS = ("trace_id", "lane", "outcome", "first_failing_stage", "owner", "reason", "hazard")
STAGE_COLUMNS = {
    "lane": pl.String,
    "stage": pl.String,
    "stage_order": pl.Int64,
    "status": pl.String,
    "reason": pl.String,
}


def _columns(schema: Mapping[str, pl.DataType], columns: Iterable[str]) -> dict[str, pl.DataType]:
    return {c: schema[c] for c in columns}


def _outcome_rows(
    rows: _CaseRows, stages: list[dict], stage_schema: pl.Schema
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
    outcomes = _outcomes(_frame(stages, stage_schema), frame if frame is not None else pl.DataFrame())
    return outcomes.to_dicts(), dict(outcomes.schema)


def build_story(tables: CaseTables, case_id: str, trace_id: str | None = None) -> CaseStory:
    """The story of one case (every attempt; `trace_id` marks the attempt to show in full) from a run's tables."""
    tables = tables.for_cases([case_id])  # every lookup below is then within the case
    rows = _CaseRows(tables)
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
            _nulls_first(s["attempt"]),
            _nulls_first(s["trace_id"]),
            lane_rank.get(s["lane"], len(lanes)),
            _nulls_first(s["stage_order"]),
        ),
    )
    stage_schema = rows.schema("stage_results") if stages else STAGE_COLUMNS
    attempt_stage_schema = {c: stage_schema[c] for c in STAGE_COLUMNS}
    stages_of = _by_trace(stages)
    outcome_rows, outcome_schema = _outcome_rows(rows, stages, stage_schema)
    outcomes_of = _by_trace(outcome_rows)
    outcome_schema = {k: v for k, v in outcome_schema.items() if k != "trace_id"}
    grades = _Grades.of(tables.frame("qrels"))
    traces_frame = tables.frame("deid_traces")
    traces_frame = traces_frame if traces_frame is not None else pl.DataFrame()
    ranking = _Ranked.of(*(tables.ranked if tables.ranked is not None else _ranked(_with_retrieval(traces_frame))))

    # the traces and any trace only the stage results know, each once when there are stage results
    ids = [(t["trace_id"], t["attempt"]) for t in traces]
    if stages:
        first: dict[str | None, int | None] = {}
        for tid, number in [*ids, *((s["trace_id"], s["attempt"]) for s in stages)]:
            first.setdefault(tid, number)
        ids = list(first.items())
    ids.sort(key=lambda pair: (_nulls_last(pair[1]), _nulls_last(pair[0])))
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
                outcomes=_frame([{k: o[k] for k in outcome_schema} for o in outcomes_of.get(tid, [])], outcome_schema),
                stages=_frame(trace_stages, attempt_stage_schema),
                metrics=_attempt_metrics(rows, tid),
                rag=_rag_view(trace, rows, grades, ranking) if "rag" in trace_lanes else None,
                agent=_agent_view(trace, rows, case) if "agent" in trace_lanes else None,
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


# ---------------------------------------------------------------- against a baseline


def fmt(value, digits: int = 4) -> str:
    """A value as a report shows it: `digits` decimals, yes/no, – for none."""
    if value is None or value is ABSENT:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.{digits}f}"
    if isinstance(value, list | tuple):
        return ", ".join(fmt(v, digits) for v in value) if value else "–"
    return str(value)


# Costs are fractions of a cent: four decimals would hide every change.
DIGITS = {"cost_usd": 6}


def _delta_text(delta: float | None, metric: str) -> str:
    if delta is None:
        return ""
    if float(delta).is_integer() and metric not in DIGITS:
        return f" ({int(delta):+d})"
    return f" ({delta:+.{DIGITS.get(metric, 4)}f})"


def delta_cell(delta: float | None, metric: str) -> str | None:
    """A delta as the side-by-side table shows it: whole numbers as counts, costs with six decimals."""
    text = _delta_text(delta, metric)
    return text.strip()[1:-1] if text else None


def _changed(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return not (a == b or math.isclose(a, b, rel_tol=0, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b)))
    return a != b


def _delta(a, b) -> float | None:
    if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return float(b) - float(a)


def _paired(story: CaseStory, baseline: CaseStory) -> list[tuple[int | None, Attempt | None, Attempt | None]]:
    """(attempt number, baseline attempt, this run's attempt), paired by attempt number; only the focus with one."""
    focus = next((a for a in story.attempts if a.trace_id == story.focus), None)
    numbers = (
        [focus.attempt]
        if focus
        else list(dict.fromkeys([a.attempt for a in story.attempts] + [a.attempt for a in baseline.attempts]))
    )
    return [(n, baseline.attempt_of(n), story.attempt_of(n)) for n in numbers]


def _case_metrics(story: CaseStory) -> dict[str, object]:
    row = story.reliability[0] if story.reliability else {}
    return {k: row[k] for k in (*CASE_METRICS, *_hats(row)) if k in row}


def side_by_side(story: CaseStory, baseline: CaseStory) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(stages, metrics) of the baseline next to this run: per attempt and stage the two statuses; per metric the two
    values, the delta and whether it changed (metrics of attempt null are the case's reliability)."""
    stage_rows, metric_rows = [], []
    for number, old, new in _paired(story, baseline):
        old_stages = {(r["lane"], r["stage"]): r for r in (old.stages.rows(named=True) if old else [])}
        new_stages = {(r["lane"], r["stage"]): r for r in (new.stages.rows(named=True) if new else [])}
        for key in dict.fromkeys([*new_stages, *old_stages]):
            b, c = old_stages.get(key, {}).get("status"), new_stages.get(key, {}).get("status")
            stage_rows.append(
                {
                    "attempt": number,
                    "lane": key[0],
                    "stage": key[1],
                    "baseline": b,
                    "candidate": c,
                    "changed": b != c,
                    "reason": new_stages.get(key, {}).get("reason"),
                }
            )
        old_metrics, new_metrics = (old.metrics if old else {}), (new.metrics if new else {})
        for label in dict.fromkeys([*new_metrics, *old_metrics]):
            b, c = old_metrics.get(label), new_metrics.get(label)
            if b is None and c is None:
                continue
            metric_rows.append(
                {
                    "attempt": number,
                    "metric": label,
                    "baseline": fmt(b, DIGITS.get(label, 4)),
                    "candidate": fmt(c, DIGITS.get(label, 4)),
                    "delta": delta_cell(_delta(b, c), label),
                    "changed": _changed(b, c),
                }
            )
    old_case, new_case = _case_metrics(baseline), _case_metrics(story)
    for label in dict.fromkeys([*new_case, *old_case]):
        b, c = old_case.get(label), new_case.get(label)
        if b is None and c is None:
            continue
        metric_rows.append(
            {
                "attempt": None,
                "metric": label,
                "baseline": fmt(b),
                "candidate": fmt(c),
                "delta": delta_cell(_delta(b, c), label),
                "changed": _changed(b, c),
            }
        )
    stages = pl.DataFrame(
        stage_rows,
        schema={
            "attempt": pl.Int64,
            "lane": pl.String,
            "stage": pl.String,
            "baseline": pl.String,
            "candidate": pl.String,
            "changed": pl.Boolean,
            "reason": pl.String,
        },
    )
    metrics = pl.DataFrame(
        metric_rows,
        schema={
            "attempt": pl.Int64,
            "metric": pl.String,
            "baseline": pl.String,
            "candidate": pl.String,
            "delta": pl.String,
            "changed": pl.Boolean,
        },
    )
    return stages, metrics


# ---------------------------------------------------------------- terminal text


def _short(text: str | None, width: int = TEXT_PREVIEW) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _versions(manifest: dict | None) -> str:
    keys = ("candidate", "model", "prompt_version", "index_version", "dataset_version")
    return ", ".join(f"{k} {manifest[k]}" for k in keys if manifest and manifest.get(k))


def _call_text(call: dict) -> str:
    return f"{call.get('name')}({call.get('args_json') or '{}'})"


def case_lines(story: CaseStory) -> list[str]:
    """The case as the dataset states it."""
    case = story.case
    if case is None:
        return ["case: not in this run's de-identified cases"]
    lines = [
        f"input: {_short(case.get('input'), 400)}",
        f"lanes: {fmt(case.get('lanes'))} · criticality: {fmt(case.get('criticality'))} · "
        f"revision {fmt(case.get('case_revision'))}" + (" · multi-hop" if case.get("multi_hop") else ""),
    ]
    if case.get("tags"):
        lines.append("tags: " + ", ".join(f"{t['name']}={t['value']}" for t in case["tags"]))
    if case.get("counterfactual_of"):
        lines.append(
            f"counterfactual of {case['counterfactual_of']}: changed fact: {_short(case.get('changed_fact'), 400)}"
        )
    if case.get("required_doc_ids"):
        lines.append(f"required docs: {fmt(case['required_doc_ids'])}")
    if case.get("expected_answer_contains"):
        lines.append("expected answer contains: " + "; ".join(json_text(p) for p in case["expected_answer_contains"]))
    if case.get("reference_answer"):
        lines.append(f"reference answer: {_short(case['reference_answer'], 400)}")
    if case.get("expect_refusal"):
        lines.append("expects a refusal")
    if case.get("reference_tool_calls"):
        lines.append(
            f"reference calls ({case.get('tool_match') or 'default match'}): "
            + " → ".join(_call_text(c) for c in case["reference_tool_calls"])
        )
    for i, path in enumerate(case.get("alternatives") or [], start=1):
        lines.append(f"alternative path {i}: " + " → ".join(_call_text(c) for c in path))
    if case.get("dependencies"):
        lines.append("dependencies: " + "; ".join(" before ".join(d) for d in case["dependencies"]))
    if case.get("allowed_tools") or case.get("forbidden_tools"):
        lines.append(f"allowed tools: {fmt(case.get('allowed_tools'))} · forbidden: {fmt(case.get('forbidden_tools'))}")
    if case.get("milestones"):
        lines.append(
            "milestones: "
            + "; ".join(
                f"{m.get('name')}: {m.get('path')} {m.get('op')} {m.get('value_json')}" for m in case["milestones"]
            )
        )
    if case.get("fault_kind"):
        lines.append(
            f"injected fault: {case['fault_kind']} on {fmt(case.get('fault_tool'))}; unsafe after it: "
            f"{fmt(case.get('unsafe_after_fault'))}; escalation tools: {fmt(case.get('escalation_tools'))}"
        )
    return lines


def verdict_line(attempt: Attempt) -> list[str]:
    """Per lane: the attempt's outcome, its first failing stage and the owner."""
    lines = []
    for row in attempt.outcomes.rows(named=True):
        if row["outcome"] == "fail":
            lines.append(
                f"{row['lane']}: FAIL at {row['first_failing_stage']} (owner: {row['owner']})"
                + (f" — hazard {row['hazard']}" if row.get("hazard") else "")
            )
            lines.append(f"  why: {_short(row['reason'], 400)}")
        elif row["outcome"] == "incomplete":
            lines.append(f"{row['lane']}: INCOMPLETE (owner: {row['owner']}) — {_short(row['reason'], 400)}")
        else:
            lines.append(
                f"{row['lane']}: {row['outcome'].upper()}" + (f" — hazard {row['hazard']}" if row.get("hazard") else "")
            )
    return lines


def case_value(story: CaseStory, metric: str | None):
    """The case's value of a gate metric: the mean over attempts that have it, else the case's reliability column."""
    values = [a.metrics[metric] for a in story.attempts if metric in a.metrics and a.metrics[metric] is not None]
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    if numbers:
        return sum(numbers) / len(numbers)
    row = story.reliability[0] if story.reliability else {}
    return row.get(metric) if metric else None


def gate_lines(story: CaseStory, baseline: CaseStory | None = None) -> list[str]:
    """The gates of the run this case blocks (and why) or is excluded from."""
    lines = []
    excluded = [g["gate"] for g in story.gates if g["role"] != "blocks"]
    for g in story.gates:
        if g["role"] == "blocks":
            mine = case_value(story, g["metric"])
            theirs = case_value(baseline, g["metric"]) if baseline is not None and baseline.known else None
            value = (
                f"; this case: {g['metric']} {fmt(theirs)} → {fmt(mine)}"
                if theirs is not None and mine is not None
                else f"; this case: {g['metric']} {fmt(mine)}"
                if mine is not None
                else ""
            )
            lines.append(
                f"blocks gate {g['gate']} ({g['status']}, owner {g['owner']}, against {fmt(g['baseline_run_id'])}): "
                f"{g['reason'] or 'no reason given'}{value}"
            )
    if excluded:
        why = (
            "flaky in this run"
            if story.quarantine
            else "multi-hop"
            if (story.case or {}).get("multi_hop")
            else "flaky in the baseline, or out of the gate's scope"
        )
        lines.append(f"excluded from gate(s) {', '.join(excluded)}: {why}")
    return lines


def _rag_lines(view: RagView, threshold: int) -> list[str]:
    out = []
    r = view.retrieval or {}
    if view.queries:
        out.append(
            "queries: "
            + " | ".join(json_text(q) for q in view.queries)
            + (f" (variants {fmt(r.get('variants'))})" if r.get("variants") else "")
        )
    out.append(f"retrieved (rank order; relevant = qrels grade >= {threshold}):")
    for row in view.ranked.rows(named=True):
        grade = "unjudged" if row["grade"] is None else f"grade {row['grade']}"
        mark = "✔ relevant" if row["relevant"] else "· not relevant"
        out.append(
            f"  rank {row['rank']}: {row['doc_id']}  {mark} ({grade}), score {fmt(row['score'])}, round {row['round']}"
            + (", in context" if row["in_context"] else "")
        )
    if view.ranked.height == 0:
        out.append("  nothing retrieved")
    for row in view.missed.rows(named=True):
        where = (
            f"in the candidates at {row['candidate_rank']} but not in the hits"
            if row["candidate_rank"] is not None
            else "never retrieved"
        )
        out.append(f"  ✘ missed relevant {row['doc_id']} (grade {row['grade']}, {row['source']}): {where}")
    if r:
        out.append(
            "  "
            + ", ".join(
                f"{k} {fmt(r.get(k))}"
                for k in (
                    "recall_at_1",
                    "recall_at_5",
                    "recall_at_10",
                    "recall_at_20",
                    "precision_at_5",
                    "mrr",
                    "ndcg_at_10",
                    "judged_at_10",
                )
            )
        )
        out.append(
            f"  first hit rank {fmt(r.get('first_hit_rank'))}, relevant {fmt(r.get('n_relevant'))}, "
            f"rounds {fmt(r.get('rounds'))}, evidence round {fmt(r.get('evidence_round'))}, "
            f"failure class {fmt(r.get('failure_class'))}"
        )
    c = view.context_scores or {}
    out.append(
        f"context ({view.context.height} chunks, {fmt(c.get('context_tokens'))} tokens; context recall "
        f"{fmt(c.get('context_recall'))}, precision {fmt(c.get('context_precision'))}):"
    )
    for row in view.context.rows(named=True):
        out.append(
            f"  [{row['chunk']}] {row['doc_id']}{' (relevant)' if row['relevant'] else ''}, {fmt(row['tokens'])} tokens: "
            f"{json_text(row['text'])}"
        )
    g = view.grounding or {}
    out.append(
        f"claims (grounding rate {fmt(g.get('grounding_rate'))}; {fmt(g.get('n_supported'))} of {fmt(g.get('n_claims'))} "
        f"supported, judge {fmt(g.get('judge_version'))}):"
    )
    for row in view.claims.rows(named=True):
        out.append(
            f"  claim {row['claim_index']}: {row['verdict']} (score {fmt(row['score'])}) {json_text(row['text'])}"
        )
        out.append(
            f"    evidence {fmt(row['evidence_doc_id'])}: {json_text(row['evidence_quote'])}"
            + ("" if row["quote_verified"] in (None, True) else " (quote NOT found in the context)")
        )
        out.append(
            f"    citation: {fmt(row['citation_verdict'])} → {fmt(row['cited_doc_ids'])}"
            + (f" — {row['citation_reason']}" if row.get("citation_reason") else "")
        )
        if row["verdict"] != "SUPPORTED" and row.get("judge_reason"):
            out.append(f"    judge: {row['judge_reason']}")
    if view.claims.height == 0:
        out.append("  no claims")
    cs = view.citations or {}
    if cs:
        out.append(
            f"citations: precision {fmt(cs.get('citation_precision'))}, recall {fmt(cs.get('citation_recall'))}, "
            f"resolved {fmt(cs.get('citation_resolution_rate'))}, quotes found {fmt(cs.get('quotes_found_rate'))}, "
            f"dead {fmt(cs.get('dead_citation_ids'))}"
        )
    for row in view.logged_citations.rows(named=True):
        out.append(f"  logged citation {row['doc_id']}: {json_text(row['quote'])}")
    a = view.answer or {}
    if a:
        out.append(
            f"answer checks: contains_all {fmt(a.get('contains_all'))} (missing {fmt(a.get('missing_expected'))}), "
            f"exact match {fmt(a.get('exact_match'))}, token F1 {fmt(a.get('token_f1'))}, refused {fmt(a.get('refused'))} "
            f"(refusal expected {fmt(a.get('expect_refusal'))}), correct {fmt(a.get('answer_correct'))}"
        )
    return out


def _agent_lines(view: AgentView) -> list[str]:
    out = []
    t = view.tools or {}
    if t:
        out.append(
            f"tool calls (path {fmt(t.get('matched_path'))}, match {fmt(t.get('tool_match'))}): "
            f"F1 {fmt(t.get('tool_call_f1'))}, precision {fmt(t.get('tool_call_precision'))}, "
            f"recall {fmt(t.get('tool_call_recall'))}, args valid {fmt(t.get('args_valid_rate'))}, "
            f"order accuracy {fmt(t.get('strict_order_accuracy'))}, unnecessary {fmt(t.get('unnecessary_call_rate'))}"
        )
    for row in view.calls.rows(named=True):
        status = f" [{row['actual_status']}]" if row["actual_status"] not in (None, "ok") else ""
        if row["match"] == "same":
            out.append(f"  call {row['position']}: {row['actual_call']}{status}  = reference")
        elif row["match"] == "args_differ":
            out.append(f"  call {row['position']}: {row['actual_call']}{status}  ≠ reference {row['expected_call']}")
        elif row["match"] == "missing":
            out.append(f"  call {row['position']}: (never called) {row['expected_call']}  ✘ missing")
        else:
            out.append(f"  call {row['position']}: {row['actual_call']}{status}  ✘ {row['match']}")
    if view.argument_diffs.height:
        out.append("wrong arguments:")
        out.extend(
            f"  {row['field']}: expected {row['expected']}, got {row['actual']}"
            for row in view.argument_diffs.rows(named=True)
        )
    if view.step_errors.height:
        out.append("tool errors:")
        out.extend(
            f"  step {row['step']} {row['tool']}: {row['status']} — {_short(row['error'], 300)}"
            for row in view.step_errors.rows(named=True)
        )
    for label, key in (
        ("invalid calls", "invalid_calls"),
        ("order violations", "order_violations"),
        ("loop", "loop_calls"),
        ("policy violations", "policy_violations"),
        ("unsafe actions", "unsafe_actions"),
    ):
        if t.get(key):
            out.append(f"{label}: {'; '.join(t[key])}")
    if t.get("adapter_divergence"):
        out.append(f"adapter divergence: {t['adapter_divergence']}")
    if view.milestones.height:
        out.append("milestones:")
        for row in view.milestones.rows(named=True):
            mark = "✔ passed" if row["passed"] else "✘ failed"
            out.append(
                f"  {row['name']}: {mark} — {row['path']} {row['op']} {fmt(row['expected'])}"
                + (f" (final state: {row['actual']})" if row["actual"] is not None else "")
            )
    o = view.outcome or {}
    if o:
        fault = (
            f", fault {o.get('fault_kind')} → {fmt(o.get('fault_outcome'))} (call {fmt(t.get('fault_call_index'))}, "
            f"escalated after it {fmt(t.get('escalated_after_fault'))})"
            if o.get("fault_kind")
            else ", no injected fault"
        )
        out.append(
            f"outcome: success {fmt(o.get('success'))} (claimed {fmt(o.get('success_claimed'))}){fault}; "
            f"{fmt(o.get('n_steps'))} steps, {fmt(o.get('cost_usd'), 6)} USD"
        )
    return out


def attempt_lines(attempt: Attempt, threshold: int) -> list[str]:
    """One attempt in full: verdict, every stage, the lanes' evidence."""
    head = f"attempt {fmt(attempt.attempt)} — {attempt.trace_id} (harness {fmt(attempt.harness_status)}"
    head += f": {_short(attempt.harness_error, 300)})" if attempt.harness_error else ")"
    out = [head, *("  " + line for line in verdict_line(attempt))]
    stages = attempt.stages.rows(named=True)
    for lane in dict.fromkeys(row["lane"] for row in stages):
        out.append(f"  stages ({lane}):")
        for row in stages:
            if lane is None or row["lane"] != lane:  # a null lane matches no row, as in a polars filter
                continue
            reason = f"  {_short(row['reason'], 300)}" if row["reason"] else ""
            out.append(f"    {row['stage']:<17}{row['status']:<15}{reason}".rstrip())
    if attempt.rag is not None:
        out.extend("  " + line for line in _rag_lines(attempt.rag, threshold))
    if attempt.agent is not None:
        out.extend("  " + line for line in _agent_lines(attempt.agent))
    if attempt.answer_text is not None:
        out.append(f"  answer: {json_text(_short(attempt.answer_text, 600))}")
    return out


def _one_line(attempt: Attempt) -> str:
    parts = []
    for row in attempt.outcomes.rows(named=True):
        stage = f" at {row['first_failing_stage']}" if row["first_failing_stage"] else ""
        parts.append(f"{row['lane']} {row['outcome']}{stage}")
    return f"{attempt.trace_id}: {', '.join(parts) or 'no stage results'}"


def _hats(row: dict) -> list[str]:
    return sorted((k for k in row if PASS_HAT.fullmatch(k)), key=lambda k: int(k.rsplit("_", 1)[1]))


PROCESS_FAILED = "failed_process_stage"


def process_failures(story: CaseStory, lane: str | None) -> tuple[int, list[str]]:
    """(attempts of the case that failed a stage of `lane` other than the verified outcome, those stages in order)."""
    failed, stages = 0, {}
    for attempt in story.attempts:
        hit = [
            row
            for row in attempt.stages.rows(named=True)
            if row["lane"] == lane and row["stage"] != "outcome" and row["status"] == "fail"
        ]
        failed += bool(hit)
        stages.update({row["stage"]: row.get("stage_order") for row in hit})
    return failed, sorted(stages, key=lambda s: (stages[s] is None, stages[s] or 0, s))


def reliability_lines(story: CaseStory) -> list[str]:
    """pass@1, pass^k and flakiness of the case, its quarantine and its review-queue items."""
    out = []
    for row in story.reliability:
        hats = " ".join(f"pass^{k.rsplit('_', 1)[1]} {fmt(row[k])}" for k in _hats(row) if row[k] is not None)
        out.append(
            f"reliability ({fmt(row.get('lane'))}): {fmt(row.get('n_success'))} of {fmt(row.get('n_complete'))} complete "
            f"attempts succeeded ({fmt(row.get('n_incomplete'))} incomplete) · pass@1 {fmt(row.get('pass_at_1'))} · "
            f"{hats} · flaky {fmt(row.get('flaky'))}"
        )
        failed, stages = process_failures(story, row.get("lane")) if row.get("lane") == "agent" else (0, [])
        if failed and row.get("n_success"):
            # pass@1 counts the verified outcome only: said where successes beside failed stages would look wrong
            out.append(
                f"  pass@1 and pass^k count an attempt a success when its verified outcome passed, not every stage: "
                f"{failed} of {len(story.attempts)} attempt(s) failed a process stage ({', '.join(stages)})"
            )
    for row in story.quarantine:
        out.append(f"quarantined: {row.get('reason')}; flipped {fmt(row.get('flipped_trace_ids'))}")
    if story.review is not None:
        for row in story.review.rows(named=True):
            out.append(
                f"review queue: {row.get('trace_id')} {row.get('stage')}: {row.get('why')}"
                + (f" — {_short(row.get('detail'), 300)}" if row.get("detail") else "")
            )
    return out


def baseline_lines(story: CaseStory, baseline: CaseStory) -> list[str]:
    """Baseline → this run, per attempt: every stage status, and the metrics that changed."""
    if not baseline.known:
        return [f"against baseline {baseline.run_id}: the case is not in that run"]
    stages, metrics = side_by_side(story, baseline)
    out = [f"against baseline {baseline.run_id} (baseline → {story.run_id}):"]
    seen: dict[tuple, int | None] = {}
    for number, old, new in _paired(story, baseline):
        head = f"  attempt {fmt(number)}: {old.trace_id if old else '(no attempt)'} → {new.trace_id if new else '(no attempt)'}"
        rows = (
            stages.filter(pl.col("attempt") == number)
            if number is not None
            else stages.filter(pl.col("attempt").is_null())
        )
        body = [
            f"    {row['lane']} {row['stage']}: {fmt(row['baseline'])} → {fmt(row['candidate'])}"
            + ("  ✘ changed" if row["changed"] else "")
            for row in rows.rows(named=True)
        ]
        moved = metrics.filter((pl.col("attempt") == number) & pl.col("changed"))
        both = moved.filter((pl.col("baseline") != "–") & (pl.col("candidate") != "–"))
        body.extend(
            f"    {row['metric']} {row['baseline']} → {row['candidate']}"
            + (f" ({row['delta']})" if row["delta"] else "")
            for row in both.rows(named=True)
        )
        for side, label in (
            ("candidate", f"no value in {story.run_id}"),
            ("baseline", f"no value in {baseline.run_id}"),
        ):
            gone = moved.filter(pl.col(side) == "–")["metric"].to_list()
            if gone:
                body.append(f"    {label}: {', '.join(gone)}")
        same = metrics.filter((pl.col("attempt") == number) & ~pl.col("changed")).height
        body.append(f"    ({same} other metrics unchanged)")
        twin = seen.setdefault(tuple(body), number)
        out.append(head)
        out.extend(body if twin == number else [f"    same as attempt {fmt(twin)}"])
    case_rows = metrics.filter(pl.col("attempt").is_null())
    if case_rows.height:
        out.append(
            "  case: "
            + ", ".join(f"{r['metric']} {r['baseline']} → {r['candidate']}" for r in case_rows.rows(named=True))
        )
    return out


def case_story_text(story: CaseStory, baseline: CaseStory | None = None) -> str:
    """The story as terminal text."""
    out = [
        f"case {story.case_id} in run {story.run_id}" + (f" ({_versions(story.manifest)})" if story.manifest else "")
    ]
    out.extend("  " + line for line in case_lines(story))
    gates = gate_lines(story, baseline)
    if gates:
        out.append("")
        out.append("gates:")
        out.extend("  " + line for line in gates)
    focus = next((a for a in story.attempts if a.trace_id == story.focus), None)
    shown = [focus] if focus else story.attempts
    bodies: dict[tuple[str, ...], Attempt] = {}
    for attempt in shown:
        lines = attempt_lines(attempt, story.relevance_threshold)
        # repeated attempts often fail the same way: say so instead of printing the same page again
        twin = bodies.setdefault(tuple(lines[1:]), attempt)
        out.append("")
        out.extend(
            lines
            if twin is attempt
            else [lines[0], f"  same stages, evidence and answer as attempt {fmt(twin.attempt)}"]
        )
    others = [a for a in story.attempts if a not in shown]
    if others:
        out.append("")
        out.append("other attempts:")
        out.extend(f"  {_one_line(a)}" for a in others)
    if not story.attempts:
        out.append("")
        out.append("no attempt of this case in the run")
    rel = reliability_lines(story)
    if rel:
        out.append("")
        out.extend(rel)
    if baseline is not None:
        out.append("")
        out.extend(baseline_lines(story, baseline))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- HTML page

REPORT_LINKS = (
    ("RAG lane report", "../rag.html"),
    ("Agent lane report", "../agent.html"),
    ("Gate report", "../gate.html"),
)


def case_page_name(case_id: str) -> str:
    """The file name of a case page: the case id, percent-encoded where it is not a plain name; cut with a hash suffix
    where that would pass the file-system limit of 255 bytes (render.href bounds its links the same way)."""
    return bounded_file_name(quote(case_id, safe="") + ".html")


def _dict_table(row: dict | None, keys: Sequence[str]) -> pl.DataFrame | None:
    if not row:
        return None
    return pl.DataFrame(
        [{"field": k, "value": fmt(row.get(k))} for k in keys], schema={"field": pl.String, "value": pl.String}
    )


def case_sections(story: CaseStory, baseline: CaseStory | None = None) -> list[Section]:
    """The story as report sections (the HTML page's body)."""
    sections = [
        Section(
            "Case",
            [
                f"- run {story.run_id}" + (f": {_versions(story.manifest)}" if story.manifest else ""),
                *(f"- {line}" for line in case_lines(story)),
            ],
        )
    ]
    verdicts = [
        f"- {a.trace_id} {line.strip()}"
        for a in story.attempts
        for line in verdict_line(a)
        if not line.startswith("  ")
    ]
    verdicts += [f"- {line}" for line in gate_lines(story, baseline)]
    sections.append(Section("Verdict", verdicts or ["- no attempt in this run"]))
    focus = next((a for a in story.attempts if a.trace_id == story.focus), None)
    shown = [focus] if focus else story.attempts
    bodies: dict[tuple[str, ...], Attempt] = {}
    for attempt in shown:
        # an attempt shown alone has no twin: its text need not be written to tell
        twin = (
            bodies.setdefault(tuple(attempt_lines(attempt, story.relevance_threshold)[1:]), attempt)
            if len(shown) > 1
            else attempt
        )
        if twin is attempt:
            sections.extend(_attempt_sections(attempt, story.relevance_threshold))
        else:
            sections.append(
                Section(
                    f"Attempt {fmt(attempt.attempt)}: {attempt.trace_id}",
                    [f"- same stages, evidence and answer as attempt {fmt(twin.attempt)}"],
                )
            )
    others = [a for a in story.attempts if focus is not None and a is not focus]
    if others:
        sections.append(Section("Other attempts", [f"- {_one_line(a)}" for a in others]))
    if story.reliability or story.quarantine or story.review is not None:
        first = story.reliability[0] if story.reliability else {}
        columns = [c for c in ("lane", *CASE_METRICS, "n_incomplete") if c in first] + _hats(first)
        rows = [
            {
                **{c: row.get(c) for c in columns},
                PROCESS_FAILED: process_failures(story, row.get("lane"))[0] if row.get("lane") == "agent" else None,
            }
            for row in story.reliability
        ]
        if rows and all(r[PROCESS_FAILED] is None for r in rows):
            rows = [{c: r[c] for c in columns} for r in rows]
        else:
            # beside n_success: the attempts pass@1 counts as successes although a process stage failed
            order = (
                [*columns[: columns.index("n_success") + 1], PROCESS_FAILED, *columns[columns.index("n_success") + 1 :]]
                if "n_success" in columns
                else [*columns, PROCESS_FAILED]
            )
            rows = [{c: r[c] for c in order} for r in rows]
        table = pl.DataFrame(rows) if rows else None
        sections.append(Section("Reliability", [f"- {line.strip()}" for line in reliability_lines(story)], table))
    if baseline is not None:
        sections.extend(_baseline_sections(story, baseline))
    return sections


def _attempt_sections(attempt: Attempt, threshold: int) -> list[Section]:
    head = f"Attempt {fmt(attempt.attempt)}: {attempt.trace_id}"
    lines = [
        f"- harness status {fmt(attempt.harness_status)}"
        + (f": {attempt.harness_error}" if attempt.harness_error else ""),
        *(f"- {line.strip()}" for line in verdict_line(attempt)),
    ]
    if attempt.answer_text is not None:
        lines.append(f"- answer: {attempt.answer_text}")
    stages = attempt.stages.clone()
    stages.drop_in_place("stage_order")  # on a copy: a drop would be a query
    sections = [Section(head, lines, stages)]
    rag = attempt.rag
    if rag is not None:
        r = rag.retrieval or {}
        sections.append(
            Section(
                "Retrieved documents",
                [
                    f"- queries: {' | '.join(rag.queries) or '–'}; relevant = qrels grade >= {threshold}",
                    *(
                        f"- missed relevant {m['doc_id']} (grade {m['grade']}): "
                        + (
                            f"in the candidates at {m['candidate_rank']}, not in the hits"
                            if m["candidate_rank"] is not None
                            else "never retrieved"
                        )
                        for m in rag.missed.rows(named=True)
                    ),
                ],
                rag.ranked,
                level=3,
            )
        )
        if r:
            sections.append(
                Section(
                    "Retrieval metrics",
                    [],
                    _dict_table(
                        r,
                        [
                            "recall_at_1",
                            "recall_at_3",
                            "recall_at_5",
                            "recall_at_10",
                            "recall_at_20",
                            "precision_at_1",
                            "precision_at_5",
                            "precision_at_10",
                            "mrr",
                            "first_hit_rank",
                            "ndcg_at_10",
                            "context_precision",
                            "judged_at_10",
                            "n_relevant",
                            "rounds",
                            "evidence_round",
                            "failure_class",
                            "retrieval_reason",
                        ],
                    ),
                    level=3,
                )
            )
        c = rag.context_scores or {}
        sections.append(
            Section(
                "Context",
                [
                    f"- context recall {fmt(c.get('context_recall'))}, precision "
                    f"{fmt(c.get('context_precision'))}, {fmt(c.get('context_tokens'))} tokens"
                ],
                rag.context,
                level=3,
            )
        )
        g = rag.grounding or {}
        sections.append(
            Section(
                "Claims",
                [
                    f"- grounding rate {fmt(g.get('grounding_rate'))}: {fmt(g.get('n_supported'))} of "
                    f"{fmt(g.get('n_claims'))} supported (judge {fmt(g.get('judge_version'))})"
                ],
                rag.claims,
                level=3,
            )
        )
        cs = rag.citations or {}
        sections.append(
            Section(
                "Citations",
                [
                    f"- precision {fmt(cs.get('citation_precision'))}, recall "
                    f"{fmt(cs.get('citation_recall'))}, resolved {fmt(cs.get('citation_resolution_rate'))}, "
                    f"dead {fmt(cs.get('dead_citation_ids'))}"
                ],
                rag.logged_citations if rag.logged_citations.height else None,
                level=3,
            )
        )
        sections.append(
            Section(
                "Answer checks",
                [],
                _dict_table(
                    rag.answer,
                    [
                        "contains_all",
                        "missing_expected",
                        "exact_match",
                        "token_f1",
                        "refused",
                        "expect_refusal",
                        "answer_correct",
                        "answer_reason",
                    ],
                ),
                level=3,
            )
        )
    agent = attempt.agent
    if agent is not None:
        t = agent.tools or {}
        sections.append(
            Section(
                "Tool calls",
                [
                    f"- path {fmt(t.get('matched_path'))}: F1 {fmt(t.get('tool_call_f1'))}, args valid "
                    f"{fmt(t.get('args_valid_rate'))}, order accuracy {fmt(t.get('strict_order_accuracy'))}",
                    *(
                        f"- step {r['step']} {r['tool']}: {r['status']} — {r['error']}"
                        for r in agent.step_errors.rows(named=True)
                    ),
                ],
                agent.calls,
                level=3,
            )
        )
        if agent.argument_diffs.height:
            sections.append(Section("Wrong arguments", [], agent.argument_diffs, level=3))
        o = agent.outcome or {}
        fault = (
            f"fault {o['fault_kind']} → {fmt(o.get('fault_outcome'))}" if o.get("fault_kind") else "no injected fault"
        )
        sections.append(
            Section(
                "Milestones and outcome",
                [
                    f"- success {fmt(o.get('success'))} (claimed {fmt(o.get('success_claimed'))}); {fault}; "
                    f"{fmt(o.get('n_steps'))} steps, {fmt(o.get('cost_usd'), 6)} USD"
                ],
                agent.milestones if agent.milestones.height else None,
                level=3,
            )
        )
    return sections


def _baseline_sections(story: CaseStory, baseline: CaseStory) -> list[Section]:
    if not baseline.known:
        return [Section(f"Against baseline {baseline.run_id}", ["- the case is not in that run"])]
    stages, metrics = side_by_side(story, baseline)
    names = {"baseline": f"baseline {baseline.run_id}", "candidate": f"this run {story.run_id}"}
    return [
        Section(
            f"Against baseline {baseline.run_id}",
            [f"- stage by stage, baseline {baseline.run_id} → {story.run_id}"],
            stages.rename(names),
        ),
        Section(
            "Metrics side by side",
            ["- changed metrics first; attempt – is the case's reliability"],
            metrics.sort(pl.col("changed").not_(), maintain_order=True).rename(names),
            level=3,
        ),
    ]


def _nav() -> str:
    links = " · ".join(f'<a href="{escape(href)}">{escape(label)}</a>' for label, href in REPORT_LINKS)
    return f'<nav class="reports">{links}</nav>'


def case_page_html(story: CaseStory, baseline_story: CaseStory | None = None) -> str:
    """The story as one self-contained HTML page, with links back to the run's lane and gate reports."""
    title = f"Case {story.case_id} — run {story.run_id}" + (f" (trace {story.focus})" if story.focus else "")
    page = render_html(title, case_sections(story, baseline_story))
    # render_html has no place for links (its lines are escaped text): the bar goes right after <body ...>
    opened = re.search(r"<body[^>]*>", page)
    cut = opened.end() if opened else 0
    return page[:cut] + _nav() + page[cut:]
