"""Retrieval lane (docs/metrics.md#retrieval): ranking metrics, sequence metrics, stage and failure class per trace.

Readings this module fixes:
- Row status: `incomplete` (harness error/timeout, or no `retrieval` field), `not_applicable` when the query has no
  relevant doc (every ranking metric null; retrieved_any, judged_at_10 and the sequence metrics still filled),
  else `scored`.
- multi_hop: every required doc that is still relevant in the frozen qrels must be in the top k, and at least one
  relevant doc must be (a required doc a human re-graded below the threshold no longer binds).
- Candidates not logged in any round: reranker_demotion cannot be told apart, so a doc not caught by an earlier
  class is `embedding_miss` and retrieval_reason says the candidates were missing.
- keyword_miss: another trace of the same case in the same run used a variant this trace did not use (null
  variants count as none) and has the doc in its top k; the literal may be in any query this trace sent.
- evidence_round is the `round` number logged (its position when absent); repeated_queries counts rounds whose
  query, lower-cased with spaces collapsed, equals an earlier round's; a round with no hits has novelty null.

Over 400 lines because the ranking metrics, the sequence metrics, the failure classes and the stage all read the one
ranked, graded frame of hits that score_retrieval builds per trace; apart, each would rebuild or pass it around.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from eval_pipeline.scoring.common import harness_incomplete, harness_reason, lane_traces
from eval_pipeline.scoring.qrels import qrels_version
from eval_pipeline.settings import ScoringSettings
from eval_pipeline.trec.ranking import (
    discount_expr,
    first_occurrences,
    gain_expr,
    judged_stats,
    ranked_entries,
    retrieval_rounds,
)

RANK_CUTOFFS = {"recall": (1, 3, 5, 10, 20), "precision": (1, 3, 5, 10), "ndcg": (3, 5, 10)}
RANKING_METRICS = (
    *(f"recall_at_{k}" for k in RANK_CUTOFFS["recall"]),
    *(f"precision_at_{k}" for k in RANK_CUTOFFS["precision"]),
    "mrr",
    "first_hit_rank",
    *(f"ndcg_at_{k}" for k in RANK_CUTOFFS["ndcg"]),
    "context_precision",
)
# docs/metrics.md#failure-class precedence: the first class that matches a missed relevant doc wins, and a trace keeps
# its highest class.
FAILURE_CLASSES = (
    "doc_missing_from_corpus",
    "stale_version_outranks_current",
    "reranker_demotion",
    "keyword_miss",
    "embedding_miss",
)
# docs/metrics.md#failure-class literals: two or more capitals, a hyphen and letters/digits (ERR-4412, SKU-88-B); a
# token mixing letters and digits (X200, 2FA); or a quoted phrase (straight or curly double quotes).
LITERAL_PATTERN = r'\b[A-Z]{2,}-[A-Za-z0-9]+|\b[A-Za-z]+[0-9][A-Za-z0-9]*|\b[0-9]+[A-Za-z][A-Za-z0-9]*|"[^"]+"|“[^”]+”'


def qrels_grades(qrels: pl.DataFrame) -> pl.DataFrame:
    """The frozen qrels as case_id, doc_id, grade (one row per pair)."""
    return qrels.select(pl.col("query_id").alias("case_id"), "doc_id", pl.col("grade").cast(pl.Int64)).unique(
        ["case_id", "doc_id"], keep="first"
    )


def frozen_version(qrels: pl.DataFrame) -> str:
    """The single qrels_version a frozen qrels frame carries (computed from the content when the column is absent)."""
    if "qrels_version" not in qrels.columns:
        return qrels_version(qrels)
    versions = qrels.get_column("qrels_version").drop_nulls().unique().to_list()
    if len(versions) > 1:
        raise ValueError(f"scoring needs one frozen qrels version, got {sorted(versions)}")
    return versions[0] if versions else qrels_version(qrels)


def rag_inputs(
    traces: pl.DataFrame, cases: pl.DataFrame, qrels: pl.DataFrame, settings: ScoringSettings | None
) -> tuple[ScoringSettings, pl.DataFrame, pl.DataFrame]:
    """(settings or the defaults, the frozen grades as case_id/doc_id/grade, the rag-lane traces numbered by `_tid`)."""
    return settings or ScoringSettings(), qrels_grades(qrels), lane_traces(traces, cases, "rag").with_row_index("_tid")


def _query_stats(grades: pl.DataFrame, settings: ScoringSettings) -> pl.DataFrame:
    """Per case: n_relevant and the ideal DCG at each nDCG cutoff (from every judged doc)."""
    stats = judged_stats(
        grades, "case_id", settings.relevance_threshold, RANK_CUTOFFS["ndcg"], gain=settings.gain, prefix="_idcg"
    )
    return stats.drop("num_nonrel").rename({"num_rel": "n_relevant"})


def _per_trace_ranking(ranked: pl.DataFrame, settings: ScoringSettings) -> pl.DataFrame:
    """Counts and sums per trace over its graded ranked list, from which every ranking metric follows."""
    k = settings.k
    rel, rank = pl.col("rel"), pl.col("rank")
    cutoffs = sorted({*RANK_CUTOFFS["recall"], *RANK_CUTOFFS["precision"], k})
    dcg = gain_expr(pl.col("grade"), settings.gain) * discount_expr(rank)
    return ranked.group_by("_tid").agg(
        n_retrieved=pl.len().cast(pl.Int64),
        first_hit_rank=rank.filter(rel).min(),
        # Ragas: sum of precision@i over relevant ranks i <= K, divided by the relevant docs in the top K.
        _cp_sum=(pl.col("cum_rel") / rank).filter(rel & (rank <= k)).sum(),
        _judged10=(pl.col("grade").is_not_null() & (rank <= 10)).sum().cast(pl.Int64),
        relevant_in_top_k=pl.col("doc_id").filter(rel & (rank <= k)),
        **{f"_rel@{c}": (rel & (rank <= c)).sum().cast(pl.Int64) for c in cutoffs},
        **{f"_dcg@{c}": dcg.filter(rank <= c).sum() for c in RANK_CUTOFFS["ndcg"]},
    )


def _ranking_columns(settings: ScoringSettings) -> list[pl.Expr]:
    """The docs/metrics.md#retrieval metrics from the per-trace counts; null where undefined (no relevant doc,
    ideal DCG 0)."""
    n_rel = pl.col("n_relevant")
    defined = n_rel > 0
    relk = pl.col(f"_rel@{settings.k}")
    cols = [pl.when(defined).then(pl.col(f"_rel@{c}") / n_rel).alias(f"recall_at_{c}") for c in RANK_CUTOFFS["recall"]]
    cols += [
        pl.when(defined).then(pl.col(f"_rel@{c}") / c).alias(f"precision_at_{c}") for c in RANK_CUTOFFS["precision"]
    ]
    cols.append(
        pl.when(defined)
        .then(pl.when(pl.col("first_hit_rank").is_not_null()).then(1.0 / pl.col("first_hit_rank")).otherwise(0.0))
        .alias("mrr")
    )
    cols.append(pl.when(defined).then(pl.col("first_hit_rank")).alias("first_hit_rank"))
    cols += [
        # DCG <= IDCG by construction; the clip removes float noise such as 1.0000000000000002.
        pl.when(defined & (pl.col(f"_idcg@{c}") > 0))
        .then((pl.col(f"_dcg@{c}") / pl.col(f"_idcg@{c}")).clip(upper_bound=1.0))
        .alias(f"ndcg_at_{c}")
        for c in RANK_CUTOFFS["ndcg"]
    ]
    cols.append(
        pl.when(defined)
        .then(pl.when(relk > 0).then(pl.col("_cp_sum") / relk).otherwise(0.0))
        .alias("context_precision")
    )
    return cols


def _sequence_metrics(rounds: pl.DataFrame, hits: pl.DataFrame) -> pl.DataFrame:
    """Per trace: evidence_round, repeated_queries and novelty_per_round (share of a round's hits unseen in earlier
    rounds)."""
    normalized = pl.col("query").str.to_lowercase().str.replace_all(r"\s+", " ").str.strip_chars()
    repeated = (
        rounds.with_columns(_q=normalized)
        .with_columns(_repeat=pl.col("_q").is_not_null() & ~pl.struct("_tid", "_q").is_first_distinct())
        .group_by("_tid")
        .agg(repeated_queries=pl.col("_repeat").sum().cast(pl.Int64))
    )
    novelty = (
        hits.with_columns(_novel=pl.col("round_pos") == pl.col("round_pos").min().over("_tid", "doc_id"))
        .group_by("_tid", "round_pos")
        .agg(_novelty=pl.col("_novel").mean())
    )
    per_round = (
        rounds.select("_tid", "round_pos")
        .join(novelty, on=["_tid", "round_pos"], how="left")
        .sort("_tid", "round_pos")
        .group_by("_tid", maintain_order=True)
        .agg(novelty_per_round=pl.col("_novelty"))
    )
    evidence = hits.filter(pl.col("rel")).group_by("_tid").agg(evidence_round=pl.col("round").min())
    return repeated.join(per_round, on="_tid", how="left").join(evidence, on="_tid", how="left")


def _missed_relevant(lane: pl.DataFrame, relevant: pl.DataFrame, top_k: pl.DataFrame) -> pl.DataFrame:
    """Per trace, the relevant docs the stage needs that are not in its top k (multi_hop: the required docs that are
    relevant)."""
    plain = lane.filter(~pl.col("multi_hop")).select("_tid", "case_id").join(relevant, on="case_id", how="inner")
    hops = (
        lane.filter(pl.col("multi_hop"))
        .select("_tid", "case_id", pl.col("required_doc_ids").alias("doc_id"))
        .explode("doc_id")
        .drop_nulls("doc_id")
        .join(relevant, on=["case_id", "doc_id"], how="semi")
    )
    return (
        pl.concat([plain.select("_tid", "case_id", "doc_id"), hops.select("_tid", "case_id", "doc_id")])
        .unique()
        .join(top_k.select("_tid", "doc_id"), on=["_tid", "doc_id"], how="anti")
    )


def _failure_classes(
    missed: pl.DataFrame,
    lane: pl.DataFrame,
    rounds: pl.DataFrame,
    ranked: pl.DataFrame,
    top_k: pl.DataFrame,
    corpus: pl.DataFrame,
) -> pl.DataFrame:
    """The failure_class (docs/metrics.md#failure-class) of each failed trace: classify every missed relevant doc, keep
    the highest class."""
    docs = (
        corpus.select("doc_id", "family", "current", "indexed")
        .unique("doc_id", keep="first")
        .with_columns(_in_corpus=pl.lit(True))
    )
    rank_of = ranked.select("_tid", "doc_id", pl.col("rank").alias("_rank"))
    listed = ranked.select("_tid", "doc_id", "rank").join(docs, on="doc_id", how="inner")
    stale_listed = listed.filter(~pl.col("current")).select(
        "_tid", "family", pl.col("doc_id").alias("_stale"), pl.col("rank").alias("_stale_rank")
    )
    missed = missed.join(docs, on="doc_id", how="left").join(rank_of, on=["_tid", "doc_id"], how="left")
    stale = (
        missed.join(stale_listed, on=["_tid", "family"], how="inner")
        .filter(
            (pl.col("_stale") != pl.col("doc_id"))
            & (pl.col("_rank").is_null() | (pl.col("_stale_rank") < pl.col("_rank")))
        )
        .select("_tid", "doc_id")
        .unique()
        .with_columns(_stale_hit=pl.lit(True))
    )
    # Only the failed traces' candidates matter, and there are up to 50 a round: explode those alone.
    failed_rounds = rounds.join(missed.select("_tid").unique(), on="_tid", how="semi")
    candidates = (
        ranked_entries(failed_rounds, "candidates")
        .select("_tid", "doc_id")
        .join(missed, on=["_tid", "doc_id"], how="semi")
        .unique()
    ).with_columns(_candidate=pl.lit(True))
    keyword = _keyword_confirmed(missed, lane, rounds, top_k)
    flagged = (
        missed.join(stale, on=["_tid", "doc_id"], how="left")
        .join(candidates, on=["_tid", "doc_id"], how="left")
        .join(keyword, on=["_tid", "doc_id"], how="left")
        .with_columns(
            pl.when(pl.col("_in_corpus").is_null() | ~pl.col("indexed").fill_null(True))
            .then(0)
            .when(pl.col("_stale_hit").fill_null(False))
            .then(1)
            .when(pl.col("_candidate").fill_null(False))
            .then(2)
            .when(pl.col("_keyword").fill_null(False))
            .then(3)
            .otherwise(4)
            .alias("_class")
        )
    )
    return (
        flagged.filter(pl.col("_class") == pl.col("_class").min().over("_tid"))
        .group_by("_tid")
        .agg(_class=pl.col("_class").first(), _class_docs=pl.col("doc_id").unique().sort().str.join(", "))
        .with_columns(
            failure_class=pl.col("_class").replace_strict(list(range(len(FAILURE_CLASSES))), list(FAILURE_CLASSES))
        )
    )


def _keyword_confirmed(
    missed: pl.DataFrame, lane: pl.DataFrame, rounds: pl.DataFrame, top_k: pl.DataFrame
) -> pl.DataFrame:
    """(trace, doc) pairs where a query sent holds a literal and another trace of the case in the run, with a variant
    this trace did not use, has the doc in its top k."""
    literal = (
        rounds.group_by("_tid")
        .agg(_literal=pl.col("query").str.contains(LITERAL_PATTERN).any())
        .filter(pl.col("_literal"))
    )
    variants = rounds.select("_tid", "variant").drop_nulls().unique()
    keys = lane.select("_tid", "run_id", "case_id")
    others = top_k.select(pl.col("_tid").alias("_other"), "doc_id").join(
        keys.rename({"_tid": "_other"}), on="_other", how="inner"
    )
    found = (
        missed.join(literal.select("_tid"), on="_tid", how="semi")
        .join(keys, on=["_tid", "case_id"], how="inner")
        .join(others, on=["run_id", "case_id", "doc_id"], how="inner")
        .filter(pl.col("_other") != pl.col("_tid"))
    )
    # The other trace must have used a variant this trace did not: same-variant repeats confirm nothing.
    other_variants = (
        found.select("_tid", "_other").unique().join(variants.rename({"_tid": "_other"}), on="_other", how="inner")
    )
    differing = other_variants.join(variants, on=["_tid", "variant"], how="anti").select("_tid", "_other").unique()
    return (
        found.join(differing, on=["_tid", "_other"], how="semi")
        .select("_tid", "doc_id")
        .unique()
        .with_columns(_keyword=pl.lit(True))
    )


def score_retrieval(
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    qrels: pl.DataFrame,
    corpus: pl.DataFrame,
    settings: ScoringSettings | None = None,
) -> pl.DataFrame:
    """retrieval_scores: one row per trace of a rag-lane case with the docs/metrics.md#retrieval metrics, stage and
    failure class."""
    settings, grades, lane = rag_inputs(traces, cases, qrels, settings)
    k = settings.k
    version = frozen_version(qrels)
    lane = lane.with_columns(pl.col("multi_hop").fill_null(False))
    rounds = retrieval_rounds(lane)
    case_of = lane.select("_tid", "case_id")
    hits = (
        ranked_entries(rounds, "hits")
        .join(case_of, on="_tid", how="left")
        .join(grades, on=["case_id", "doc_id"], how="left")
        .with_columns(rel=(pl.col("grade") >= settings.relevance_threshold).fill_null(False))
    )
    ranked = first_occurrences(hits).with_columns(cum_rel=pl.col("rel").cast(pl.Int64).cum_sum().over("_tid"))
    top_k = ranked.filter(pl.col("rank") <= k)
    relevant = grades.filter(pl.col("grade") >= settings.relevance_threshold).select("case_id", "doc_id")
    missed = _missed_relevant(lane, relevant, top_k)
    frame = (
        lane.join(_query_stats(grades, settings), on="case_id", how="left")
        .with_columns(pl.col("n_relevant").fill_null(0))
        .with_columns(pl.col(f"_idcg@{c}").fill_null(0.0) for c in RANK_CUTOFFS["ndcg"])
        .join(_per_trace_ranking(ranked, settings), on="_tid", how="left")
        .join(_sequence_metrics(rounds, hits), on="_tid", how="left")
        .join(missed.group_by("_tid").agg(_missed=pl.col("doc_id").sort()), on="_tid", how="left")
        .with_columns(
            pl.col("n_retrieved").fill_null(0),
            *(pl.col(c).fill_null(0) for c in (f"_rel@{k}", "_judged10")),
            relevant_in_top_k=pl.col("relevant_in_top_k").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            _missed=pl.col("_missed").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            _logged=pl.col("retrieval").is_not_null(),
            _candidates_logged=pl.col("retrieval")
            .list.eval(pl.element().struct.field("candidates").is_not_null().any())
            .list.first(),
        )
        .with_columns(_stage_columns(settings))
    )
    failed = frame.filter(pl.col("retrieval_stage") == "fail").select("_tid")
    classes = _failure_classes(missed.join(failed, on="_tid", how="semi"), lane, rounds, ranked, top_k, corpus)
    return _finish(frame.join(classes, on="_tid", how="left"), settings, version)


def changed_cases(old_qrels: pl.DataFrame, qrels: pl.DataFrame) -> pl.Series:
    """The case ids whose frozen grades differ between two qrels (a doc judged, re-graded or no longer judged)."""
    old, new = qrels_grades(old_qrels), qrels_grades(qrels)
    pair = ["case_id", "doc_id", "grade"]
    return pl.concat([old.join(new, on=pair, how="anti"), new.join(old, on=pair, how="anti")]).get_column("case_id")


def rescore_retrieval(
    previous: pl.DataFrame,
    traces: pl.DataFrame,
    cases: pl.DataFrame,
    qrels: pl.DataFrame,
    old_qrels: pl.DataFrame,
    corpus: pl.DataFrame,
    settings: ScoringSettings | None = None,
) -> pl.DataFrame:
    """score_retrieval after a qrels change, from `previous`, the scores of the same traces, cases, corpus and
    settings against `old_qrels`: the traces of a case whose grades changed are scored again, every other row is kept
    with the new qrels_version. Equal to scoring every trace again, as a trace's scores read only its own case's
    grades (and the other traces of its case, which are scored with it)."""
    changed = changed_cases(old_qrels, qrels).unique()
    kept = (
        previous.select(RETRIEVAL_COLUMNS)
        .filter(~pl.col("case_id").is_in(changed.implode()))
        .with_columns(pl.lit(frozen_version(qrels)).alias("qrels_version"))
    )
    affected = traces.filter(pl.col("case_id").is_in(changed.implode()))
    if affected.height:
        kept = pl.concat([kept, score_retrieval(affected, cases, qrels, corpus, settings)], how="vertical_relaxed")
    return kept.sort("run_id", "trace_id")


Rule = tuple[pl.Expr, str, "pl.Expr | str | None"]


def stage_rules(rules: Sequence[Rule], otherwise: tuple[str, pl.Expr | str | None]) -> tuple[pl.Expr, pl.Expr]:
    """(stage, reason) from the first rule whose condition holds: each rule is (condition, stage, reason)."""

    def chain(values: list[pl.Expr | str | None], last: pl.Expr | str | None) -> pl.Expr:
        as_expr = [v if isinstance(v, pl.Expr) else pl.lit(v, dtype=pl.String) for v in [*values, last]]
        expr = pl.when(rules[0][0]).then(as_expr[0])
        for (condition, _, _), value in zip(rules[1:], as_expr[1:-1], strict=True):
            expr = expr.when(condition).then(value)
        return expr.otherwise(as_expr[-1])

    return chain([r[1] for r in rules], otherwise[0]), chain([r[2] for r in rules], otherwise[1])


def _stage_columns(settings: ScoringSettings) -> list[pl.Expr]:
    """Row status and retrieval stage with reasons, following the stage rule of docs/metrics.md#retrieval."""
    found = pl.col(f"_rel@{settings.k}") > 0
    passed = found & (~pl.col("multi_hop") | (pl.col("_missed").list.len() == 0))
    no_relevant = pl.col("n_relevant") == 0
    stage, reason = stage_rules(
        [
            (harness_incomplete(), "incomplete", harness_reason()),
            (~pl.col("_logged"), "incomplete", "retrieval not logged: the trace has no retrieval field"),
            (
                no_relevant & pl.col("expect_refusal").fill_null(False),
                "not_applicable",
                "refusal case: no relevant doc in the qrels",
            ),
            (no_relevant, "not_applicable", "no relevant doc in the qrels for this query"),
            (passed, "pass", None),
        ],
        otherwise=("fail", None),
    )
    status = pl.when(stage.is_in(["incomplete", "not_applicable"])).then(stage).otherwise(pl.lit("scored"))
    return [stage.alias("retrieval_stage"), status.alias("status"), reason.alias("reason")]


def _finish(frame: pl.DataFrame, settings: ScoringSettings, version: str) -> pl.DataFrame:
    """Null the metrics a row's status leaves undefined, write the stage reason, and order the output columns."""
    k = settings.k
    scored = pl.col("status") == "scored"
    logged = pl.col("_logged")
    fail = pl.col("retrieval_stage") == "fail"
    missing_note = (
        pl.when(~pl.col("_candidates_logged").fill_null(False))
        .then(pl.lit("; candidates not logged, so reranker_demotion could not be tested"))
        .otherwise(pl.lit(""))
    )
    fail_reason = (
        pl.when(pl.col("multi_hop") & (pl.col(f"_rel@{k}") > 0))
        .then(
            pl.format(
                "multi_hop: required docs missing from the top {}: {}", pl.lit(k), pl.col("_missed").list.join(", ")
            )
        )
        .otherwise(pl.format("no relevant doc in the top {}", pl.lit(k)))
    )
    retrieval_reason = (
        pl.when(fail)
        .then(
            pl.concat_str(
                fail_reason,
                pl.lit("; failure_class "),
                pl.col("failure_class"),
                pl.lit(" ("),
                pl.col("_class_docs"),
                pl.lit(")"),
                missing_note,
            )
        )
        .when(pl.col("retrieval_stage") == "pass")
        .then(None)
        .otherwise(pl.col("reason"))
    )
    return (
        frame.with_columns(*_ranking_columns(settings))
        .with_columns(
            *(pl.when(scored).then(pl.col(c)).alias(c) for c in (*RANKING_METRICS, "evidence_round")),
            pl.when(fail).then(pl.col("failure_class")).alias("failure_class"),
            retrieval_reason.alias("retrieval_reason"),
            pl.when(logged & (pl.col("n_retrieved") > 0))
            .then(pl.col("_judged10") / pl.min_horizontal(pl.col("n_retrieved"), pl.lit(10)))
            .alias("judged_at_10"),
            pl.when(logged).then(pl.col("n_retrieved") > 0).alias("retrieved_any"),
            pl.when(logged).then(pl.col("n_retrieved")).alias("n_retrieved"),
            pl.when(logged).then(pl.col("retrieval").list.len()).cast(pl.Int64).alias("rounds"),
            pl.when(logged).then(pl.col("repeated_queries").fill_null(0)).alias("repeated_queries"),
            pl.col("retrieval").list.eval(pl.element().struct.field("query")).alias("queries"),
            pl.col("retrieval").list.eval(pl.element().struct.field("variant")).alias("variants"),
            pl.coalesce("input", "input_case").alias("input"),
            pl.lit(version).alias("qrels_version"),
            pl.lit(k, dtype=pl.Int64).alias("k"),
        )
        .select(RETRIEVAL_COLUMNS)
        .sort("run_id", "trace_id")
    )


RETRIEVAL_COLUMNS = (
    "run_id",
    "trace_id",
    "case_id",
    "attempt",
    "dataset_version",
    "qrels_version",
    "input",
    "queries",
    "variants",
    *RANKING_METRICS,
    "judged_at_10",
    "retrieved_any",
    "n_relevant",
    "n_retrieved",
    "relevant_in_top_k",
    "k",
    "multi_hop",
    "rounds",
    "evidence_round",
    "repeated_queries",
    "novelty_per_round",
    "failure_class",
    "status",
    "reason",
    "retrieval_stage",
    "retrieval_reason",
)


def side_by_side(
    old: pl.DataFrame, new: pl.DataFrame, metric: str, key: Sequence[str] = ("run_id", "trace_id")
) -> pl.DataFrame:
    """A metric in two versions of a table: old, new, delta (new - old, null if either is null) and whether it
    changed."""
    keys = list(key)
    extra = [c for c in ("qrels_version",) if c in old.columns and c in new.columns and c != metric]
    left = old.select(*keys, pl.col(metric).alias("old"), *(pl.col(c).alias(f"old_{c}") for c in extra))
    right = new.select(*keys, pl.col(metric).alias("new"), *(pl.col(c).alias(f"new_{c}") for c in extra))
    joined = left.join(right, on=keys, how="full", coalesce=True)
    return (
        joined.with_columns(
            pl.lit(metric).alias("metric"),
            (pl.col("new") - pl.col("old")).alias("delta")
            if joined.schema["old"].is_numeric()
            else pl.lit(None).alias("delta"),
            pl.col("old").ne_missing(pl.col("new")).alias("changed"),
        )
        .select(
            *keys,
            "metric",
            "old",
            "new",
            "delta",
            "changed",
            *(f"{side}_{c}" for c in extra for side in ("old", "new")),
        )
        .sort(keys)
    )
