"""Evidence diversity in the RAG lane report: independent document families behind context, citations and claims.

What a family is and why it counts: docs/evidence_diversity.md.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.reporting import charts
from eval_pipeline.reporting.lane_data import LaneData, metric_table, scored_mean
from eval_pipeline.reporting.render import Section
from eval_pipeline.reporting.values import format_number

REDUNDANCY_BINS = ((0.0, "0"), (0.25, "≤ 0.25"), (0.5, "≤ 0.5"), (0.75, "≤ 0.75"), (1.0, "> 0.75"))


def _counts_by(frame: pl.DataFrame, column: str) -> tuple[list[str], list[float]]:
    """Labels and trace counts of each value of an integer column (nulls left out), in value order."""
    counts = frame.filter(pl.col(column).is_not_null()).group_by(column).len().sort(column)
    return [str(v) for v in counts[column].to_list()], [float(n) for n in counts["len"].to_list()]


def _scored(frame: pl.DataFrame | None, column: str) -> pl.DataFrame:
    if frame is None or column not in frame.columns:
        return pl.DataFrame({column: []}, schema={column: pl.Int64})
    return (
        frame.filter((pl.col("status") == "scored") & pl.col(column).is_not_null())
        if "status" in frame.columns
        else frame
    )


def evidence_diversity_sections(data: LaneData) -> list[Section]:
    """Independent document families behind the context, the citations and the supported claims
    (docs/evidence_diversity.md)."""
    t = data.tables
    context, citations, grounding = t.get("context_scores"), t.get("citation_scores"), t.get("grounding_scores")
    if context is None or "context_families" not in context.columns:
        return []
    spread = _scored(context, "context_families")
    one = spread.filter(pl.col("context_families") == 1).height
    lines = [
        f"- context families per trace: mean {format_number(scored_mean(context, 'context_families'), 2)} over "
        f"{spread.height} scored traces; {one} draw on a single family (ten chunks of one page are one source)",
        f"- redundant-chunk share (chunks of a family beyond its first / chunks): mean "
        f"{format_number(scored_mean(context, 'redundant_chunk_share'))}",
    ]
    cited = _scored(citations, "cited_families")
    if cited.height:
        lines.append(
            "- cited families per citing trace: mean "
            f"{format_number(scored_mean(citations, 'cited_families'), 2)} over "
            f"{cited.height} traces; {cited.filter(pl.col('cited_families') == 1).height} cite a single family"
        )
    claims = _scored(grounding, "n_triangulated")
    supported, triangulated = (
        int(claims["n_supported"].sum() or 0) if claims.height else 0,
        int(claims["n_triangulated"].sum() or 0),
    )
    if supported:
        lines.append(
            f"- supported claims triangulated (two or more independent families support them): {triangulated} of "
            f"{supported} ({format_number(triangulated / supported)})"
        )
    table = pl.concat(
        [
            metric_table(context, ["context_families", "context_sources", "redundant_chunk_share"]),
            metric_table(citations, ["cited_families", "cited_sources"]),
            metric_table(grounding, ["n_triangulated"]),
        ]
    )
    labels, values = _counts_by(spread, "context_families")
    sections = [
        Section("Evidence diversity", lines, table, charts.bar_chart("traces by context families", labels, values))
    ]
    shares = _scored(context, "redundant_chunk_share")
    if shares.height:
        share = pl.col("redundant_chunk_share")
        binned = shares.select(
            pl.coalesce([pl.when(share <= top).then(pl.lit(label)) for top, label in REDUNDANCY_BINS]).alias("bin")
        )
        counts = dict(binned.group_by("bin").len().iter_rows())
        sections.append(
            Section(
                "Redundant chunks",
                [],
                None,
                charts.bar_chart(
                    "traces by redundant-chunk share",
                    [label for _, label in REDUNDANCY_BINS],
                    [float(counts.get(label, 0)) for _, label in REDUNDANCY_BINS],
                ),
                level=3,
            )
        )
    if cited.height:
        labels, values = _counts_by(cited, "cited_families")
        sections.append(
            Section(
                "Cited families", [], None, charts.bar_chart("citing traces by cited families", labels, values), level=3
            )
        )
    if supported:
        sections.append(
            Section(
                "Triangulated claims",
                [],
                None,
                charts.bar_chart(
                    "supported claims by independent support",
                    ["triangulated (≥ 2 families)", "one family or fewer"],
                    [float(triangulated), float(supported - triangulated)],
                ),
                level=3,
            )
        )
    return sections
