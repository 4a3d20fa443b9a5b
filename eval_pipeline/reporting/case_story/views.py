"""What each lane saw and decided in one attempt (RagView, AgentView), built from the case's rows.

The RAG lane: ranked, missed and cited documents, the context and the claims; the agent lane: its calls against the
reference, wrong arguments, tool errors and milestones.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from eval_pipeline.reporting.case_story.arguments import call_argument_diffs, json_text, parse_json, value_at_path
from eval_pipeline.reporting.case_story.model import TEXT_PREVIEW, AgentView, RagView
from eval_pipeline.reporting.case_story.rows import CaseRows, by_trace, nulls_first, rows_frame
from eval_pipeline.reporting.case_story.tables import empty_frame


@dataclass
class RankedDocs:
    """A case's hits and candidates by trace, with their column types."""

    hits: dict[str, list[dict]]
    hit_schema: dict[str, pl.DataType]  # without trace_id
    candidates: dict[str, list[dict]]
    candidate_rank: pl.DataType

    @classmethod
    def of(cls, hits: pl.DataFrame, candidates: pl.DataFrame) -> RankedDocs:
        return cls(
            hits=by_trace(hits.to_dicts()),
            hit_schema={k: v for k, v in hits.schema.items() if k != "trace_id"},
            candidates=by_trace(candidates.to_dicts()),
            candidate_rank=candidates.schema["candidate_rank"],
        )


@dataclass
class Grades:
    """The case's qrels, one row per doc (the first), and the column types they came with."""

    rows: dict[str | None, dict]
    schema: dict[str, pl.DataType]

    @classmethod
    def of(cls, qrels: pl.DataFrame | None) -> Grades:
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


def rag_view(trace: dict, rows: CaseRows, grades: Grades, ranking: RankedDocs) -> RagView:
    """The RAG lane's view of one trace."""
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
    missed.sort(key=lambda m: nulls_first(m["doc_id"]))
    claims_frame = rows.tables.frame("claims")
    claims = rows.of_trace("claims", trace_id)
    if claims_frame is None:
        claims_view = pl.DataFrame()
    elif not claims:
        claims_view = claims_frame.clear()
    else:
        schema = rows.schema("claims")
        claims_view = rows_frame(
            [
                {shown: c[column] for shown, column in CLAIM_COLUMNS}
                for c in sorted(claims, key=lambda c: nulls_first(c["claim_index"]))
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
        ranked=rows_frame(
            ranked, {**ranking.hit_schema, "grade": pl.Int64, "relevant": pl.Boolean, "in_context": pl.Boolean}
        ),
        missed=rows_frame(missed, {**grades.schema, "candidate_rank": ranking.candidate_rank}),
        context=rows_frame(
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


def agent_view(trace: dict, rows: CaseRows, case: dict | None) -> AgentView:
    """The agent lane's view of one trace."""
    trace_id = trace["trace_id"]
    found = rows.of_trace("tool_call_diffs", trace_id)
    if found:
        schema = rows.schema("tool_call_diffs")
        calls = [
            {c: call[c] for c in CALL_COLUMNS} for call in sorted(found, key=lambda call: nulls_first(call["position"]))
        ]
        calls_view = rows_frame(calls, {c: schema[c] for c in CALL_COLUMNS})
    else:
        calls = []
        calls_view = empty_frame({"position": pl.Int64, **{c: pl.String for c in CALL_COLUMNS[1:]}})
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
    state = parse_json(trace.get("final_state_json"))
    milestones = [
        {
            "name": m.get("name"),
            "path": m.get("path"),
            "op": m.get("op"),
            "expected": expected.get(m.get("name"), {}).get("value_json"),
            "actual": json_text(value_at_path(state, m.get("path"))) if state is not None else None,
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
