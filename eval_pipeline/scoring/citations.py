"""Citations (docs/metrics.md#citations): which doc each claim cites, whether that doc supports it, and a citation stage per trace.

Cited docs of a claim: the inline `[doc:ID]` markers of its sentence, plus structured `answer.citations`
mapped as docs/metrics.md says — `claim_index` names the claim; else the claim(s) with the highest content-word overlap with
the citation's `quote` (ties: all of them); else, with neither, every claim. A structured citation whose
`claim_index` names no claim cites no claim (its id still counts for resolution and dead citations).

Per (claim, cited doc) pair: dead when the id is neither in the corpus manifest (any version) nor in the
trace's context; supporting when the judge finds the claim SUPPORTED by that doc's text (the context's chunks
of that doc, else the corpus text). A grounding verdict SUPPORTED whose verified quote came from the cited
doc already settles the pair, without another judge call.
Per claim (`citation_verdict`): SUPPORTS (a cited doc supports it) → DEAD_CITATION (no support and a cited id
is dead) → null when a pair judgment is incomplete → RELATED_NOT_SUPPORTING; UNCITED when it cites nothing.
Evidence diversity (docs/evidence_diversity.md): `cited_families` and `cited_sources` count the independent families and
source systems among the distinct cited ids that exist (a dead id draws on nothing); null where nothing is cited or the
stage is not scored. `claims_and_citations` adds each claim's `supporting_families` and `triangulated`.
An answered trace that logged no context (docs/metrics.md#citations) is `incomplete` with reason `no_context_logged`: whether a
cited id is dead, or a context chunk supports a claim, cannot be known, so its pairs are not judged, its claims'
verdicts, its rates and its dead-citation counts are null.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import EVIDENCE, Judge
from eval_pipeline.judge.text import doc_markers, normalize_ws, with_content_word_sets, with_distinct
from eval_pipeline.scoring.claims import (
    NO_CONTEXT_LOGGED,
    claim_key,
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

CITATION_VERDICTS = ("SUPPORTS", "RELATED_NOT_SUPPORTING", "UNCITED", "DEAD_CITATION")

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


def structured_citations(traces: pl.DataFrame) -> pl.DataFrame:
    """One row per `answer.citations` entry: run_id, trace_id, doc_id, quote, cited_claim_index."""
    return (
        traces.select(*_TRACE, "citations")
        .explode("citations", keep_nulls=False, empty_as_null=False)
        .select(
            *_TRACE,
            pl.col("citations").struct.field("doc_id"),
            pl.col("citations").struct.field("quote"),
            pl.col("citations").struct.field("claim_index").alias("cited_claim_index"),
        )
    )


def _citation_pairs(claims: pl.DataFrame, citations: pl.DataFrame) -> pl.DataFrame:
    """(run_id, trace_id, claim_index, doc_id) for every claim and doc it cites (docs/metrics.md mapping), distinct."""
    inline = claims.select(*_CLAIM, "inline_cited_doc_ids").explode(
        "inline_cited_doc_ids", keep_nulls=False, empty_as_null=False
    )
    inline = inline.rename({"inline_cited_doc_ids": "doc_id"})
    has_quote = pl.col("quote").is_not_null() & (normalize_ws(pl.col("quote")).str.len_chars() > 0)
    by_index = (
        citations.filter(pl.col("cited_claim_index").is_not_null())
        .join(claims.select(*_CLAIM), left_on=[*_TRACE, "cited_claim_index"], right_on=_CLAIM, maintain_order="left")
        .select(*_TRACE, pl.col("cited_claim_index").alias("claim_index"), "doc_id")
    )
    quoted = citations.filter(pl.col("cited_claim_index").is_null() & has_quote).with_row_index("cite_id")
    scope = claims.join(quoted.select(_TRACE).unique(), on=_TRACE, how="semi")
    candidates = quoted.join(scope.select(*_CLAIM, "claim"), on=_TRACE, maintain_order="left_right")
    # The overlap depends on the two texts only, and quotes and claims repeat across traces.
    overlaps = with_content_word_sets(
        with_content_word_sets(candidates.select("quote", "claim").unique(), "quote", "_quote_words"),
        "claim",
        "_claim_words",
    ).select("quote", "claim", _overlap=pl.col("_quote_words").list.set_intersection("_claim_words").list.len())
    by_quote = (
        candidates.join(overlaps, on=["quote", "claim"], how="left", maintain_order="left", nulls_equal=True)
        .filter(pl.col("_overlap") == pl.col("_overlap").max().over("cite_id"))
        .select(*_CLAIM, "doc_id")
    )
    everywhere = (
        citations.filter(pl.col("cited_claim_index").is_null() & ~has_quote)
        .join(claims.select(*_CLAIM), on=_TRACE, maintain_order="left_right")
        .select(*_CLAIM, "doc_id")
    )
    return pl.concat([inline.select(*_CLAIM, "doc_id"), by_index, by_quote, everywhere]).unique(maintain_order=True)


def _known_ids(traces: pl.DataFrame, corpus: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(corpus doc ids, per-trace context doc ids): where a cited id may exist."""
    in_corpus = corpus.select("doc_id").unique()
    in_context = (
        traces.select(*_TRACE, "context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(*_TRACE, pl.col("context").struct.field("doc_id"))
        .unique()
    )
    return in_corpus, in_context


def _with_existence(frame: pl.DataFrame, in_corpus: pl.DataFrame, in_context: pl.DataFrame) -> pl.DataFrame:
    """The frame (run_id, trace_id, doc_id, …) with `exists`: the id is in the corpus or in the trace's context."""
    return (
        frame.join(in_corpus.with_columns(_c=pl.lit(True)), on="doc_id", how="left")
        .join(in_context.with_columns(_x=pl.lit(True)), on=[*_TRACE, "doc_id"], how="left")
        .with_columns(exists=pl.col("_c").fill_null(False) | pl.col("_x").fill_null(False))
        .drop("_c", "_x")
    )


def _doc_evidence(pairs: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, doc_id, evidence: the context chunks of the doc in that trace, else its corpus text."""
    wanted = pairs.select(*_TRACE, "doc_id").unique()
    from_context = (
        traces.join(wanted.select(_TRACE).unique(), on=_TRACE, how="semi")
        .select(*_TRACE, "context")
        .explode("context", keep_nulls=False, empty_as_null=False)
        .select(*_TRACE, pl.col("context").struct.field("doc_id"), pl.col("context").struct.field("text"))
        .join(wanted, on=[*_TRACE, "doc_id"], how="semi")
        .group_by(*_TRACE, "doc_id", maintain_order=True)
        .agg(pl.struct("doc_id", "text").alias("evidence"))
    )
    from_corpus = (
        wanted.join(from_context.select(*_TRACE, "doc_id"), on=[*_TRACE, "doc_id"], how="anti")
        .join(corpus.select("doc_id", "text"), on="doc_id")
        .select(*_TRACE, "doc_id", pl.concat_list(pl.struct("doc_id", "text")).alias("evidence"))
    )
    return pl.concat([from_context, from_corpus]).with_columns(pl.col("evidence").cast(EVIDENCE))


def citation_requests(
    pairs: pl.DataFrame, claims: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame
) -> pl.DataFrame:
    """Judge requests (REQUEST_SCHEMA) for (claim, cited doc) pairs: the claim against that doc's text."""
    with_claims = pairs.join(claims.select(*_CLAIM, "claim"), on=_CLAIM)
    return with_claims.join(_doc_evidence(with_claims, traces, corpus), on=[*_TRACE, "doc_id"], how="left").select(
        claim_key("run_id", "trace_id", "claim_index", "doc_id").alias("request_key"),
        "claim",
        pl.col("evidence").fill_null(pl.lit([], dtype=EVIDENCE)),
        claim_key("run_id", "trace_id", "doc_id").alias("evidence_key"),
    )


def live_citation_pairs(claims: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """Every (run_id, trace_id, claim_index, doc_id) a claim cites, with `exists` (not a dead citation)."""
    in_corpus, in_context = _known_ids(traces, corpus)
    return _with_existence(_citation_pairs(claims, structured_citations(traces)), in_corpus, in_context)


def _judge_pairs(
    pairs: pl.DataFrame, claims: pl.DataFrame, traces: pl.DataFrame, corpus: pl.DataFrame, judge: Judge
) -> pl.DataFrame:
    """The live pairs with pair_verdict (SUPPORTS | RELATED_NOT_SUPPORTING | null when incomplete) and pair_reason."""
    settled = (
        (pl.col("verdict") == "SUPPORTED")
        & pl.col("quote_verified").fill_null(False)
        & (pl.col("evidence_doc_id") == pl.col("doc_id"))
    )
    pairs = pairs.join(
        claims.select(*_CLAIM, "verdict", "quote_verified", "evidence_doc_id"), on=_CLAIM, maintain_order="left"
    )
    to_judge = pairs.filter(~settled)
    results = judge.judge_claims(citation_requests(to_judge.select(*_CLAIM, "doc_id"), claims, traces, corpus)).select(
        "request_key",
        pl.col("verdict").alias("_pair_judge"),
        pl.col("status").alias("_pair_status"),
        pl.col("reason").alias("_pair_why"),
    )
    judged = to_judge.with_columns(claim_key("run_id", "trace_id", "claim_index", "doc_id").alias("request_key")).join(
        results, on="request_key", how="left", maintain_order="left"
    )
    judged = judged.with_columns(
        pair_verdict=pl.when(pl.col("_pair_status") != "ok")
        .then(None)
        .when(pl.col("_pair_judge") == "SUPPORTED")
        .then(pl.lit("SUPPORTS"))
        .otherwise(pl.lit("RELATED_NOT_SUPPORTING")),
        pair_reason=pl.when(pl.col("_pair_status") != "ok")
        .then(pl.format("judge could not check cited doc {}: {}", "doc_id", "_pair_why"))
        .when(pl.col("_pair_judge") != "SUPPORTED")
        .then(pl.format("cited doc {} does not support the claim ({}: {})", "doc_id", "_pair_judge", "_pair_why")),
    )
    keep = [*_CLAIM, "doc_id", "pair_verdict", "pair_reason"]
    return pl.concat(
        [
            pairs.filter(settled).select(
                *_CLAIM,
                "doc_id",
                pl.lit("SUPPORTS").alias("pair_verdict"),
                pl.lit(None, pl.String).alias("pair_reason"),
            ),
            judged.select(keep),
        ]
    )


def _claim_citations(claims: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """claims + cited_doc_ids, citation_verdict, citation_reason (rules in the module docstring)."""
    per_claim = pairs.group_by(_CLAIM, maintain_order=True).agg(
        cited_doc_ids=pl.col("doc_id"),
        _supports=(pl.col("pair_verdict") == "SUPPORTS").any(),
        _dead=pl.col("doc_id").filter(pl.col("pair_verdict") == "DEAD_CITATION"),
        _incomplete=pl.col("pair_reason").filter(pl.col("pair_verdict").is_null()).first(),
        _related=pl.col("pair_reason").filter(pl.col("pair_verdict") == "RELATED_NOT_SUPPORTING").first(),
    )
    out = claims.join(per_claim, on=_CLAIM, how="left", maintain_order="left")
    verdict = (
        pl.when(pl.col("cited_doc_ids").is_null())
        .then(pl.lit("UNCITED"))
        .when(pl.col("_supports"))
        .then(pl.lit("SUPPORTS"))
        .when(pl.col("_dead").list.len() > 0)
        .then(pl.lit("DEAD_CITATION"))
        .when(pl.col("_incomplete").is_not_null())
        .then(None)
        .otherwise(pl.lit("RELATED_NOT_SUPPORTING"))
    )
    reason = (
        pl.when(pl.col("cited_doc_ids").is_null())
        .then(pl.lit("the claim cites no document"))
        .when(pl.col("_supports"))
        .then(None)
        .when(pl.col("_dead").list.len() > 0)
        .then(pl.format("cited id {} is in neither the corpus nor the context", pl.col("_dead").list.join(", ")))
        .when(pl.col("_incomplete").is_not_null())
        .then(pl.col("_incomplete"))
        .otherwise(pl.col("_related"))
    )
    return (
        out.with_columns(citation_verdict=verdict, citation_reason=reason)
        .with_columns(pl.col("cited_doc_ids").fill_null(pl.lit([], dtype=pl.List(pl.String))))
        .drop("_supports", "_dead", "_incomplete", "_related")
    )


def _quotes_found(traces: pl.DataFrame, citations: pl.DataFrame, corpus: pl.DataFrame) -> pl.DataFrame:
    """run_id, trace_id, n_quotes, n_quotes_found: structured quotes found (white space folded) in the corpus or context."""
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
    in_corpus, in_context = _known_ids(rag, corpus)
    blind = rag.filter(~harness_incomplete() & ~unanswered() & no_context_logged()).select(_TRACE)
    pairs = _with_existence(_citation_pairs(judged_claims, citations), in_corpus, in_context)
    # Pairs of a trace without context are neither judged (no call is spent) nor dead: they stay incomplete.
    checkable = pairs.join(blind, on=_TRACE, how="anti", maintain_order="left")
    judged_pairs = _judge_pairs(checkable.filter(pl.col("exists")), judged_claims, rag, corpus, judge)
    dead_pairs = checkable.filter(~pl.col("exists")).select(
        *_CLAIM, "doc_id", pl.lit("DEAD_CITATION").alias("pair_verdict"), pl.lit(None, pl.String).alias("pair_reason")
    )
    blind_pairs = pairs.join(blind, on=_TRACE, how="semi", maintain_order="left").select(
        *_CLAIM, "doc_id", pl.lit(None, pl.String).alias("pair_verdict"), pl.lit(NO_CONTEXT_LOGGED).alias("pair_reason")
    )
    all_pairs = pairs.select(*_CLAIM, "doc_id").join(
        pl.concat([judged_pairs, dead_pairs, blind_pairs]), on=[*_CLAIM, "doc_id"], how="left", maintain_order="left"
    )
    blind_claim = pl.col("_blind").fill_null(False)
    claims_out = (
        _claim_citations(judged_claims, all_pairs)
        .join(blind.with_columns(_blind=pl.lit(True)), on=_TRACE, how="left", maintain_order="left")
        .with_columns(
            citation_verdict=pl.when(blind_claim).then(None).otherwise(pl.col("citation_verdict")),
            citation_reason=pl.when(blind_claim).then(pl.lit(NO_CONTEXT_LOGGED)).otherwise(pl.col("citation_reason")),
        )
        .drop("_blind")
    )

    cited_ids = pl.concat(
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
    resolution = (
        _with_existence(cited_ids, in_corpus, in_context)
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
    pair_counts = all_pairs.group_by(_TRACE).agg(
        n_citation_pairs=pl.len(),
        n_supporting_pairs=(pl.col("pair_verdict") == "SUPPORTS").sum(),
        n_incomplete_pairs=pl.col("pair_verdict").is_null().sum(),
    )
    # In claim order, so the first failing claim named in a reason is the same in every run.
    claim_counts = (
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
    rows = rows.with_columns(
        pl.col(counts).fill_null(0).cast(pl.Int64),
        pl.col("dead_citation_ids").fill_null(pl.lit([], dtype=pl.List(pl.String))),
    ).with_columns(n_dead_citations=pl.col("dead_citation_ids").list.len().cast(pl.Int64))

    applies = (pl.col("n_cited_ids") > 0) | pl.lit(settings.citations_required)
    passes = (pl.col("n_supported_claims") == pl.col("n_claims")) & (pl.col("n_dead_citations") == 0)
    blind_trace = ~unanswered() & pl.col("_no_context")
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
    scored = pl.col("citation_stage").is_in(["pass", "fail"])

    def rate(numerator: str, denominator: str) -> pl.Expr:
        return pl.when(scored & (pl.col(denominator) > 0)).then(pl.col(numerator) / pl.col(denominator))

    scores = (
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
    return claims_out, scores


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
