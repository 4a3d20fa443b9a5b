"""Decision slices (docs/slices.md): which slices each case belongs to, and the lane rollups per slice.

A slice is a (dimension, value) pair: `criticality` (high | normal), `tags.<name>` (each tag of the case),
`corpus_family` (the family of each required document, or the doc id when the corpus has none for it) and, for
agent-lane cases, `tool_risk` (destructive > write > read_only over the tools of the reference path and the
alternatives). A case may be in several values of one dimension (two required families), or in none (no tags).
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from eval_pipeline.contracts.policy import TAG_DIMENSION_PREFIX
from eval_pipeline.scoring.attribution import rollup

MEMBERSHIP_SCHEMA: dict[str, pl.DataType] = {"case_id": pl.String, "dimension": pl.String, "value": pl.String}
# tool risk as a rank, so the riskiest tool of a case wins with a max
_RISK_RANK = {"read_only": 0, "write": 1, "destructive": 2}

SLICE_ROLLUP_SCHEMA: dict[str, pl.DataType] = {
    "lane": pl.String,
    "dimension": pl.String,
    "value": pl.String,
    "slice": pl.String,
    "n_cases": pl.Int64,
    "n_traces": pl.Int64,
    "traces_passed": pl.Int64,
    "traces_failed": pl.Int64,
    "traces_incomplete": pl.Int64,
    "traces_not_applicable": pl.Int64,
    "pass_rate": pl.Float64,
    "pass_at_1": pl.Float64,
    "pass_at_1_cases": pl.Int64,
    "failed_case_ids": pl.List(pl.String),
    "top_failing_stage": pl.String,
}
SLICE_ATTRIBUTION_SCHEMA: dict[str, pl.DataType] = {
    "lane": pl.String,
    "dimension": pl.String,
    "value": pl.String,
    "slice": pl.String,
    "stage": pl.String,
    "stage_order": pl.Int64,
    "failures": pl.Int64,
    "share": pl.Float64,
    "hazards": pl.Int64,
    "owner": pl.String,
}


def segment_key(segment: Mapping[str, str] | None) -> str | None:
    """The canonical text of a slice or segment: `dimension=value` pairs by dimension, joined by `, `; None for none."""
    return ", ".join(f"{key}={segment[key]}" for key in sorted(segment)) if segment else None


def _criticality(cases: pl.DataFrame) -> pl.DataFrame:
    if "criticality" not in cases.columns:
        return pl.DataFrame(schema=MEMBERSHIP_SCHEMA)
    return cases.select(
        "case_id", pl.lit("criticality").alias("dimension"), pl.col("criticality").fill_null("normal").alias("value")
    )


def _tags(cases: pl.DataFrame) -> pl.DataFrame:
    # a warehouse written before tags existed has no tags column: its cases are in no tag slice
    if "tags" not in cases.columns:
        return pl.DataFrame(schema=MEMBERSHIP_SCHEMA)
    tags = cases.select("case_id", "tags").explode("tags").drop_nulls("tags")
    return tags.select(
        "case_id",
        (pl.lit(TAG_DIMENSION_PREFIX) + pl.col("tags").struct.field("name")).alias("dimension"),
        pl.col("tags").struct.field("value").alias("value"),
    )


def _corpus_families(cases: pl.DataFrame, corpus: pl.DataFrame | None) -> pl.DataFrame:
    """Each required doc's family; a doc missing from the corpus, or without a family, stands for itself. Without a
    corpus no family is known and the dimension is left out (the agent lane reads no corpus: a corpus bump re-scores
    retrieval and what follows it, never the agent lane)."""
    if "required_doc_ids" not in cases.columns or corpus is None:
        return pl.DataFrame(schema=MEMBERSHIP_SCHEMA)
    docs = cases.select("case_id", pl.col("required_doc_ids").alias("doc_id")).explode("doc_id").drop_nulls("doc_id")
    families = (
        corpus.select("doc_id", "family").unique("doc_id", keep="first", maintain_order=True)
        if "family" in corpus.columns
        else pl.DataFrame(schema={"doc_id": pl.String, "family": pl.String})
    )
    family = pl.when(pl.col("family").str.len_chars() > 0).then(pl.col("family")).otherwise(pl.col("doc_id"))
    return (
        docs.join(families, on="doc_id", how="left", maintain_order="left")
        .select("case_id", pl.lit("corpus_family").alias("dimension"), family.alias("value"))
        .unique(["case_id", "value"], maintain_order=True)
    )


def _tool_risk(cases: pl.DataFrame, tools: pl.DataFrame | None) -> pl.DataFrame:
    """Agent-lane cases: the riskiest tool of the reference path and alternatives (else of allowed_tools)."""
    needed = {"lanes", "reference_tool_calls", "alternatives"}
    if not needed <= set(cases.columns):
        return pl.DataFrame(schema=MEMBERSHIP_SCHEMA)
    agent = cases.filter(pl.col("lanes").list.contains("agent"))
    reference = agent.select("case_id", pl.col("reference_tool_calls").alias("call")).explode("call")
    alternatives = agent.select("case_id", pl.col("alternatives").alias("call")).explode("call").explode("call")
    path = (
        pl.concat([reference, alternatives])
        .drop_nulls("call")
        .select("case_id", pl.col("call").struct.field("name").alias("tool"))
    )
    # a case with no call to match (goal_only with no reference) is judged by the tools it may use
    allowed = (
        (
            agent.join(path, on="case_id", how="anti")
            .select("case_id", pl.col("allowed_tools").alias("tool"))
            .explode("tool")
            .drop_nulls("tool")
        )
        if "allowed_tools" in agent.columns
        else path.head(0)
    )
    registry = (
        tools.select("name", "read_only", "destructive").unique("name", keep="first", maintain_order=True)
        if tools is not None and tools.height
        else pl.DataFrame(schema={"name": pl.String, "read_only": pl.Boolean, "destructive": pl.Boolean})
    )
    # a tool the registry does not list is not known to be read-only: it counts as a write
    rank = (
        pl.when(pl.col("destructive").fill_null(False))
        .then(pl.lit(_RISK_RANK["destructive"]))
        .when(pl.col("read_only").fill_null(False))
        .then(pl.lit(_RISK_RANK["read_only"]))
        .otherwise(pl.lit(_RISK_RANK["write"]))
    )
    ranked = (
        pl.concat([path, allowed])
        .join(registry, left_on="tool", right_on="name", how="left")
        .group_by("case_id")
        .agg(rank.max().alias("rank"))
    )
    names = {rank: name for name, rank in _RISK_RANK.items()}
    return (
        agent.select("case_id")
        .join(ranked, on="case_id", how="left", maintain_order="left")
        .select(
            "case_id",
            pl.lit("tool_risk").alias("dimension"),
            pl.col("rank")
            .fill_null(_RISK_RANK["read_only"])
            .replace_strict(names, return_dtype=pl.String)
            .alias("value"),
        )
    )


def dimension_rank() -> pl.Expr:
    """Order of dimensions in tables and reports: criticality, tool risk, tags, corpus family."""
    return (
        pl.when(pl.col("dimension") == "criticality")
        .then(0)
        .when(pl.col("dimension") == "tool_risk")
        .then(1)
        .when(pl.col("dimension").str.starts_with(TAG_DIMENSION_PREFIX))
        .then(2)
        .otherwise(3)
    )


def slice_membership(
    cases: pl.DataFrame, corpus: pl.DataFrame | None = None, tools: pl.DataFrame | None = None
) -> pl.DataFrame:
    """(case_id, dimension, value): every slice each case belongs to (cases, corpus and tools frames of the run)."""
    parts = [_criticality(cases), _tool_risk(cases, tools), _tags(cases), _corpus_families(cases, corpus)]
    frame = pl.concat([p.cast(MEMBERSHIP_SCHEMA) for p in parts], how="vertical").unique(maintain_order=True)
    return frame.sort(dimension_rank(), "dimension", "value", "case_id").select(list(MEMBERSHIP_SCHEMA))


def slice_cases(membership: pl.DataFrame, segment: Mapping[str, str]) -> list[str]:
    """The cases in every (dimension, value) of a segment, sorted."""
    wanted = pl.DataFrame(
        {"dimension": list(segment), "value": [segment[k] for k in segment]},
        schema={"dimension": pl.String, "value": pl.String},
    )
    hits = membership.join(wanted, on=["dimension", "value"], how="semi")
    inside = (
        hits.group_by("case_id")
        .agg(pl.col("dimension").n_unique().alias("held"))
        .filter(pl.col("held") == len(segment))
    )
    return sorted(inside["case_id"].to_list())


def slice_rollups(
    outcomes: pl.DataFrame, membership: pl.DataFrame, reliability: pl.DataFrame | None, lane: str
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(slice_rollup, slice_attribution_rollup) of one lane: per slice with traces in the lane, the counts, pass rate,
    pass@1 and failed cases, and the failures per first failing stage (attribution's rollup, per slice)."""
    lane_rows = outcomes.filter(pl.col("lane") == lane).join(membership, on="case_id", how="inner")
    if lane_rows.height == 0:
        return pl.DataFrame(schema=SLICE_ROLLUP_SCHEMA), pl.DataFrame(schema=SLICE_ATTRIBUTION_SCHEMA)
    # the lane's rollup per slice: the same counting and shares, grouped by (dimension, value)
    stages = rollup(lane_rows, lane, by=("dimension", "value")).with_columns(
        pl.format("{}={}", "dimension", "value").alias("slice")
    )
    attribution = stages.select(list(SLICE_ATTRIBUTION_SCHEMA)).sort(
        dimension_rank(), "dimension", "value", "stage_order"
    )
    top = (
        stages.filter(pl.col("failures") > 0)
        .sort("failures", "stage_order", descending=[True, False])
        .group_by("dimension", "value", maintain_order=True)
        .agg(pl.col("stage").first().alias("top_failing_stage"))
    )
    totals = stages.group_by("dimension", "value", maintain_order=True).agg(
        pl.col("lane_traces").first().alias("n_traces"),
        pl.col("lane_passed").first().alias("traces_passed"),
        pl.col("lane_failures").first().alias("traces_failed"),
        pl.col("lane_incomplete").first().alias("traces_incomplete"),
    )
    cases = lane_rows.group_by("dimension", "value").agg(
        pl.col("case_id").n_unique().cast(pl.Int64).alias("n_cases"),
        pl.col("case_id").filter(pl.col("outcome") == "fail").unique().sort().alias("failed_case_ids"),
    )
    per_case = (
        reliability.filter(pl.col("pass_at_1").is_not_null()).select("case_id", "pass_at_1")
        if reliability is not None and "pass_at_1" in reliability.columns
        else pl.DataFrame(schema={"case_id": pl.String, "pass_at_1": pl.Float64})
    )
    reliable = (
        membership.join(lane_rows.select("case_id").unique(), on="case_id", how="semi")
        .join(per_case, on="case_id")
        .group_by("dimension", "value")
        .agg(pl.col("pass_at_1").mean().alias("pass_at_1"), pl.len().cast(pl.Int64).alias("pass_at_1_cases"))
    )
    complete = pl.col("traces_passed") + pl.col("traces_failed")
    table = (
        totals.join(cases, on=["dimension", "value"], how="left")
        .join(reliable, on=["dimension", "value"], how="left")
        .join(top, on=["dimension", "value"], how="left")
        .with_columns(
            pl.lit(lane).alias("lane"),
            pl.format("{}={}", "dimension", "value").alias("slice"),
            (pl.col("n_traces") - complete - pl.col("traces_incomplete")).alias("traces_not_applicable"),
            pl.when(complete > 0).then(pl.col("traces_passed") / complete).alias("pass_rate"),
            pl.col("pass_at_1_cases").fill_null(0),
        )
        .sort(dimension_rank(), "dimension", "value")
    )
    return table.select(list(SLICE_ROLLUP_SCHEMA)).cast(SLICE_ROLLUP_SCHEMA), attribution.cast(SLICE_ATTRIBUTION_SCHEMA)
