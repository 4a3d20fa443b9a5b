"""Counterfactual pairs (docs/evidence_use.md): did the decision change when its decision-bearing fact changed?"""

from __future__ import annotations

import polars as pl

from eval_pipeline.scoring.answer import squad_normalize

RESPONSIVE, IGNORED, BROKEN, INCOMPLETE = "responsive", "ignored", "broken", "incomplete"
EVIDENCE_USE = (RESPONSIVE, IGNORED, BROKEN, INCOMPLETE)

# What a case expects, compared between the two cases of a pair: a pair whose expectations are the same cannot tell
# an agent that read the changed fact from one that did not.
EXPECTATION_COLUMNS = (
    "reference_tool_calls",
    "alternatives",
    "milestones",
    "expected_answer_contains",
    "reference_answer",
    "expect_refusal",
)

COUNTERFACTUAL_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "case_id": pl.String,
    "original_case_id": pl.String,
    "changed_fact": pl.String,
    "lanes": pl.List(pl.String),
    "original_attempts": pl.Int64,
    "counterfactual_attempts": pl.Int64,
    "original_passed": pl.Boolean,
    "counterfactual_passed": pl.Boolean,
    "expectations_differ": pl.Boolean,
    "same_behaviour": pl.Boolean,
    "shared_behaviour": pl.String,
    "evidence_use": pl.String,
    "reason": pl.String,
}

_BEHAVIOUR_SEPARATOR = " → "
_LANE_SEPARATOR = "\u241f"


def attempt_behaviours(traces: pl.DataFrame) -> pl.DataFrame:
    """(case_id, attempt, trace_id, tool_path, answer): what an attempt did — its tool calls as canonical keys in order,
    and its answer normalized as exact match normalizes it (citation markers removed), "<refused>" for a flagged
    refusal."""
    calls = (
        traces.select("trace_id", "steps")
        .explode("steps")
        .unnest("steps")
        .filter(pl.col("kind") == "tool_call")
        .sort("trace_id", "index", maintain_order=True)
        .group_by("trace_id", maintain_order=True)
        .agg(
            (pl.col("tool") + "(" + pl.col("args_json").fill_null("{}") + ")")
            .str.join(_BEHAVIOUR_SEPARATOR)
            .alias("tool_path")
        )
    )
    answer = (
        pl.when(pl.col("answer_refused").fill_null(False))
        .then(pl.lit("<refused>"))
        .otherwise(squad_normalize(pl.col("answer_text").str.replace_all(r"\s*\[doc:[^\]]*\]", "")))
    )
    return (
        traces.select("trace_id", "case_id", "attempt", answer.alias("answer"))
        .join(calls, on="trace_id", how="left")
        .with_columns(pl.col("tool_path").fill_null(""))
    )


def _shown(behaviour: pl.Expr) -> pl.Expr:
    """A behaviour as the report shows it: the calls, then the answer when the RAG lane has one."""
    calls, answer = (
        behaviour.str.split_exact(_LANE_SEPARATOR, 1).struct[0],
        behaviour.str.split_exact(_LANE_SEPARATOR, 1).struct[1],
    )
    return (
        pl.when(calls != "").then(pl.format("calls {}", calls)).otherwise(pl.lit(""))
        + pl.when((calls != "") & (answer != "")).then(pl.lit("; ")).otherwise(pl.lit(""))
        + pl.when(answer != "").then(pl.format('answer "{}"', answer)).otherwise(pl.lit(""))
    )


def _complete_attempts(outcomes: pl.DataFrame, behaviours: pl.DataFrame) -> pl.DataFrame:
    """(case_id, trace_id, passed, tool_path, answer) of every attempt whose every lane is complete."""
    per_trace = outcomes.group_by("trace_id", "case_id").agg(
        (pl.col("outcome") == "incomplete").any().alias("_incomplete"),
        (pl.col("outcome") == "fail").any().alias("_failed"),
    )
    return (
        per_trace.filter(~pl.col("_incomplete"))
        .join(behaviours.select("trace_id", "tool_path", "answer"), on="trace_id", how="left")
        .select("case_id", "trace_id", (~pl.col("_failed")).alias("passed"), "tool_path", "answer")
    )


def _expectations(cases: pl.DataFrame) -> pl.DataFrame:
    """case_id → one string holding everything the case expects (see EXPECTATION_COLUMNS)."""
    present = [c for c in EXPECTATION_COLUMNS if c in cases.columns]
    return cases.select("case_id", pl.struct(present).struct.json_encode().alias("_expects"))


