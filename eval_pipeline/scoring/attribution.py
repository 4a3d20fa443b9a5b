"""Stage results, first-failing-stage attribution, rollups, the RAG contingency table and per-attempt success."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from eval_pipeline.scoring.common import LANE_STAGES

STAGE_OWNERS: dict[str, str] = {
    "retrieval": "retrieval (index, retriever, query rewriting)",
    "context_assembly": "context assembly (chunking, packing, truncation)",
    "grounding": "generation (prompt, model)",
    "citation": "generation (citation formatting, prompt)",
    "answer": "generation (model) or dataset (ground truth)",
    "policy": "agent policy and guardrails",
    "tool_selection": "agent planner (tool choice)",
    "tool_arguments": "agent tool calling (argument construction)",
    "tool_order": "agent planner (sequencing)",
    "loop": "agent planner (termination)",
    "recovery": "agent error handling",
    "outcome": "agent (task completion) or environment",
}
HARNESS_OWNER = "harness (evaluation infrastructure)"
UNSUPPORTED_CORRECT = "unsupported_correct"

STAGE_RESULTS_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "lane": pl.String,
    "stage": pl.String,
    "stage_order": pl.Int64,
    "status": pl.String,
    "reason": pl.String,
}

OUTCOME_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "lane": pl.String,
    "outcome": pl.String,
    "first_failing_stage": pl.String,
    "reason": pl.String,
    "owner": pl.String,
    "hazard": pl.String,
}


def stage_results(lane: str, tables: Sequence[pl.DataFrame]) -> pl.DataFrame:
    """Long (trace, lane, stage) rows from the `<stage>_stage` / `<stage>_reason` columns of a lane's tables."""
    order = {stage: i for i, stage in enumerate(LANE_STAGES[lane])}
    parts = []
    for table in tables:
        for stage in LANE_STAGES[lane]:
            if f"{stage}_stage" not in table.columns:
                continue
            reason = pl.col(f"{stage}_reason") if f"{stage}_reason" in table.columns else pl.lit(None, dtype=pl.String)
            parts.append(
                table.select(
                    pl.col("run_id").cast(pl.String),
                    pl.col("trace_id").cast(pl.String),
                    pl.col("case_id").cast(pl.String),
                    pl.col("attempt").cast(pl.Int64),
                    pl.lit(lane).alias("lane"),
                    pl.lit(stage).alias("stage"),
                    pl.lit(order[stage], dtype=pl.Int64).alias("stage_order"),
                    pl.col(f"{stage}_stage").cast(pl.String).alias("status"),
                    reason.cast(pl.String).alias("reason"),
                )
            )
    if not parts:
        return pl.DataFrame(schema=STAGE_RESULTS_SCHEMA)
    frame = pl.concat(parts, how="vertical")
    duplicated = frame.select("trace_id", "stage").is_duplicated().sum()
    if duplicated:
        raise ValueError(f"{duplicated} (trace, stage) rows of lane {lane} come from more than one table")
    return frame.sort("trace_id", "stage_order")


def lane_outcomes(stages: pl.DataFrame) -> pl.DataFrame:
    """One row per (trace, lane): pass, fail (first failing stage wins) or incomplete (a stage before any failure could
    not be scored).

    One group-by over the rows: the deciding stage is the fail or incomplete row of lowest stage order, picked by its
    position in the group, so a lane of 300k stage rows is decided in one pass rather than a sort and three joins.
    """
    if stages.height == 0:
        return pl.DataFrame(schema=OUTCOME_SCHEMA)
    keys = ["run_id", "trace_id", "case_id", "attempt", "lane"]
    deciding_row = pl.when(pl.col("status").is_in(["fail", "incomplete"])).then(pl.col("stage_order")).arg_min()

    def any_row(stage: str, status: str) -> pl.Expr:
        return ((pl.col("stage") == stage) & (pl.col("status") == status) & (pl.col("lane") == "rag")).any()

    out = stages.group_by(keys, maintain_order=True).agg(
        pl.col("status").get(deciding_row).alias("deciding_status"),
        pl.col("stage").get(deciding_row).alias("deciding_stage"),
        pl.col("reason").get(deciding_row).alias("reason"),
        (pl.col("status") != "not_applicable").any().alias("any_applicable"),
        (any_row("retrieval", "fail") & any_row("answer", "pass")).alias("unsupported_correct"),
    )
    return out.select(
        *keys,
        pl.when(pl.col("deciding_status") == "fail")
        .then(pl.lit("fail"))
        .when(pl.col("deciding_status") == "incomplete")
        .then(pl.lit("incomplete"))
        .when(pl.col("any_applicable"))
        .then(pl.lit("pass"))
        .otherwise(pl.lit("not_applicable"))
        .alias("outcome"),
        pl.when(pl.col("deciding_status") == "fail").then(pl.col("deciding_stage")).alias("first_failing_stage"),
        pl.when(pl.col("deciding_status") == "incomplete")
        .then(pl.format("{} incomplete: {}", pl.col("deciding_stage"), pl.col("reason").fill_null("no reason given")))
        .otherwise(pl.col("reason"))
        .alias("reason"),
        pl.when(pl.col("deciding_status") == "fail")
        .then(pl.col("deciding_stage").replace_strict(STAGE_OWNERS, default=None))
        .when(pl.col("deciding_status") == "incomplete")
        .then(pl.lit(HARNESS_OWNER))
        .alias("owner"),
        pl.when(pl.col("unsupported_correct")).then(pl.lit(UNSUPPORTED_CORRECT)).alias("hazard"),
    )


