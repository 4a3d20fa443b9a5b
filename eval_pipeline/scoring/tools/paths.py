"""Calls matched to the permitted paths: each case's path calls, which call fills which path call, the best path."""

from __future__ import annotations

import operator
from functools import reduce

import polars as pl

from eval_pipeline.contracts.frames import parse_json
from eval_pipeline.scoring.tools.frames import STR_LIST, T, call_key_expr
from eval_pipeline.scoring.values import call_matches, resolve_rules


def _paths(cases: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Permitted paths per case (0 = reference, i = alternative i) and their calls with positions and keys."""
    ref = cases.select(
        "case_id", pl.lit(0, dtype=pl.Int64).alias("path_idx"), pl.col("reference_tool_calls").alias("path")
    )
    alts = (
        cases.select("case_id", "alternatives")
        .explode("alternatives", keep_nulls=False)
        .with_columns(path_idx=pl.int_range(1, pl.len() + 1, dtype=pl.Int64).over("case_id"))
        .select("case_id", "path_idx", pl.col("alternatives").alias("path"))
    )
    paths = pl.concat([ref, alts]).with_columns(
        n_ref=pl.col("path").list.len().cast(pl.Int64).fill_null(0),
        matched_path=pl.when(pl.col("path_idx") == 0)
        .then(pl.lit("reference"))
        .otherwise(pl.format("alternative:{}", pl.col("path_idx"))),
    )
    path_calls = (
        paths.select("case_id", "path_idx", "path")
        .explode("path", keep_nulls=False)
        .with_columns(ref_pos=pl.int_range(pl.len(), dtype=pl.Int64).over("case_id", "path_idx"))
        .unnest("path")
        .rename({"name": "ref_tool", "args_json": "ref_args_json"})
        .with_columns(
            ref_key=call_key_expr("ref_tool", "ref_args_json"),
            optional=pl.col("optional").fill_null(pl.lit([], dtype=STR_LIST)),
        )
        # path calls that state the same call are interchangeable: one class, named by the first of them
        .with_columns(
            cls=pl.col("ref_pos")
            .min()
            .over(
                "case_id",
                "path_idx",
                "ref_tool",
                "ref_args_json",
                pl.col("accepted_json").fill_null(""),
                pl.col("optional").list.join("\x1f"),
            )
        )
    )
    return paths.drop("path"), path_calls


def _match_flags(pairs: pl.DataFrame) -> pl.Series:
    """Whether each (call, path call) pair of one tool matches: canonical keys under exact rules (columnar), else the
    value rules, once per distinct combination."""
    rule_keys = ["tool", "case_rules_json", "tool_rules_json"]
    rule_sets = pairs.select(rule_keys).unique()
    plain = rule_sets.with_columns(
        plain=pl.Series([resolve_rules(c, t, tool).plain for tool, c, t in rule_sets.iter_rows()], dtype=pl.Boolean)
    )
    # the flags line up with the rows of `pairs`, so every join keeps the left order
    pairs = pairs.join(plain, on=rule_keys, how="left", nulls_equal=True, maintain_order="left").with_columns(
        plain=pl.col("plain") & pl.col("accepted_json").is_null()
    )
    keys = ["tool", "args_json", "ref_args_json", "accepted_json", "optional", "case_rules_json", "tool_rules_json"]
    combos = pairs.filter(~pl.col("plain")).select(keys).unique()
    same = pl.col("args_json") == pl.col("ref_args_json")
    if combos.is_empty():
        return pairs.select(same.alias("match")).to_series()
    verdicts = [
        call_matches(
            parse_json(args_json),
            parse_json(ref_args_json),
            parse_json(accepted_json) if accepted_json else None,
            optional,
            resolve_rules(case_rules, tool_rules, tool),
        )
        for tool, args_json, ref_args_json, accepted_json, optional, case_rules, tool_rules in combos.iter_rows()
    ]
    flags = combos.with_columns(ruled=pl.Series(verdicts, dtype=pl.Boolean))
    return (
        pairs.join(flags, on=keys, how="left", nulls_equal=True, maintain_order="left")
        .select(pl.when(pl.col("plain")).then(same).otherwise(pl.col("ruled")).alias("match"))
        .to_series()
    )


def _max_matching(edges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """A maximum matching of calls to path calls (Kuhn's augmenting paths; calls in order, path calls in order)."""
    options: dict[int, list[int]] = {}
    for pos, ref_pos in sorted(edges):
        options.setdefault(pos, []).append(ref_pos)
    owner: dict[int, int] = {}

    def place(pos: int, seen: set[int]) -> bool:
        for ref_pos in options[pos]:
            if ref_pos in seen:
                continue
            seen.add(ref_pos)
            if ref_pos not in owner or place(owner[ref_pos], seen):
                owner[ref_pos] = pos
                return True
        return False

    for pos in options:
        place(pos, set())
    return sorted((pos, ref_pos) for ref_pos, pos in owner.items())


def _occurrence(frame: pl.DataFrame, by: list[str], order: str) -> pl.DataFrame:
    """The frame with `occ`: the 1-based rank of each row's `order` value within its `by` group (values distinct
    there)."""
    # Sorted once, groups are runs: a rank is the distance to the run's first row (a windowed rank per group is slower).
    frame = frame.sort(*by, order)
    starts = reduce(operator.or_, [pl.col(c).ne_missing(pl.col(c).shift()) for c in by])
    row = pl.int_range(pl.len(), dtype=pl.Int64)
    return frame.with_columns(occ=row - pl.when(starts).then(row).forward_fill() + 1)


def _assignment(pairs: pl.DataFrame, path_calls: pl.DataFrame) -> pl.DataFrame:
    """(T, path_idx, pos, ref_pos): which path call each call is matched to, per permitted path.

    The k-th call of a class of interchangeable path calls goes to the k-th path call of that class; a trace whose
    call matches path calls of two classes is matched by maximum matching instead."""
    classes = pairs.select(T, "path_idx", "pos", "cls").unique()
    ambiguous = (
        classes.group_by(T, "path_idx", "pos").agg(n=pl.len()).filter(pl.col("n") > 1).select(T, "path_idx").unique()
    )
    plain = _occurrence(classes.join(ambiguous, on=[T, "path_idx"], how="anti"), [T, "path_idx", "cls"], "pos")
    slots = _occurrence(
        path_calls.select("case_id", "path_idx", "cls", "ref_pos"), ["case_id", "path_idx", "cls"], "ref_pos"
    )
    aligned = (
        plain.join(pairs.select(T, "case_id").unique(), on=T)
        .join(slots, on=["case_id", "path_idx", "cls", "occ"])
        .select(T, "path_idx", "pos", "ref_pos")
    )
    rows: list[tuple[int, int, int, int]] = []
    hard = pairs.join(ambiguous, on=[T, "path_idx"]).sort(T, "path_idx", "pos", "ref_pos")
    for (t, path_idx), group in hard.group_by([T, "path_idx"], maintain_order=True):
        edges = list(zip(group["pos"].to_list(), group["ref_pos"].to_list(), strict=True))
        rows += [(t, path_idx, pos, ref_pos) for pos, ref_pos in _max_matching(edges)]
    matched = pl.DataFrame(
        rows, schema={T: aligned.schema[T], "path_idx": pl.Int64, "pos": pl.Int64, "ref_pos": pl.Int64}, orient="row"
    )
    return pl.concat([aligned, matched])


def match_paths(base: pl.DataFrame, calls: pl.DataFrame, cases: pl.DataFrame) -> tuple[pl.DataFrame, ...]:
    """(calls with ref_pos and args_match, ref_t: the matched path's calls per trace with matched_pos, best: the
    matched path and its scores)."""
    paths, path_calls = _paths(cases.filter(pl.col("case_id").is_in(base["case_id"].unique().implode())))
    n_calls = (
        base.select(T, "case_id")
        .join(calls.group_by(T).agg(n_calls=pl.len().cast(pl.Int64)), on=T, how="left")
        .with_columns(pl.col("n_calls").fill_null(0))
    )
    pairs = calls.select(T, "case_id", "pos", "tool", "args_json", "case_rules_json", "tool_rules_json").join(
        path_calls.select(
            "case_id", "path_idx", "ref_pos", "cls", "ref_tool", "ref_args_json", "accepted_json", "optional"
        ),
        left_on=["case_id", "tool"],
        right_on=["case_id", "ref_tool"],
    )
    if pairs.height:
        pairs = pairs.filter(_match_flags(pairs))
    assignment = _assignment(pairs, path_calls)
    overlap = assignment.group_by(T, "path_idx").agg(matched=pl.len().cast(pl.Int64))
    total = pl.col("n_calls") + pl.col("n_ref")
    candidates = (
        n_calls.join(paths, on="case_id", how="left")
        .join(overlap, on=[T, "path_idx"], how="left")
        .with_columns(matched=pl.col("matched").fill_null(0))
        .with_columns(
            tool_call_precision=pl.when(pl.col("n_calls") > 0).then(pl.col("matched") / pl.col("n_calls")),
            tool_call_recall=pl.when(pl.col("n_ref") > 0).then(pl.col("matched") / pl.col("n_ref")),
            tool_call_f1=pl.when(total > 0).then(2 * pl.col("matched") / total),
        )
    )
    best = candidates.sort(
        [T, pl.col("tool_call_f1").fill_null(1.0), "path_idx"], descending=[False, True, False]
    ).unique(T, keep="first", maintain_order=True)
    chosen = best.select(T, "path_idx")
    used = assignment.join(chosen, on=[T, "path_idx"]).drop("path_idx")
    ref_t = (
        best.select(T, "case_id", "path_idx")
        .join(path_calls, on=["case_id", "path_idx"])
        .join(used.rename({"pos": "matched_pos"}), on=[T, "ref_pos"], how="left")
        .sort(T, "ref_pos")
    )
    best_pairs = pairs.join(chosen, on=[T, "path_idx"])
    matching_args = best_pairs.select(T, "pos").unique().with_columns(args_match=pl.lit(True))
    same_position = best_pairs.filter(pl.col("pos") == pl.col("ref_pos")).group_by(T).agg(same=pl.len())
    calls = (
        calls.join(used, on=[T, "pos"], how="left")
        .join(matching_args, on=[T, "pos"], how="left")
        .with_columns(pl.col("args_match").fill_null(False))
        .sort(T, "pos")
    )
    return calls, ref_t, best.join(same_position, on=T, how="left")