def counterfactual_pairs(
    cases: pl.DataFrame, traces: pl.DataFrame, outcomes: pl.DataFrame, run_id: str
) -> pl.DataFrame:
    """One row per counterfactual case of the dataset: `evidence_use` responsive (both cases pass), ignored (an attempt
    of each did exactly the same although their expectations differ), broken (otherwise, one fails), incomplete (a
    case without a complete attempt, or a pair that cannot be evaluated)."""
    if "counterfactual_of" not in cases.columns:
        return pl.DataFrame(schema=COUNTERFACTUAL_SCHEMA)
    pairs = cases.filter(pl.col("counterfactual_of").is_not_null()).select(
        "case_id", pl.col("counterfactual_of").alias("original_case_id"), "changed_fact", "lanes"
    )
    if pairs.height == 0:
        return pl.DataFrame(schema=COUNTERFACTUAL_SCHEMA)
    complete = _complete_attempts(outcomes, attempt_behaviours(traces)).join(
        cases.select("case_id", "lanes"), on="case_id", how="left"
    )
    # a lane's behaviour is what it is scored on: the agent lane's calls, the RAG lane's answer
    tool_path = pl.when(pl.col("lanes").list.contains("agent")).then(pl.col("tool_path")).otherwise(pl.lit(""))
    answer = pl.when(pl.col("lanes").list.contains("rag")).then(pl.col("answer").fill_null("")).otherwise(pl.lit(""))
    per_case = complete.group_by("case_id").agg(
        pl.len().alias("attempts"),
        pl.col("passed").all().alias("passed"),
        pl.concat_str(tool_path, pl.lit(_LANE_SEPARATOR), answer).unique().sort().alias("behaviours"),
    )
    expects = _expectations(cases)
    known = cases.select("case_id", pl.col("lanes").alias("_original_lanes"))
    frame = (
        pairs.join(known, left_on="original_case_id", right_on="case_id", how="left", maintain_order="left")
        .join(
            per_case.rename(
                {"attempts": "counterfactual_attempts", "passed": "counterfactual_passed", "behaviours": "_cf"}
            ),
            on="case_id",
            how="left",
            maintain_order="left",
        )
        .join(
            per_case.rename(
                {
                    "case_id": "original_case_id",
                    "attempts": "original_attempts",
                    "passed": "original_passed",
                    "behaviours": "_orig",
                }
            ),
            on="original_case_id",
            how="left",
            maintain_order="left",
        )
        .join(expects.rename({"_expects": "_cf_expects"}), on="case_id", how="left", maintain_order="left")
        .join(
            expects.rename({"case_id": "original_case_id", "_expects": "_orig_expects"}),
            on="original_case_id",
            how="left",
            maintain_order="left",
        )
        .with_columns(
            pl.col("counterfactual_attempts").fill_null(0),
            pl.col("original_attempts").fill_null(0),
            (pl.col("_cf_expects") != pl.col("_orig_expects")).alias("expectations_differ"),
            pl.col("_cf").list.set_intersection(pl.col("_orig")).alias("_shared"),
        )
        .with_columns(
            (pl.col("_shared").list.len() > 0).alias("same_behaviour"),
            pl.when(pl.col("_shared").list.len() > 0)
            .then(_shown(pl.col("_shared").list.first()))
            .alias("shared_behaviour"),
        )
    )
    missing = pl.col("_original_lanes").is_null()
    lanes_differ = pl.col("_original_lanes").list.sort() != pl.col("lanes").list.sort()
    undecided = (pl.col("original_attempts") == 0) | (pl.col("counterfactual_attempts") == 0)
    evidence_use = (
        pl.when(missing | lanes_differ | ~pl.col("expectations_differ").fill_null(False) | undecided)
        .then(pl.lit(INCOMPLETE))
        .when(pl.col("original_passed") & pl.col("counterfactual_passed"))
        .then(pl.lit(RESPONSIVE))
        .when(pl.col("same_behaviour"))
        .then(pl.lit(IGNORED))
        .otherwise(pl.lit(BROKEN))
    )
    reason = (
        pl.when(missing)
        .then(pl.format("original case {} is not in the dataset", "original_case_id"))
        .when(lanes_differ)
        .then(pl.lit("the two cases of the pair have different lanes"))
        .when(~pl.col("expectations_differ"))
        .then(
            pl.lit(
                "the two cases expect the same (reference calls, milestones, answer): "
                "the pair cannot show whether the fact was used"
            )
        )
        .when(pl.col("original_attempts") == 0)
        .then(pl.format("no complete attempt of the original {}", "original_case_id"))
        .when(pl.col("counterfactual_attempts") == 0)
        .then(pl.format("no complete attempt of the counterfactual {}", "case_id"))
        .when(pl.col("original_passed") & pl.col("counterfactual_passed"))
        .then(pl.lit(None, dtype=pl.String))
        .when(pl.col("same_behaviour"))
        .then(pl.format("did the same with and without the changed fact ({}): {}", "changed_fact", "shared_behaviour"))
        .otherwise(
            pl.format(
                "behaved differently, but {}",
                pl.when(~pl.col("original_passed").fill_null(True) & ~pl.col("counterfactual_passed").fill_null(True))
                .then(pl.lit("both cases fail"))
                .when(~pl.col("counterfactual_passed").fill_null(True))
                .then(pl.lit("the counterfactual fails"))
                .otherwise(pl.lit("the original fails")),
            )
        )
    )
    decided = ~(missing | lanes_differ | undecided)
    return (
        frame.select(
            pl.lit(run_id, dtype=pl.String).alias("run_id"),
            "case_id",
            "original_case_id",
            "changed_fact",
            "lanes",
            "original_attempts",
            "counterfactual_attempts",
            pl.when(pl.col("original_attempts") > 0).then(pl.col("original_passed")).alias("original_passed"),
            pl.when(pl.col("counterfactual_attempts") > 0)
            .then(pl.col("counterfactual_passed"))
            .alias("counterfactual_passed"),
            pl.col("expectations_differ").fill_null(False),
            pl.when(decided).then(pl.col("same_behaviour")).alias("same_behaviour"),
            pl.when(decided).then(pl.col("shared_behaviour")).alias("shared_behaviour"),
            evidence_use.alias("evidence_use"),
            reason.alias("reason"),
        )
        .cast(COUNTERFACTUAL_SCHEMA)
        .sort("case_id")
    )


def evidence_use_counts(pairs: pl.DataFrame) -> dict[str, int]:
    """Pairs per evidence_use value, every value present."""
    counts = dict(pairs.group_by("evidence_use").len().iter_rows()) if pairs.height else {}
    return {value: int(counts.get(value, 0)) for value in EVIDENCE_USE}