def attribution(outcomes: pl.DataFrame) -> pl.DataFrame:
    """Failed and incomplete (trace, lane) rows, each with its one first failing stage (null when incomplete) and
    owner."""
    return outcomes.filter(pl.col("outcome").is_in(["fail", "incomplete"])).sort(
        pl.col("hazard").is_null(), "lane", "first_failing_stage", "trace_id"
    )


def rollup(outcomes: pl.DataFrame, lane: str, by: Sequence[str] = ()) -> pl.DataFrame:
    """Failures per first failing stage of one lane, with share of the lane's failures and the lane totals beside;
    with `by` (e.g. a decision slice's dimension and value), the same per group of those columns."""
    keys = list(by)
    # one group for the whole lane: a constant key, dropped at the end
    group = keys or ["_lane_group"]
    lane_rows = outcomes.filter(pl.col("lane") == lane)
    if not keys:
        lane_rows = lane_rows.with_columns(pl.lit(0).alias("_lane_group"))
    outcome = pl.col("outcome")
    totals = lane_rows.group_by(group).agg(
        (outcome == "fail").sum().cast(pl.Int64).alias("lane_failures"),
        (outcome == "incomplete").sum().cast(pl.Int64).alias("lane_incomplete"),
        (outcome == "pass").sum().cast(pl.Int64).alias("lane_passed"),
        pl.len().cast(pl.Int64).alias("lane_traces"),
    )
    if not keys:
        # a lane without traces still lists every stage, with zero counts
        totals = (
            pl.DataFrame({"_lane_group": [0]}, schema={"_lane_group": pl.Int32})
            .join(totals.cast({"_lane_group": pl.Int32}), on="_lane_group", how="left")
            .fill_null(0)
        )
    counts = (
        lane_rows.filter(outcome == "fail")
        .group_by([*group, "first_failing_stage"])
        .agg(
            pl.len().cast(pl.Int64).alias("failures"),
            (pl.col("hazard") == UNSUPPORTED_CORRECT).sum().cast(pl.Int64).alias("hazards"),
        )
    )
    stages = pl.DataFrame(
        {"stage": list(LANE_STAGES[lane]), "stage_order": list(range(len(LANE_STAGES[lane])))},
        schema={"stage": pl.String, "stage_order": pl.Int64},
    )
    if not keys:
        counts = counts.cast({"_lane_group": pl.Int32})
    return (
        totals.join(stages, how="cross")
        .join(counts, left_on=[*group, "stage"], right_on=[*group, "first_failing_stage"], how="left")
        .with_columns(pl.col("failures").fill_null(0), pl.col("hazards").fill_null(0))
        .with_columns(
            pl.lit(lane).alias("lane"),
            pl.when(pl.col("lane_failures") > 0)
            .then(pl.col("failures") / pl.col("lane_failures"))
            .otherwise(pl.lit(None, dtype=pl.Float64))
            .alias("share"),
            pl.col("stage").replace_strict(STAGE_OWNERS, default=None).alias("owner"),
        )
        .sort(*keys, "stage_order")
        .select(
            *keys,
            "lane",
            "stage",
            "stage_order",
            "failures",
            "share",
            "hazards",
            "owner",
            "lane_failures",
            "lane_incomplete",
            "lane_passed",
            "lane_traces",
        )
    )


def pareto(rollup_frame: pl.DataFrame) -> pl.DataFrame:
    """Stages with failures, most first, with cumulative share."""
    return (
        rollup_frame.filter(pl.col("failures") > 0)
        .sort(["failures", "stage_order"], descending=[True, False])
        .with_columns(pl.col("share").cum_sum().alias("cumulative_share"))
    )


