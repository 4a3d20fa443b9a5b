"""Citations (docs/metrics.md#citations): the citation stage and rates of each trace, from its citation verdicts.

Which docs a claim cites, the verdict on each (claim, cited doc) pair and each claim's `citation_verdict` are decided
in citation_verdicts.
Evidence diversity (docs/evidence_diversity.md): `cited_families` and `cited_sources` count the independent families
and source systems among the distinct cited ids that exist (a dead id draws on nothing); null where nothing is cited or
the stage is not scored. `claims_and_citations` adds each claim's `supporting_families` and `triangulated`.
An answered trace that logged no context (docs/metrics.md#citations) is `incomplete` with reason `no_context_logged`:
whether a cited id is dead, or a context chunk supports a claim, cannot be known, so its pairs are not judged, its
claims' verdicts, its rates and its dead-citation counts are null.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import Judge
from eval_pipeline.judge.text import doc_markers, normalize_ws, with_distinct
from eval_pipeline.scoring.citation_verdicts import (
    citation_pairs,
    claim_citations,
    judge_pairs,
    known_ids,
    structured_citations,
    with_existence,
)
from eval_pipeline.scoring.claims import (
    NO_CONTEXT_LOGGED,
    extract_claims,
    judge_claims,
    no_context_logged,
    unanswered,
)
from eval_pipeline.scoring.common import (
    KEY_COLUMNS,
    harness_incomplete,
    harness_reason,
    lane_traces,
)
from eval_pipeline.scoring.diversity import (
    distinct_families,
    distinct_sources,
    doc_families,
    family_support,
    with_families,
)
from eval_pipeline.settings import ScoringSettings

CITATION_SCORES_SCHEMA: dict[str, pl.DataType] = {
    "run_id": pl.String,
    "trace_id": pl.String,
    "case_id": pl.String,
    "attempt": pl.Int64,
    "n_claims": pl.Int64,
    "n_citation_pairs": pl.Int64,
    "citation_precision": pl.Float64,
    "citation_recall": pl.Float64,
    "citation_resolution_rate": pl.Float64,
    "quotes_found_rate": pl.Float64,
    "n_dead_citations": pl.Int64,
    "dead_citation_ids": pl.List(pl.String),
    "cited_families": pl.Int64,
    "cited_sources": pl.Int64,
    "status": pl.String,
    "reason": pl.String,
    "citation_stage": pl.String,
    "citation_reason": pl.String,
}

_TRACE = ["run_id", "trace_id"]
_CLAIM = ["run_id", "trace_id", "claim_index"]


def _quotes_found(traces: pl.DataFrame, citations: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, n_quotes, n_quotes_found: structured quotes found (white space folded) in the corpus or
    context."""
    quotes = citations.with_columns(_quote=normalize_ws(pl.col("quote"))).filter(pl.col("_quote").str.len_chars() > 0)
    if quotes.is_empty():
        return pl.DataFrame(
            schema={"run_id": pl.String, "trace_id": pl.String, "n_quotes": pl.UInt32, "n_quotes_found": pl.UInt32}
        )
    context = (
        traces.join(quotes.select(_TRACE).unique(), on=_TRACE, how="semi")
        .select("context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(pl.col("context").struct.field("text"))
        .to_series()
    )
    texts = pl.concat([corpus["text"], context]).drop_nulls().unique()
    haystack = "\x00".join(pl.select(normalize_ws(pl.lit(texts))).to_series().to_list())
    # One Aho-Corasick pass over the whole corpus finds every distinct quote at once.
    wanted = quotes["_quote"].unique().to_list()
    found = (
        set(pl.select(pl.lit(haystack).str.extract_many(wanted, overlapping=True)).item().to_list())
        if haystack
        else set()
    )
    return quotes.group_by(_TRACE).agg(
        n_quotes=pl.len(),
        n_quotes_found=pl.col("_quote").is_in(sorted(found)).sum(),
    )


def score_citations(
    judged_claims: pl.DataFrame,
    traces: pl.DataFrame,
    corpus: pl.DataFrame,
    judge: Judge,
    settings: ScoringSettings,
    cases: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(claims with cited_doc_ids, citation_verdict, citation_reason; `citation_scores` per rag-lane trace).

    `cases` restricts the scores to rag-lane traces; without it every trace given is taken as rag-lane.
    """
    rag = lane_traces(traces, cases, "rag") if cases is not None else traces
    citations = structured_citations(rag)
    in_corpus, in_context = known_ids(rag, corpus)
    blind = rag.filter(~harness_incomplete() & ~unanswered() & no_context_logged()).select(_TRACE)
    all_pairs = _pair_verdicts(judged_claims, citations, rag, corpus, judge, blind, in_corpus, in_context)
    claims_out = _blind_claims(claim_citations(judged_claims, all_pairs), blind)
    rows = _trace_counts(rag, corpus, citations, all_pairs, claims_out, in_corpus, in_context)
    return claims_out, _citation_scores(rows, settings)


def _pair_verdicts(
    judged_claims: pl.DataFrame,
    citations: pl.DataFrame,
    rag: pl.DataFrame,
    corpus: pl.DataFrame,
    judge: Judge,
    blind: pl.DataFrame,
    in_corpus: pl.DataFrame,
    in_context: pl.DataFrame,
) -> pl.DataFrame:
    """Every (claim, cited doc) pair with pair_verdict and pair_reason: judged when the cited id exists, DEAD_CITATION
    when it does not, null with reason no_context_logged in a `blind` trace (one that logged no context)."""
    pairs = with_existence(citation_pairs(judged_claims, citations), in_corpus, in_context)
    # Pairs of a trace without context are neither judged (no call is spent) nor dead: they stay incomplete.
    checkable = pairs.join(blind, on=_TRACE, how="anti", maintain_order="left")
    judged_pairs = judge_pairs(checkable.filter(pl.col("exists")), judged_claims, rag, corpus, judge)
    dead_pairs = checkable.filter(~pl.col("exists")).select(
        *_CLAIM, "doc_id", pl.lit("DEAD_CITATION").alias("pair_verdict"), pl.lit(None, pl.String).alias("pair_reason")
    )
    blind_pairs = pairs.join(blind, on=_TRACE, how="semi", maintain_order="left").select(
        *_CLAIM, "doc_id", pl.lit(None, pl.String).alias("pair_verdict"), pl.lit(NO_CONTEXT_LOGGED).alias("pair_reason")
    )
    return pairs.select(*_CLAIM, "doc_id").join(
        pl.concat([judged_pairs, dead_pairs, blind_pairs]), on=[*_CLAIM, "doc_id"], how="left", maintain_order="left"
    )


def _blind_claims(claims: pl.DataFrame, blind: pl.DataFrame) -> pl.DataFrame:
    """The claims with citation_verdict null and citation_reason no_context_logged in a `blind` trace."""
    blind_claim = pl.col("_blind").fill_null(False)
    return (
        claims.join(blind.with_columns(_blind=pl.lit(True)), on=_TRACE, how="left", maintain_order="left")
        .with_columns(
            citation_verdict=pl.when(blind_claim).then(None).otherwise(pl.col("citation_verdict")),
            citation_reason=pl.when(blind_claim).then(pl.lit(NO_CONTEXT_LOGGED)).otherwise(pl.col("citation_reason")),
        )
        .drop("_blind")
    )


def _cited_ids(rag: pl.DataFrame, citations: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, doc_id: the distinct ids each trace cites, inline in its answer or in structured citations."""
    return pl.concat(
        [
            with_distinct(
                rag.select(*_TRACE, "answer_text"),
                "answer_text",
                doc_id=doc_markers(pl.col("answer_text").fill_null("")),
            )
            .select(*_TRACE, "doc_id")
            .explode("doc_id", keep_nulls=False, empty_as_null=False),
            citations.select(*_TRACE, "doc_id"),
        ]
    ).unique()


def _resolution(
    cited_ids: pl.DataFrame, corpus: pl.DataFrame, in_corpus: pl.DataFrame, in_context: pl.DataFrame
) -> pl.DataFrame:
    """Per trace: the cited ids, how many resolve, the dead ones, and the families and sources of those that exist."""
    return (
        with_existence(cited_ids, in_corpus, in_context)
        .pipe(with_families, doc_families(corpus))
        .group_by(_TRACE)
        .agg(
            n_cited_ids=pl.len(),
            n_resolved=pl.col("exists").sum(),
            dead_citation_ids=pl.col("doc_id").filter(~pl.col("exists")).sort(),
            _cited_families=distinct_families(pl.col("exists")),
            _cited_sources=distinct_sources(pl.col("exists")),
        )
    )


def _pair_counts(all_pairs: pl.DataFrame) -> pl.DataFrame:
    """Per trace: its (claim, cited doc) pairs, the supporting ones and the incomplete ones."""
    return all_pairs.group_by(_TRACE).agg(
        n_citation_pairs=pl.len(),
        n_supporting_pairs=(pl.col("pair_verdict") == "SUPPORTS").sum(),
        n_incomplete_pairs=pl.col("pair_verdict").is_null().sum(),
    )


def _claim_counts(claims_out: pl.DataFrame) -> pl.DataFrame:
    """Per trace: its claims, the supported and the incomplete ones, the first failing claim and the first incomplete
    reason."""
    # In claim order, so the first failing claim named in a reason is the same in every run.
    return (
        claims_out.sort(*_CLAIM)
        .group_by(_TRACE)
        .agg(
            n_claims=pl.len(),
            n_supported_claims=(pl.col("citation_verdict") == "SUPPORTS").sum(),
            n_incomplete_claims=pl.col("citation_verdict").is_null().sum(),
            _first_failure=pl.format("claim {} {}", "claim_index", "citation_verdict")
            .filter(pl.col("citation_verdict") != "SUPPORTS")
            .first(),
            _incomplete_reason=pl.col("citation_reason").filter(pl.col("citation_verdict").is_null()).first(),
        )
    )


def _trace_counts(
    rag: pl.DataFrame,
    corpus: pl.DataFrame,
    citations: pl.DataFrame,
    all_pairs: pl.DataFrame,
    claims_out: pl.DataFrame,
    in_corpus: pl.DataFrame,
    in_context: pl.DataFrame,
) -> pl.DataFrame:
    """One row per rag-lane trace with every count its citation stage and rates are computed from."""
    resolution = _resolution(_cited_ids(rag, citations), corpus, in_corpus, in_context)
    pair_counts = _pair_counts(all_pairs)
    claim_counts = _claim_counts(claims_out)
    rows = rag.select(
        *KEY_COLUMNS,
        "status",
        "error",
        "has_answer",
        "answer_text",
        "answer_refused",
        no_context_logged().alias("_no_context"),
    )
    for part in (resolution, pair_counts, claim_counts, _quotes_found(rag, citations, corpus)):
        rows = rows.join(part, on=_TRACE, how="left")
    counts = [
        "n_cited_ids",
        "n_resolved",
        "n_citation_pairs",
        "n_supporting_pairs",
        "n_incomplete_pairs",
        "n_claims",
        "n_supported_claims",
        "n_incomplete_claims",
        "n_quotes",
        "n_quotes_found",
    ]
    return rows.with_columns(
        pl.col(counts).fill_null(0).cast(pl.Int64),
        pl.col("dead_citation_ids").fill_null(pl.lit([], dtype=pl.List(pl.String))),
    ).with_columns(n_dead_citations=pl.col("dead_citation_ids").list.len().cast(pl.Int64))


def _blind_trace() -> pl.Expr:
    """True for an answered trace row that logged no context."""
    return ~unanswered() & pl.col("_no_context")


def _citation_stage(settings: ScoringSettings) -> tuple[pl.Expr, pl.Expr]:
    """(citation_stage, citation_reason) of a trace row, from its counts."""
    applies = (pl.col("n_cited_ids") > 0) | pl.lit(settings.citations_required)
    passes = (pl.col("n_supported_claims") == pl.col("n_claims")) & (pl.col("n_dead_citations") == 0)
    blind_trace = _blind_trace()
    stage = (
        pl.when(harness_incomplete())
        .then(pl.lit("incomplete"))
        .when(blind_trace)
        .then(pl.lit("incomplete"))
        .when(~applies)
        .then(pl.lit("not_applicable"))
        .when(unanswered())
        .then(pl.lit("incomplete"))
        .when(pl.col("n_incomplete_claims") > 0)
        .then(pl.lit("incomplete"))
        .when(passes)
        .then(pl.lit("pass"))
        .otherwise(pl.lit("fail"))
    )
    failure = pl.concat_str(
        [
            pl.when(pl.col("n_supported_claims") < pl.col("n_claims")).then(
                pl.format(
                    "{} of {} claims lack a supporting citation (first: {})",
                    pl.col("n_claims") - pl.col("n_supported_claims"),
                    "n_claims",
                    "_first_failure",
                )
            ),
            pl.when(pl.col("n_dead_citations") > 0).then(
                pl.format("dead citations: {}", pl.col("dead_citation_ids").list.join(", "))
            ),
        ],
        separator="; ",
        ignore_nulls=True,
    )
    reason = (
        pl.when(harness_incomplete())
        .then(harness_reason())
        .when(blind_trace)
        .then(pl.lit(NO_CONTEXT_LOGGED))
        .when(~applies)
        .then(pl.lit("the answer cites nothing and the run does not require citations"))
        .when(unanswered())
        .then(pl.lit("trace has no answer"))
        .when(pl.col("n_incomplete_claims") > 0)
        .then(
            pl.format(
                "judge could not check the citations of {} claims: {}", "n_incomplete_claims", "_incomplete_reason"
            )
        )
        .when(passes)
        .then(None)
        .otherwise(failure)
    )
    return stage, reason


def _citation_scores(rows: pl.DataFrame, settings: ScoringSettings) -> pl.DataFrame:
    """citation_scores from the per-trace counts: the stage and its reason, and the rates where the stage is scored."""
    stage, reason = _citation_stage(settings)
    blind_trace = _blind_trace()
    scored = pl.col("citation_stage").is_in(["pass", "fail"])

    def rate(numerator: str, denominator: str) -> pl.Expr:
        return pl.when(scored & (pl.col(denominator) > 0)).then(pl.col(numerator) / pl.col(denominator))

    return (
        rows.with_columns(citation_stage=stage, citation_reason=reason)
        .with_columns(
            citation_precision=rate("n_supporting_pairs", "n_citation_pairs"),
            citation_recall=rate("n_supported_claims", "n_claims"),
            citation_resolution_rate=rate("n_resolved", "n_cited_ids"),
            quotes_found_rate=rate("n_quotes_found", "n_quotes"),
            status=pl.col("citation_stage").replace({"pass": "scored", "fail": "scored"}),
            reason=pl.when(~scored).then(pl.col("citation_reason")),
            # Without the context, an id missing from the corpus may still have been in it: dead is unknown.
            n_dead_citations=pl.when(~blind_trace).then(pl.col("n_dead_citations")),
            dead_citation_ids=pl.when(~blind_trace).then(pl.col("dead_citation_ids")),
            cited_families=pl.when(scored & (pl.col("n_cited_ids") > 0)).then(pl.col("_cited_families").fill_null(0)),
            cited_sources=pl.when(scored & (pl.col("_cited_sources") > 0)).then(pl.col("_cited_sources")),
        )
        .select(list(CITATION_SCORES_SCHEMA))
        .cast(CITATION_SCORES_SCHEMA)
        .sort("run_id", "trace_id")
    )


def claims_and_citations(
    traces: pl.DataFrame,
    corpus: pl.DataFrame,
    cases: pl.DataFrame,
    judge: Judge,
    settings: ScoringSettings,
    batch_traces: int = 100_000,
    family_judge: Judge | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(judged claims with citations and supporting families, `citation_scores`) of the rag-lane traces, `batch_traces`
    traces at a time; `family_judge` (default: `judge`) decides support per family, so its calls can be counted apart.

    Every step is per trace, so batches only bound memory: the judge's working set grows with the claims it holds.
    """
    # By trace id: batches, judge requests and output rows then come in the same order whatever order traces arrive in.
    rag = lane_traces(traces, cases, "rag").select(traces.columns).sort("run_id", "trace_id")
    claim_parts, score_parts = [], []
    for start in range(0, max(rag.height, 1), batch_traces):
        batch = rag.slice(start, batch_traces)
        judged = judge_claims(extract_claims(batch, settings.refusal_phrases), batch, judge)
        claims, scores = score_citations(judged, batch, corpus, judge, settings, cases=cases)
        claim_parts.append(family_support(claims, batch, corpus, family_judge or judge))
        score_parts.append(scores)
    claims = pl.concat(claim_parts, how="vertical_relaxed").sort(*_CLAIM)
    return claims, pl.concat(score_parts, how="vertical_relaxed").sort(*_TRACE)
