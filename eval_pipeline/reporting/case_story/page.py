"""The story as one self-contained HTML page (report sections), with links back to the run's reports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from urllib.parse import quote

import polars as pl

from eval_pipeline.contracts.identifiers import bounded_file_name
from eval_pipeline.reporting.case_story.compare import side_by_side
from eval_pipeline.reporting.case_story.formatting import fmt
from eval_pipeline.reporting.case_story.model import (
    CASE_METRICS,
    AgentView,
    Attempt,
    CaseStory,
    RagView,
    pass_hat_columns,
)
from eval_pipeline.reporting.case_story.text import (
    attempt_lines,
    attempt_summary,
    case_lines,
    gate_lines,
    process_failures,
    reliability_lines,
    run_versions,
    verdict_line,
)
from eval_pipeline.reporting.render import Section, render_html
from eval_pipeline.reporting.values import MISSING

REPORT_LINKS = (
    ("RAG lane report", "../rag.html"),
    ("Agent lane report", "../agent.html"),
    ("Gate report", "../gate.html"),
)
PROCESS_FAILED = "failed_process_stage"


def case_page_name(case_id: str) -> str:
    """The file name of a case page: the case id, percent-encoded where it is not a plain name; cut with a hash suffix
    where that would pass the file-system limit of 255 bytes (render.href bounds its links the same way)."""
    return bounded_file_name(quote(case_id, safe="") + ".html")


def _field_table(row: dict | None, keys: Sequence[str]) -> pl.DataFrame | None:
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
                f"- run {story.run_id}" + (f": {run_versions(story.manifest)}" if story.manifest else ""),
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
        sections.append(Section("Other attempts", [f"- {attempt_summary(a)}" for a in others]))
    if story.reliability or story.quarantine or story.review is not None:
        sections.append(_reliability_section(story))
    if baseline is not None:
        sections.extend(_baseline_sections(story, baseline))
    return sections


def _reliability_section(story: CaseStory) -> Section:
    first = story.reliability[0] if story.reliability else {}
    columns = [c for c in ("lane", *CASE_METRICS, "n_incomplete") if c in first] + pass_hat_columns(first)
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
    return Section("Reliability", [f"- {line.strip()}" for line in reliability_lines(story)], table)


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
    if attempt.rag is not None:
        sections.extend(_rag_sections(attempt.rag, threshold))
    if attempt.agent is not None:
        sections.extend(_agent_sections(attempt.agent))
    return sections


RETRIEVAL_FIELDS = (
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
)
ANSWER_FIELDS = (
    "contains_all",
    "missing_expected",
    "exact_match",
    "token_f1",
    "refused",
    "expect_refusal",
    "answer_correct",
    "answer_reason",
)


def _rag_sections(rag: RagView, threshold: int) -> list[Section]:
    sections = []
    retrieval = rag.retrieval or {}
    sections.append(
        Section(
            "Retrieved documents",
            [
                f"- queries: {' | '.join(rag.queries) or MISSING}; relevant = qrels grade >= {threshold}",
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
    if retrieval:
        sections.append(Section("Retrieval metrics", [], _field_table(retrieval, RETRIEVAL_FIELDS), level=3))
    context = rag.context_scores or {}
    sections.append(
        Section(
            "Context",
            [
                f"- context recall {fmt(context.get('context_recall'))}, precision "
                f"{fmt(context.get('context_precision'))}, {fmt(context.get('context_tokens'))} tokens"
            ],
            rag.context,
            level=3,
        )
    )
    grounding = rag.grounding or {}
    sections.append(
        Section(
            "Claims",
            [
                f"- grounding rate {fmt(grounding.get('grounding_rate'))}: {fmt(grounding.get('n_supported'))} of "
                f"{fmt(grounding.get('n_claims'))} supported (judge {fmt(grounding.get('judge_version'))})"
            ],
            rag.claims,
            level=3,
        )
    )
    citations = rag.citations or {}
    sections.append(
        Section(
            "Citations",
            [
                f"- precision {fmt(citations.get('citation_precision'))}, recall "
                f"{fmt(citations.get('citation_recall'))}, resolved {fmt(citations.get('citation_resolution_rate'))}, "
                f"dead {fmt(citations.get('dead_citation_ids'))}"
            ],
            rag.logged_citations if rag.logged_citations.height else None,
            level=3,
        )
    )
    sections.append(Section("Answer checks", [], _field_table(rag.answer, ANSWER_FIELDS), level=3))
    return sections


def _agent_sections(agent: AgentView) -> list[Section]:
    sections = []
    tools = agent.tools or {}
    sections.append(
        Section(
            "Tool calls",
            [
                f"- path {fmt(tools.get('matched_path'))}: F1 {fmt(tools.get('tool_call_f1'))}, args valid "
                f"{fmt(tools.get('args_valid_rate'))}, order accuracy {fmt(tools.get('strict_order_accuracy'))}",
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
    outcome = agent.outcome or {}
    fault = (
        f"fault {outcome['fault_kind']} → {fmt(outcome.get('fault_outcome'))}"
        if outcome.get("fault_kind")
        else "no injected fault"
    )
    sections.append(
        Section(
            "Milestones and outcome",
            [
                f"- success {fmt(outcome.get('success'))} (claimed {fmt(outcome.get('success_claimed'))}); {fault}; "
                f"{fmt(outcome.get('n_steps'))} steps, {fmt(outcome.get('cost_usd'), 6)} USD"
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


def _report_links_html() -> str:
    links = " · ".join(f'<a href="{escape(href)}">{escape(label)}</a>' for label, href in REPORT_LINKS)
    return f'<nav class="reports">{links}</nav>'


def case_page_html(story: CaseStory, baseline_story: CaseStory | None = None) -> str:
    """The story as one self-contained HTML page, with links back to the run's lane and gate reports."""
    title = f"Case {story.case_id} — run {story.run_id}" + (f" (trace {story.focus})" if story.focus else "")
    page = render_html(title, case_sections(story, baseline_story))
    # render_html has no place for links (its lines are escaped text): the bar goes right after <body ...>
    opened = re.search(r"<body[^>]*>", page)
    cut = opened.end() if opened else 0
    return page[:cut] + _report_links_html() + page[cut:]