CONTINGENCY_DIAGNOSIS = {
    ("fail", "wrong"): "fix the retriever, the index or the query; do not touch the prompt",
    ("fail", "right"): "hazard: right without evidence (pretraining or a guess); fails when the policy changes",
    (
        "pass",
        "ungrounded",
    ): "the model invented something with the evidence in front of it: prompt, model or output format",
    (
        "pass",
        "grounded_wrong",
    ): "evidence used and still wrong: ambiguous case, wrong ground truth, or multi-document reasoning",
    ("pass", "right"): "healthy",
}


def contingency(stages: pl.DataFrame) -> pl.DataFrame:
    """RAG traces counted by retrieval (pass/fail/…) × grounded (yes/no/…) × answer (right/wrong/…), with the diagnosis
    of each cell."""
    rag = stages.filter(pl.col("lane") == "rag")
    if rag.height == 0:
        return pl.DataFrame(
            schema={
                "retrieval": pl.String,
                "grounded": pl.String,
                "answer": pl.String,
                "traces": pl.Int64,
                "diagnosis": pl.String,
            }
        )
    wide = rag.pivot(on="stage", index="trace_id", values="status", aggregate_function="first")
    for stage in ("retrieval", "grounding", "answer"):
        if stage not in wide.columns:
            wide = wide.with_columns(pl.lit("not_applicable").alias(stage))
    grounded = (
        pl.when(pl.col("grounding") == "pass")
        .then(pl.lit("yes"))
        .when(pl.col("grounding") == "fail")
        .then(pl.lit("no"))
        .otherwise(pl.col("grounding"))
    )
    answer = (
        pl.when(pl.col("answer") == "pass")
        .then(pl.lit("right"))
        .when(pl.col("answer") == "fail")
        .then(pl.lit("wrong"))
        .otherwise(pl.col("answer"))
    )
    table = (
        wide.select(
            pl.col("retrieval").fill_null("missing"),
            grounded.fill_null("missing").alias("grounded"),
            answer.fill_null("missing").alias("answer"),
        )
        .group_by("retrieval", "grounded", "answer")
        .agg(pl.len().cast(pl.Int64).alias("traces"))
    )
    diagnosis = (
        pl.when((pl.col("retrieval") == "fail") & (pl.col("answer") == "wrong"))
        .then(pl.lit(CONTINGENCY_DIAGNOSIS[("fail", "wrong")]))
        .when((pl.col("retrieval") == "fail") & (pl.col("answer") == "right"))
        .then(pl.lit(CONTINGENCY_DIAGNOSIS[("fail", "right")]))
        .when((pl.col("retrieval") != "fail") & (pl.col("grounded") == "no"))
        .then(pl.lit(CONTINGENCY_DIAGNOSIS[("pass", "ungrounded")]))
        .when((pl.col("retrieval") != "fail") & (pl.col("grounded") == "yes") & (pl.col("answer") == "wrong"))
        .then(pl.lit(CONTINGENCY_DIAGNOSIS[("pass", "grounded_wrong")]))
        .when((pl.col("retrieval") != "fail") & (pl.col("grounded") == "yes") & (pl.col("answer") == "right"))
        .then(pl.lit(CONTINGENCY_DIAGNOSIS[("pass", "right")]))
        .otherwise(pl.lit("incomplete or not applicable"))
    )
    hazard_first = (pl.col("retrieval") == "fail") & (pl.col("answer") == "right")
    return table.with_columns(diagnosis.alias("diagnosis")).sort(
        hazard_first, "retrieval", "grounded", "answer", descending=[True, False, False, False]
    )


def attempt_success(outcomes: pl.DataFrame, cases: pl.DataFrame, agent_success: pl.DataFrame | None) -> pl.DataFrame:
    """Per attempt: success for pass^k (agent cases: outcome_scores.success; RAG-only cases: the RAG lane passed); null
    when incomplete."""
    agent_cases = cases.filter(pl.col("lanes").list.contains("agent")).select("case_id")
    rag_only = cases.filter(~pl.col("lanes").list.contains("agent")).select("case_id")
    keys = ["run_id", "trace_id", "case_id", "attempt"]
    rag = (
        outcomes.filter(pl.col("lane") == "rag")
        .join(rag_only, on="case_id", how="semi")
        .select(
            *keys,
            pl.lit("rag").alias("lane"),
            pl.when(pl.col("outcome") == "incomplete")
            .then(None)
            .otherwise(pl.col("outcome") == "pass")
            .alias("success"),
        )
    )
    parts = [rag]
    if agent_success is not None:
        parts.append(
            agent_success.join(agent_cases, on="case_id", how="semi").select(
                *[pl.col(k) for k in keys], pl.lit("agent").alias("lane"), pl.col("success").cast(pl.Boolean)
            )
        )
    return pl.concat(parts, how="vertical_relaxed")
