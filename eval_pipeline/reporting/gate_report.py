"""The release-gate report: each gate on its own, with the blocking cases and the owner."""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting.render import Section
from eval_pipeline.scoring.gates import exit_code, overall_status

EXIT_MEANING = {0: "every gate passed", 1: "a gate failed: the release is blocked", 2: "undecided: a gate is incomplete or incomparable"}


def gate_table(gate_results: pl.DataFrame) -> pl.DataFrame:
    """The gate table as printed: values in points, the blocking cases, owner and reason."""
    return gate_results.select(
        "gate", "lane", "metric", "status",
        (pl.col("baseline_value") * pl.when(pl.col("metric").is_in(["policy_violations", "no_new_failures"])).then(1).otherwise(100))
        .round(2).alias("baseline"),
        (pl.col("candidate_value") * pl.when(pl.col("metric").is_in(["policy_violations", "no_new_failures"])).then(1).otherwise(100))
        .round(2).alias("candidate"),
        pl.col("delta").round(2).alias("delta"),
        "threshold", "blocking_cases", "owner", "reason",
    )


def pairwise_section(pairs: pl.DataFrame) -> Section:
    """Candidate vs baseline answers judged in both orders: wins, losses, ties and position consistency."""
    complete = pairs.filter(pl.col("status") == "scored") if "status" in pairs.columns else pairs.head(0)
    if complete.height == 0:
        return Section("Pairwise answers (baseline vs candidate)", ["- no pair of complete answers to compare"])
    counts = dict(complete.group_by("outcome").len().iter_rows())
    consistent = complete["position_consistent"].cast(pl.Float64).mean()
    lines = [f"- {complete.height} answer pairs judged twice with positions swapped (a win counts only in both orders): "
             + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
             + f"; position consistency {consistent:.4f}; incomplete {pairs.height - complete.height}",
             "- reported beside the gates, never averaged into them"]
    changed = complete.filter(pl.col("outcome") != "tie").select("case_id", "attempt", "outcome", "order1_preference",
                                                                  "order2_preference").sort("case_id", "attempt")
    return Section("Pairwise answers (baseline vs candidate)", lines, changed)


def gate_sections(gate_results: pl.DataFrame, candidate: str, baseline: str | None,
                  pairs: pl.DataFrame | None = None) -> list[Section]:
    """Sections of the gate report."""
    code = exit_code(gate_results)
    lines = [
        f"- candidate `{candidate}` against baseline `{baseline or 'none'}`: **{overall_status(gate_results)}** "
        f"(exit code {code}: {EXIT_MEANING[code]})",
        "- each gate stands on its own; nothing is averaged. Regression metrics are in points (value × 100); "
        "a drop equal to the threshold passes.",
    ]
    blocking = (gate_results.filter(pl.col("status") == "fail").select("gate", "owner", pl.col("blocking_cases").alias("cases"))
                .explode("cases"))
    sections = [Section("Gates", lines, gate_table(gate_results))]
    sections.append(Section(f"Blocking cases ({blocking['cases'].n_unique() if blocking.height else 0})", [], blocking))
    beside = gate_results.filter(pl.col("beside").is_not_null()).select("gate", "beside")
    if beside.height:
        sections.append(Section("Reported beside the gates", [], beside, level=3))
    if pairs is not None:
        sections.append(pairwise_section(pairs))
    return sections


def gate_text_table(gate_results: pl.DataFrame) -> str:
    """A plain-text gate table for the terminal."""
    table = gate_table(gate_results)
    header = f"{'gate':<22} {'status':<13} {'baseline':>9} {'candidate':>9} {'delta':>8} {'limit':>6}  blocking cases / reason"
    lines = [header, "-" * len(header)]
    for row in table.iter_rows(named=True):
        def num(v):
            return f"{v:.2f}" if v is not None else "-"
        detail = ", ".join(row["blocking_cases"] or []) or (row["reason"] or "")
        lines.append(f"{row['gate']:<22} {row['status']:<13} {num(row['baseline']):>9} {num(row['candidate']):>9} "
                     f"{num(row['delta']):>8} {num(row['threshold']):>6}  {detail}")
    return "\n".join(lines)
