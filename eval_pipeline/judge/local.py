"""The local judge: deterministic, versioned, no network; lexical entailment of a claim by one evidence sentence.

For each claim every evidence sentence is compared with it (features in `eval_pipeline.judge.text`):
- SUPPORTED: every content word of the claim (stemmed words, numbers, capitalized names) is in the sentence,
  every number keeps its unit (`14|day`, `49|$`), and both or neither are negated;
- CONTRADICTED: not supported, at least `contradiction_overlap` of the claim's non-numeric content words are
  in the sentence (it speaks of the same thing), and a slot conflicts: a number with the same unit but another
  value (durations, amounts, counts, years), another member of an exclusive group (annual/monthly, a month,
  a weekday, business/calendar days, a plan tier), another capitalized name in place of the claim's, or a
  negation on one side only;
- NOT_IN_EVIDENCE otherwise.
A supporting sentence wins over a contradicting one, which wins over the rest; ties go to the higher share of
covered claim words, then to the earlier chunk and sentence. The sentence used is returned as the quote
(null only when no sentence shares a content word with the claim).
Pairwise: each answer's claims are judged against the evidence; the answer with the higher supported share
wins, then the one with fewer contradictions, then more supported claims; otherwise a tie.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import Judge, evidence_sets
from eval_pipeline.judge.text import (
    pack_key,
    raw_token_rows,
    sentence_rows,
    slot_types,
    strip_doc_markers,
    text_features,
    vocabulary,
)
from eval_pipeline.scoring.claims import claims_of_texts

LOCAL_JUDGE_VERSION = "local-1.0"
LOCAL_JUDGE_MODEL = "local-lexical"
DEFAULT_CONTRADICTION_OVERLAP = 0.75

class LocalJudge(Judge):
    """Deterministic lexical judge (module docstring); `version` changes with its parameters."""

    def __init__(self, contradiction_overlap: float = DEFAULT_CONTRADICTION_OVERLAP) -> None:
        if not 0.0 < contradiction_overlap <= 1.0:
            raise ValueError("contradiction_overlap must be in (0, 1]")
        self.contradiction_overlap = contradiction_overlap
        self.model = LOCAL_JUDGE_MODEL
        suffix = "" if contradiction_overlap == DEFAULT_CONTRADICTION_OVERLAP else f"+overlap{contradiction_overlap:g}"
        self.version = LOCAL_JUDGE_VERSION + suffix

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        # Integer surrogates for the string keys keep the joins and group-bys below cheap.
        keys = requests.select("request_key", "evidence_key").with_row_index("rid")
        evidence_ids = keys.select("evidence_key").unique(maintain_order=True).with_row_index("eid")
        keys = keys.join(evidence_ids, on="evidence_key").select("rid", "eid", "request_key")
        claim_frame = requests.select(strip_doc_markers(pl.col("claim").fill_null("")).alias("claim_text")).with_row_index("rid")
        chunks = evidence_sets(requests).join(evidence_ids, on="evidence_key").drop("evidence_key")
        # Claims of one answer share their evidence, and answers share documents: each distinct text is split
        # and featurized once.
        texts = chunks.select("text").unique().with_row_index("text_id")
        sentences = sentence_rows(texts, ["text_id"], "text").with_row_index("sid")
        claim_raw = raw_token_rows(claim_frame, "rid", "claim_text")
        sentence_raw = raw_token_rows(sentences, "sid", "sentence")
        vocab = vocabulary(pl.concat([claim_raw["raw"], sentence_raw["raw"]]))
        claims, claim_words = text_features(claim_frame, "rid", "claim_text", "c_", claim_raw, vocab)
        sentence_features, sentence_words = text_features(sentences, "sid", "sentence", "s_", sentence_raw, vocab)
        chunk_index = chunks.join(texts, on="text").select("eid", "ev_pos", "doc_id", "text_id")
        # A text repeated within one evidence set counts once, at its first position: then a (claim, sentence)
        # pair has one ev_pos, and one integer key.
        first_chunks = chunk_index.group_by("eid", "text_id").agg(pl.col("ev_pos").min())
        # Inverted index: only (claim, sentence) pairs that share a content word are ever formed.
        index = sentence_words.join(sentences.select("sid", "text_id"), on="sid").select(pack_key("text_id", "tid").alias("_word"), "sid")
        matches = (
            claim_words.join(keys.select("rid", "eid"), on="rid")
            .join(first_chunks, on="eid")
            .select("rid", "ev_pos", "is_num", pack_key("text_id", "tid").alias("_word"))
            .join(index, on="_word")
        )
        pairs = (
            matches.group_by(pack_key("rid", "sid").alias("_pair"))
            .agg(pl.col("rid").first(), pl.col("sid").first(), pl.col("ev_pos").first(), covered=pl.len(),
                 covered_nonnum=(~pl.col("is_num")).sum())
            .drop("_pair")
            .join(claims.select("rid", "c_n_words", "c_n_nonnum"), on="rid")
        )
        best = self._best_sentence(pairs, claims, sentence_features, vocab.select("tid", "token").unique())
        return (
            keys.join(claims.select("rid", "c_n_words"), on="rid")
            .join(best, on="rid", how="left")
            .join(chunk_index.select("eid", "ev_pos", "doc_id"), on=["eid", "ev_pos"], how="left")
            .join(sentences.select("sid", "sentence"), on="sid", how="left")
            .join(chunks.group_by("eid").len("n_chunks"), on="eid", how="left")
            .select(
                "request_key",
                pl.col("verdict").fill_null("NOT_IN_EVIDENCE"),
                pl.col("sentence").alias("evidence_quote"),
                pl.col("doc_id").alias("evidence_doc_id"),
                pl.lit("ok").alias("status"),
                pl.when(pl.col("verdict").is_not_null())
                .then(pl.col("reason"))
                .when(pl.col("n_chunks").fill_null(0) == 0)
                .then(pl.lit("no evidence"))
                .when(pl.col("c_n_words") == 0)
                .then(pl.lit("the claim has no content words"))
                .otherwise(pl.lit("no evidence sentence shares a content word with the claim"))
                .alias("reason"),
                pl.lit(0.0).alias("cost_usd"),
                pl.lit(False).alias("cached"),
            )
        )

    def _best_sentence(self, pairs: pl.DataFrame, claims: pl.DataFrame, sentences: pl.DataFrame, names: pl.DataFrame) -> pl.DataFrame:
        """Per claim (rid): the deciding ev_pos and sentence id, the verdict and its reason (module docstring)."""
        share = pl.col("covered") / pl.col("c_n_words")
        topical = pl.when(pl.col("c_n_nonnum") == 0).then(1.0).otherwise(pl.col("covered_nonnum") / pl.col("c_n_nonnum"))
        pairs = pairs.with_columns(_share=share, _topical=topical)
        full = pl.col("covered") == pl.col("c_n_words")
        close = full | (pl.col("_topical") >= self.contradiction_overlap)
        # Only sentences that cover the claim, or speak of the same thing, can support or contradict it.
        candidates = (
            pairs.filter(close)
            .join(claims.select("rid", "c_slots", "c_ents", "c_words", "c_neg"), on="rid")
            .join(sentences.select("sid", "s_slots", "s_ents", "s_words", "s_neg"), on="sid")
            .with_columns(
                _missing_slots=pl.col("c_slots").list.set_difference("s_slots"),
                _extra_slots=pl.col("s_slots").list.set_difference("c_slots"),
                _missing_ents=pl.col("c_ents").list.set_difference("s_words"),
                _extra_ents=pl.col("s_ents").list.set_difference("c_words"),
                _negation_conflict=pl.col("c_neg") != pl.col("s_neg"),
            )
            .with_columns(
                _slot_conflict=slot_types(pl.col("_missing_slots")).list.set_intersection(slot_types(pl.col("_extra_slots"))).list.len() > 0,
                _entity_conflict=(pl.col("_missing_ents").list.len() > 0) & (pl.col("_extra_ents").list.len() > 0),
                _numbers_kept=~pl.col("_missing_slots").list.eval(pl.element().str.contains(r"^\d")).list.any(),
            )
        )
        supported = full & pl.col("_numbers_kept") & ~pl.col("_negation_conflict")
        contradicted = (pl.col("_topical") >= self.contradiction_overlap) & (
            pl.col("_slot_conflict") | pl.col("_entity_conflict") | pl.col("_negation_conflict")
        )
        keep = ["rid", "ev_pos", "sid", "c_n_words", "_share"]
        judged = candidates.select(
            *keep, "_missing_slots", "_extra_slots", "_missing_ents", "_extra_ents", "_slot_conflict", "_entity_conflict",
            pl.when(supported).then(2).when(contradicted).then(1).otherwise(0).alias("_priority"),
        )
        ranked = pl.concat([judged, pairs.filter(~close).select(*keep, pl.lit(0).alias("_priority"))], how="diagonal_relaxed")
        # Support beats contradiction beats the rest, then the higher share of covered words (share <= 1, so
        # priority * 2 + share orders both); the remaining ties go to the earlier chunk and sentence.
        score = pl.col("_priority") * 2 + pl.col("_share")
        best = (
            ranked.filter(score == score.max().over("rid"))
            .sort("rid", "ev_pos", "sid")
            .unique("rid", keep="first", maintain_order=True)
            .join(claims.select("rid", "c_words"), on="rid")
            .join(sentences.select("sid", "s_words"), on="sid")
            .with_columns(_missing=pl.col("c_words").list.set_difference("s_words"))
        )
        best = _with_names(best, ["_missing", "_missing_ents", "_extra_ents"], names)
        reason = (
            pl.when(pl.col("_priority") == 2)
            .then(pl.format("all {} content words, numbers and names of the claim are in the sentence", "c_n_words"))
            .when((pl.col("_priority") == 1) & pl.col("_slot_conflict"))
            .then(pl.format("conflicting value: claim {} vs evidence {}", _listed("_missing_slots"), _listed("_extra_slots")))
            .when((pl.col("_priority") == 1) & pl.col("_entity_conflict"))
            .then(pl.format("conflicting name: claim {} vs evidence {}", "_missing_ents", "_extra_ents"))
            .when(pl.col("_priority") == 1)
            .then(pl.lit("negation differs between claim and evidence"))
            .otherwise(pl.format("not in the closest evidence sentence: {}", "_missing"))
        )
        verdict = pl.col("_priority").replace_strict({2: "SUPPORTED", 1: "CONTRADICTED", 0: "NOT_IN_EVIDENCE"}, return_dtype=pl.String)
        return best.select("rid", "ev_pos", "sid", verdict.alias("verdict"), reason.alias("reason"))

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        sides = pl.concat(
            [
                requests.select("request_key", "evidence", pl.lit(side).alias("side"), pl.col(column).alias("answer"))
                for side, column in (("A", "answer_a"), ("B", "answer_b"))
            ]
        )
        claims = claims_of_texts(sides, ["request_key", "side"], "answer")
        claim_requests = claims.join(sides.select("request_key", "side", "evidence"), on=["request_key", "side"]).select(
            pl.format("{}\x1f{}\x1f{}", "request_key", "side", "claim_index").alias("claim_key"),
            "request_key",
            "side",
            "claim",
            "evidence",
        )
        verdicts = self.judge_claims(claim_requests.rename({"claim_key": "request_key", "request_key": "pair_key"}).select("request_key", "claim", "evidence"))
        per_side = (
            claim_requests.join(verdicts.select(pl.col("request_key").alias("claim_key"), "verdict"), on="claim_key")
            .group_by("request_key", "side")
            .agg(
                n=pl.len(),
                supported=(pl.col("verdict") == "SUPPORTED").sum(),
                contradicted=(pl.col("verdict") == "CONTRADICTED").sum(),
            )
        )
        score = requests.select("request_key")
        for side in ("A", "B"):
            s = side.lower()
            score = score.join(
                per_side.filter(pl.col("side") == side).select(
                    "request_key",
                    pl.col("n").alias(f"n_{s}"),
                    pl.col("supported").alias(f"sup_{s}"),
                    pl.col("contradicted").alias(f"con_{s}"),
                ),
                on="request_key",
                how="left",
            )
        score = score.with_columns(pl.col(r"^(n|sup|con)_[ab]$").fill_null(0).cast(pl.Int64))
        # Supported shares compared exactly by cross-multiplying (an answer without claims counts as 1/1).
        share = {s: (pl.when(pl.col(f"n_{s}") == 0).then(1).otherwise(pl.col(f"sup_{s}")),
                     pl.when(pl.col(f"n_{s}") == 0).then(1).otherwise(pl.col(f"n_{s}"))) for s in "ab"}
        comparisons = [
            share["a"][0] * share["b"][1] - share["b"][0] * share["a"][1],
            pl.col("con_b") - pl.col("con_a"),
            pl.col("sup_a") - pl.col("sup_b"),
        ]
        preference = pl.when(comparisons[0] > 0).then(pl.lit("A")).when(comparisons[0] < 0).then(pl.lit("B"))
        for comparison in comparisons[1:]:
            preference = preference.when(comparison > 0).then(pl.lit("A")).when(comparison < 0).then(pl.lit("B"))
        return score.select(
            "request_key",
            preference.otherwise(pl.lit("tie")).alias("preference"),
            pl.lit("ok").alias("status"),
            pl.format(
                "A: {}/{} supported, {} contradicted; B: {}/{} supported, {} contradicted",
                "sup_a", "n_a", "con_a", "sup_b", "n_b", "con_b",
            ).alias("reason"),
            pl.lit(0.0).alias("cost_usd"),
            pl.lit(False).alias("cached"),
        )


def _listed(column: str) -> pl.Expr:
    return pl.col(column).list.sort().list.join(", ")


def _with_names(frame: pl.DataFrame, columns: list[str], names: pl.DataFrame) -> pl.DataFrame:
    """Token-id list columns of a (rid-keyed) frame replaced by their tokens, sorted and comma-joined."""
    for column in columns:
        joined = (
            frame.select("rid", column)
            .explode(column, keep_nulls=False, empty_as_null=False)
            .join(names, left_on=column, right_on="tid")
            .group_by("rid")
            .agg(pl.col("token").sort().str.join(", ").alias(column))
        )
        frame = frame.drop(column).join(joined, on="rid", how="left")
    return frame
