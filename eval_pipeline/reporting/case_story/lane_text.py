"""The lanes' evidence of one attempt as terminal lines: retrieval, context, claims and answer; calls and outcome."""

from __future__ import annotations

from eval_pipeline.reporting.case_story.arguments import json_text
from eval_pipeline.reporting.case_story.formatting import fmt, short_text
from eval_pipeline.reporting.case_story.model import AgentView, RagView


def rag_lines(view: RagView, threshold: int) -> list[str]:
    """What the RAG lane retrieved, missed, put in the context, claimed, cited and answered."""
    out = []
    retrieval = view.retrieval or {}
    if view.queries:
        out.append(
            "queries: "
            + " | ".join(json_text(q) for q in view.queries)
            + (f" (variants {fmt(retrieval.get('variants'))})" if retrieval.get("variants") else "")
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
    if retrieval:
        out.append(
            "  "
            + ", ".join(
                f"{k} {fmt(retrieval.get(k))}"
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
            f"  first hit rank {fmt(retrieval.get('first_hit_rank'))}, relevant {fmt(retrieval.get('n_relevant'))}, "
            f"rounds {fmt(retrieval.get('rounds'))}, evidence round {fmt(retrieval.get('evidence_round'))}, "
            f"failure class {fmt(retrieval.get('failure_class'))}"
        )
    context = view.context_scores or {}
    out.append(
        f"context ({view.context.height} chunks, {fmt(context.get('context_tokens'))} tokens; context recall "
        f"{fmt(context.get('context_recall'))}, precision {fmt(context.get('context_precision'))}):"
    )
    for row in view.context.rows(named=True):
        out.append(
            f"  [{row['chunk']}] {row['doc_id']}{' (relevant)' if row['relevant'] else ''}, "
            f"{fmt(row['tokens'])} tokens: {json_text(row['text'])}"
        )
    grounding = view.grounding or {}
    out.append(
        f"claims (grounding rate {fmt(grounding.get('grounding_rate'))}; {fmt(grounding.get('n_supported'))} of "
        f"{fmt(grounding.get('n_claims'))} supported, judge {fmt(grounding.get('judge_version'))}):"
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
    citations = view.citations or {}
    if citations:
        out.append(
            f"citations: precision {fmt(citations.get('citation_precision'))}, "
            f"recall {fmt(citations.get('citation_recall'))}, "
            f"resolved {fmt(citations.get('citation_resolution_rate'))}, "
            f"quotes found {fmt(citations.get('quotes_found_rate'))}, "
            f"dead {fmt(citations.get('dead_citation_ids'))}"
        )
    for row in view.logged_citations.rows(named=True):
        out.append(f"  logged citation {row['doc_id']}: {json_text(row['quote'])}")
    answer = view.answer or {}
    if answer:
        out.append(
            f"answer checks: contains_all {fmt(answer.get('contains_all'))} "
            f"(missing {fmt(answer.get('missing_expected'))}), "
            f"exact match {fmt(answer.get('exact_match'))}, token F1 {fmt(answer.get('token_f1'))}, "
            f"refused {fmt(answer.get('refused'))} (refusal expected {fmt(answer.get('expect_refusal'))}), "
            f"correct {fmt(answer.get('answer_correct'))}"
        )
    return out


def agent_lines(view: AgentView) -> list[str]:
    """The agent lane's calls against the reference, wrong arguments, tool errors, milestones and outcome."""
    out = []
    tools = view.tools or {}
    if tools:
        out.append(
            f"tool calls (path {fmt(tools.get('matched_path'))}, match {fmt(tools.get('tool_match'))}): "
            f"F1 {fmt(tools.get('tool_call_f1'))}, precision {fmt(tools.get('tool_call_precision'))}, "
            f"recall {fmt(tools.get('tool_call_recall'))}, args valid {fmt(tools.get('args_valid_rate'))}, "
            f"order accuracy {fmt(tools.get('strict_order_accuracy'))}, "
            f"unnecessary {fmt(tools.get('unnecessary_call_rate'))}"
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
            f"  step {row['step']} {row['tool']}: {row['status']} — {short_text(row['error'], 300)}"
            for row in view.step_errors.rows(named=True)
        )
    for label, key in (
        ("invalid calls", "invalid_calls"),
        ("order violations", "order_violations"),
        ("loop", "loop_calls"),
        ("policy violations", "policy_violations"),
        ("unsafe actions", "unsafe_actions"),
    ):
        if tools.get(key):
            out.append(f"{label}: {'; '.join(tools[key])}")
    if tools.get("adapter_divergence"):
        out.append(f"adapter divergence: {tools['adapter_divergence']}")
    if view.milestones.height:
        out.append("milestones:")
        for row in view.milestones.rows(named=True):
            mark = "✔ passed" if row["passed"] else "✘ failed"
            out.append(
                f"  {row['name']}: {mark} — {row['path']} {row['op']} {fmt(row['expected'])}"
                + (f" (final state: {row['actual']})" if row["actual"] is not None else "")
            )
    outcome = view.outcome or {}
    if outcome:
        fault = (
            f", fault {outcome.get('fault_kind')} → {fmt(outcome.get('fault_outcome'))} "
            f"(call {fmt(tools.get('fault_call_index'))}, "
            f"escalated after it {fmt(tools.get('escalated_after_fault'))})"
            if outcome.get("fault_kind")
            else ", no injected fault"
        )
        out.append(
            f"outcome: success {fmt(outcome.get('success'))} (claimed {fmt(outcome.get('success_claimed'))}){fault}; "
            f"{fmt(outcome.get('n_steps'))} steps, {fmt(outcome.get('cost_usd'), 6)} USD"
        )
    return out
