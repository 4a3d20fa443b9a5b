"""The RAG lane report: its hazard, retrieval, context, grounding and judge calibration, citations and answers."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting import charts
from eval_pipeline.reporting.lane_baseline import baseline_sections
from eval_pipeline.reporting.lane_data import LINKS, LaneData, incomplete_lines, metric_table, scored_mean
from eval_pipeline.reporting.lane_evidence_diversity import evidence_diversity_sections
from eval_pipeline.reporting.lane_gates import failed_high_criticality_section, gated_section
from eval_pipeline.reporting.lane_sections import (
    failures_section,
    incomplete_section,
    pareto_sections,
    quarantine_section,
    rejects_sections,
    summary_section,
)
from eval_pipeline.reporting.lane_slices import slices_sections
from eval_pipeline.reporting.render import Section
from eval_pipeline.reporting.values import format_number
from eval_pipeline.scoring.attribution import UNSUPPORTED_CORRECT, contingency

RECALL_KS = (1, 3, 5, 10, 20)


def rag_sections(data: LaneData) -> list[Section]:
    """Sections of the RAG lane report."""
    t = data.tables
    sections = [
        failed_high_criticality_section(data),
        summary_section(data),
        *gated_section(data),
        hazard_section(data),
        *pareto_sections(data),
    ]
    sections.append(
        Section(
            "Retrieval × grounding × answer",
            ["- each cell is a diagnosis: the combination says which component to open first"],
            contingency(data.stage_results),
        )
    )

    retrieval = t.get("retrieval_scores")
    recall_curve = [scored_mean(retrieval, f"recall_at_{k}") for k in RECALL_KS]
    lines = [
        f"- mrr {format_number(scored_mean(retrieval, 'mrr'))}, "
        f"ndcg@10 {format_number(scored_mean(retrieval, 'ndcg_at_10'))}, "
        f"context precision {format_number(scored_mean(retrieval, 'context_precision'))}, "
        f"judged@10 {format_number(scored_mean(retrieval, 'judged_at_10'))}"
    ]
    if retrieval is not None and "qrels_version" in retrieval.columns and retrieval.height:
        lines.append(f"- qrels version `{retrieval['qrels_version'][0]}`")
    classes = (
        (
            retrieval.filter(pl.col("failure_class").is_not_null())
            .group_by("failure_class")
            .len()
            .sort(["len", "failure_class"], descending=[True, False])
            .rename({"len": "failed_traces"})
        )
        if retrieval is not None
        else None
    )
    sections.append(
        Section(
            "Retrieval", lines, classes, charts.line_chart("mean recall@k", [str(k) for k in RECALL_KS], recall_curve)
        )
    )
    sections.append(
        Section(
            "Retrieval metrics",
            [],
            metric_table(
                retrieval,
                [
                    *[f"recall_at_{k}" for k in RECALL_KS],
                    "precision_at_1",
                    "precision_at_5",
                    "precision_at_10",
                    "mrr",
                    "ndcg_at_3",
                    "ndcg_at_5",
                    "ndcg_at_10",
                    "context_precision",
                    "judged_at_10",
                ],
            ),
            level=3,
        )
    )
    sections.append(
        Section(
            "Context assembly",
            [],
            metric_table(t.get("context_scores"), ["context_recall", "context_precision", "context_tokens"]),
        )
    )
    sections.extend(grounding_sections(data))
    sections.append(
        Section(
            "Citations",
            incomplete_lines(t.get("citation_scores"), "citation"),
            metric_table(
                t.get("citation_scores"),
                ["citation_precision", "citation_recall", "citation_resolution_rate", "quotes_found_rate"],
            ),
        )
    )
    sections.extend(evidence_diversity_sections(data))
    sections.append(
        Section(
            "Answers", [], metric_table(t.get("answer_scores"), ["contains_all", "exact_match", "token_f1", "refused"])
        )
    )
    sections.extend([quarantine_section(data), failures_section(data), incomplete_section(data)])
    sections.extend(slices_sections(data))
    sections.extend(baseline_sections(data))
    sections.extend(rejects_sections(data))
    return sections


def hazard_section(data: LaneData) -> Section:
    hazards = (
        data.outcomes.filter(pl.col("hazard") == UNSUPPORTED_CORRECT)
        .sort("trace_id")
        .select("trace_id", "case_id", "reason")
    )
    lines = [
        "- retrieval failed but the answer is right: counted as a pass on a dashboard, a hazard here — it fails the "
        "day the policy changes. Review these first."
    ]
    return Section(f"Review first: {UNSUPPORTED_CORRECT} ({hazards.height})", lines, hazards, links=LINKS)


def grounding_sections(data: LaneData) -> list[Section]:
    grounding = data.tables.get("grounding_scores")
    calibration = data.tables.get("judge_calibration")
    review = data.tables.get("review_queue")
    lines = [
        f"- grounding rate {format_number(scored_mean(grounding, 'grounding_rate'))} "
        "(supported claims / claims, per trace)",
        *incomplete_lines(grounding, "grounding"),
    ]
    chart = None
    if calibration is not None and calibration.height:
        claim = calibration.filter(pl.col("level") == "claim") if "level" in calibration.columns else calibration
        if claim.height:
            row = claim.row(0, named=True)
            may_gate = bool(row.get("may_gate"))
            lines.append(
                f"- judge `{row.get('judge_version')}`: n {row.get('n')}, "
                f"agreement {format_number(row.get('agreement'))}, "
                f"Cohen's κ {format_number(row.get('cohen_kappa'))} (95% CI {format_number(row.get('kappa_ci_low'))}–"
                f"{format_number(row.get('kappa_ci_high'))}), "
                f"balanced accuracy {format_number(row.get('balanced_accuracy'))}, "
                f"may gate: {'yes' if may_gate else 'no'}"
            )
            if row.get("self_consistency_note"):
                lines.append(
                    f"- self-consistency: flip rate {format_number(row.get('self_consistency_flip_rate'))} "
                    f"({row.get('self_consistency_note')})"
                )
            if not may_gate:
                lines.append(
                    "- the judge is not calibrated: grounding does not gate; "
                    f"{review.height if review is not None else 0} trace(s) went to the review queue instead"
                )
            chart = charts.interval_chart(
                "judge calibration: Cohen's κ with 95% CI",
                row.get("cohen_kappa"),
                row.get("kappa_ci_low"),
                row.get("kappa_ci_high"),
                0.6,
            )
    sections = [
        Section("Grounding", lines, metric_table(grounding, ["grounding_rate", "n_claims", "n_supported"]), chart)
    ]
    if calibration is not None and calibration.height:
        columns = [
            c
            for c in (
                "level",
                "judge_version",
                "may_gate",
                "n",
                "agreement",
                "cohen_kappa",
                "kappa_ci_low",
                "kappa_ci_high",
                "balanced_accuracy",
                "self_consistency_flip_rate",
                "confusion",
            )
            if c in calibration.columns
        ]
        lines = (
            ["- confusion: rows are the human labels, columns the judge's verdicts"] if "confusion" in columns else []
        )
        sections.append(Section("Judge calibration", lines, calibration.select(columns), level=3))
    if review is not None and review.height:
        sections.append(Section(f"Review queue ({review.height})", [], review, level=3, links=LINKS))
    return sections
