"""The local judge: deterministic, no network; a graded lexical support score per claim, thresholds from a profile.

Features of claims and evidence sentences are those of `eval_pipeline.judge.lexical` (`local_words`); the
choice of sentences is in `local_choice`, the conflicts in `local_conflicts`. For each claim:
- **Evidence.** Up to four evidence sentences are chosen greedily, anywhere in the claim's evidence (adjacent or
  not, one chunk or several): each time the sentence that holds the most claim words not yet found, ties to the
  earlier chunk and sentence. The quote is those sentences in evidence order joined by " … " (each part verified).
- **Score** = claim words found / content words of the claim, halved for every number and every opinion word
  (think, great, maybe …) of the claim that is not in the chosen sentences, halved for every name that is not
  there (adjacent capitalised words are one name, present when one of its words is; each missing word of a
  present name costs 0.3 of the score), and halved once more when a conflict is found; in [0, 1].
- **Conflicts**, read in the chosen sentences: a number whose unit (currency, %, year, date, or the neighbouring
  word in its clause) the evidence gives another value; a word of an exclusive group (annual/monthly, a month,
  a weekday, business/calendar days, a plan tier) where the evidence has another member; a name of the claim
  missing where the first sentence has another name beside one of its neighbouring words (CEO John Smith vs
  CEO Jane Doe); a word found on both sides but negated on one side only (`not refundable`, `no fee`;
  `rainfall is non-existent in Egypt` negates nothing about Egypt).
- **Verdict**: CONTRADICTED when a conflict is found and at least `contradiction_overlap` of the claim's non-numeric
  words (those in conflict aside) are in the evidence; else SUPPORTED when score ≥ the profile's `support` threshold
  (above 0.5, so a missing number, name or opinion, or a conflict, never passes); else NOT_IN_EVIDENCE. Every verdict
  has a reason naming what was found, missing or in conflict.
Pairwise: each answer's claims are judged against the evidence; the answer with the higher supported share
wins, then the one with fewer contradictions, then more supported claims; otherwise a tie.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import Judge, evidence_sets
from eval_pipeline.judge.lexical import annotate
from eval_pipeline.judge.local_bound import support_bound
from eval_pipeline.judge.local_choice import MAX_EVIDENCE_SENTENCES, choose_for_requests
from eval_pipeline.judge.local_conflicts import find_conflicts
from eval_pipeline.judge.local_words import claim_entities, claim_words, featurized
from eval_pipeline.judge.profile import JudgeProfile, default_profile
from eval_pipeline.judge.text import strip_doc_markers

LOCAL_JUDGE_BASE = "local-2.0"
LOCAL_JUDGE_MODEL = "local-lexical"
QUOTE_JOINER = " … "
# Score factors (module docstring). Every factor of 0.5 keeps the score at or below half, and profile thresholds
# are above half: a missing number, name or opinion, or a conflict, never passes.
NUMBER_PENALTY = 0.5
NAME_PENALTY = 0.5
PARTIAL_NAME_PENALTY = 0.7
OPINION_PENALTY = 0.5
CONFLICT_PENALTY = 0.5


class LocalJudge(Judge):
    """Deterministic lexical judge (module docstring); `version` carries the profile's digest."""

    deterministic = True

    def __init__(self, profile: JudgeProfile | None = None, contradiction_overlap: float | None = None) -> None:
        profile = profile or default_profile("local")
        if contradiction_overlap is not None:
            profile = JudgeProfile(
                backend="local",
                support_threshold=profile.support_threshold,
                contradiction_overlap=contradiction_overlap,
                source=profile.source,
                fitted=profile.fitted,
            )
        self.profile = profile
        self.support_threshold = profile.support_threshold
        self.contradiction_overlap = profile.contradiction_overlap
        self.model = LOCAL_JUDGE_MODEL
        self.version = f"{LOCAL_JUDGE_BASE}+{profile.digest}"

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        # Requests repeat claim texts (one fact in many answers) and evidence texts (one document in many
        # contexts): claims and sentences are featurized once per distinct text, and a verdict is decided once
        # per distinct (claim, chosen sentences), the only inputs it depends on.
        claims = (
            requests.select(pl.col("claim").fill_null(""))
            .unique()
            .with_columns(claim_text=strip_doc_markers(pl.col("claim")))
        )
        claim_ids = claims.select("claim_text").unique(maintain_order=True).with_row_index("cid")
        claims = claims.join(claim_ids, on="claim_text").select("claim", "cid")
        keys = requests.select("request_key", "evidence_key", pl.col("claim").fill_null("")).with_row_index("rid")
        evidence_ids = keys.select("evidence_key").unique(maintain_order=True).with_row_index("eid")
        keys = (
            keys.join(evidence_ids, on="evidence_key")
            .join(claims, on="claim")
            .select("rid", "eid", "cid", "request_key")
        )
        chunks = evidence_sets(requests).join(evidence_ids, on="evidence_key").drop("evidence_key")
        texts = chunks.select("text").unique().with_row_index("text_id")
        sentences, claim_tokens, sentence_tokens, vocab = featurized(claim_ids, texts)
        claim_rows = annotate(claim_tokens, vocab, "cid")
        sentence_rows_ = annotate(sentence_tokens, vocab, "sid")
        words = claim_words(claim_rows.rename({"cid": "rid"})).rename({"rid": "cid"})
        chunk_index = chunks.join(texts, on="text").select("eid", "ev_pos", "doc_id", "text_id")
        # A text repeated within one evidence set counts once, at its first position.
        first_chunks = chunk_index.group_by("eid", "text_id").agg(pl.col("ev_pos").min())
        sentence_words = sentence_rows_.filter(pl.col("is_content")).select("sid", "tid").unique()
        chosen = choose_for_requests(keys, words, first_chunks, sentence_words, sentences)
        verdicts = self._decide_distinct(keys, words, claim_rows, chosen, sentence_words, sentence_rows_)
        quoted = (
            chosen.join(sentences.select("sid", "sentence"), on="sid")
            .join(keys.select("rid", "eid"), on="rid")
            .join(chunk_index.select("eid", "ev_pos", "doc_id"), on=["eid", "ev_pos"])
        )
        # Most quotes are one sentence: only those of several are ordered and joined.
        several = chosen.filter(pl.col("round") > 0).select("rid").unique()
        quotes = pl.concat(
            [
                quoted.join(several, on="rid", how="anti").select(
                    "rid", evidence_quote="sentence", evidence_doc_id="doc_id"
                ),
                quoted.join(several, on="rid", how="semi")
                .sort("rid", "ev_pos", "sid")
                .group_by("rid", maintain_order=True)
                .agg(
                    evidence_quote=pl.col("sentence").str.join(QUOTE_JOINER), evidence_doc_id=pl.col("doc_id").first()
                ),
            ]
        )
        return (
            keys.join(verdicts, on="rid", how="left")
            .join(quotes, on="rid", how="left")
            .join(chunks.group_by("eid").len("n_chunks"), on="eid", how="left")
            .join(words.group_by("cid").len("n_words"), on="cid", how="left")
            .select(
                "request_key",
                pl.col("verdict").fill_null("NOT_IN_EVIDENCE"),
                pl.col("score").fill_null(0.0),
                "evidence_quote",
                "evidence_doc_id",
                pl.lit("ok").alias("status"),
                pl.when(pl.col("verdict").is_not_null())
                .then(pl.col("reason"))
                .when(pl.col("n_chunks").fill_null(0) == 0)
                .then(pl.lit("no evidence"))
                .when(pl.col("n_words").fill_null(0) == 0)
                .then(pl.lit("the claim has no content words"))
                .otherwise(pl.lit("support 0: no evidence sentence shares a word with the claim"))
                .alias("reason"),
                pl.lit(0.0).alias("cost_usd"),
                pl.lit(False).alias("cached"),
            )
        )

    def _decide_distinct(
        self,
        keys: pl.DataFrame,
        words: pl.DataFrame,
        claim_rows: pl.DataFrame,
        chosen: pl.DataFrame,
        sentence_words: pl.DataFrame,
        sentence_rows_: pl.DataFrame,
    ) -> pl.DataFrame:
        """rid → verdict, score, reason, decided once per distinct (claim text, sentence chosen in each round)."""
        rounds = [f"_s{r}" for r in range(MAX_EVIDENCE_SENTENCES)]
        signature = keys.select("rid", "cid")
        for r, name in enumerate(rounds):
            signature = signature.join(
                chosen.filter(pl.col("round") == r).select("rid", pl.col("sid").alias(name)), on="rid", how="left"
            )
        signature = signature.filter(pl.col(rounds[0]).is_not_null())
        decisions = signature.select("cid", *rounds).unique().with_row_index("did")
        signature = signature.join(decisions, on=["cid", *rounds], nulls_equal=True).select("rid", "did")
        # The decision frames are keyed by `rid` as _decide reads them, holding a decision id.
        did_claim = decisions.select(pl.col("did").alias("rid"), "cid")
        d_chosen = pl.concat(
            [
                decisions.filter(pl.col(name).is_not_null()).select(
                    pl.col("did").alias("rid"), pl.col(name).alias("sid"), pl.lit(r, dtype=pl.Int32).alias("round")
                )
                for r, name in enumerate(rounds)
            ]
        )
        d_words = did_claim.join(words, on="cid").drop("cid")
        d_claim_rows = (
            did_claim.join(claim_rows, on="cid")
            .sort("rid", "pos")
            .select([pl.col("rid") if c == "cid" else pl.col(c) for c in claim_rows.columns])
        )
        d_matches = (
            d_chosen.select("rid", "sid")
            .join(sentence_words, on="sid")
            .join(d_words.select("rid", "tid"), on=["rid", "tid"], how="semi")
        )
        verdicts = self._decide(d_words, d_claim_rows, d_chosen, d_matches, sentence_rows_)
        return signature.join(verdicts.rename({"rid": "did"}), on="did").drop("did")

    def _decide(
        self,
        words: pl.DataFrame,
        claim_rows: pl.DataFrame,
        chosen: pl.DataFrame,
        matches: pl.DataFrame,
        sentence_rows_: pl.DataFrame,
    ) -> pl.DataFrame:
        """rid → verdict, score, reason for every claim with at least one chosen sentence."""
        covered = matches.join(chosen.select("rid", "sid"), on=["rid", "sid"], how="semi").select("rid", "tid").unique()
        found = words.join(covered.with_columns(_found=pl.lit(True)), on=["rid", "tid"], how="left").with_columns(
            pl.col("_found").fill_null(False)
        )
        # In claim order: a name is shown with its words as the claim writes them (John Smith, never Smith John).
        entities = (
            claim_entities(claim_rows)
            .join(found.select("rid", "tid", "_found"), on=["rid", "tid"], maintain_order="left")
            .with_columns(_any=pl.col("_found").any().over("rid", "entity"))
        )
        # A name none of whose words is in the evidence is reported as a name, not word by word.
        absent_names = (
            entities.filter(~pl.col("_any")).select("rid", "tid").unique().with_columns(_absent_name=pl.lit(True))
        )
        found = found.join(absent_names, on=["rid", "tid"], how="left").with_columns(
            pl.col("_absent_name").fill_null(False)
        )
        missing = ~pl.col("_found")
        summary = found.group_by("rid").agg(
            n_words=pl.len(),
            n_found=pl.col("_found").sum(),
            n_nonnum=(~pl.col("is_num")).sum(),
            n_found_nonnum=(pl.col("_found") & ~pl.col("is_num")).sum(),
            missing_numbers=pl.col("shown").filter(missing & pl.col("is_num")).sort(),
            missing_opinions=pl.col("shown").filter(missing & pl.col("is_subjective")).sort(),
            missing_words=pl.col("shown")
            .filter(missing & ~pl.col("is_num") & ~pl.col("is_subjective") & ~pl.col("_absent_name"))
            .sort(),
        )
        names = (
            entities.group_by("rid", "entity")
            .agg(pl.col("_any").first(), _partial=(~pl.col("_found")).sum(), shown=pl.col("shown").str.join(" "))
            .group_by("rid")
            .agg(
                missing_names=pl.col("shown").filter(~pl.col("_any")).sort(),
                n_partial_names=pl.col("_partial").filter(pl.col("_any")).sum(),
            )
        )
        summary = summary.join(names, on="rid", how="left").with_columns(
            pl.col("missing_names").fill_null(pl.lit([], dtype=pl.List(pl.String))),
            pl.col("n_partial_names").fill_null(0),
        )
        conflicts = find_conflicts(claim_rows, chosen, words, found, sentence_rows_)
        decided = (
            summary.join(chosen.group_by("rid").agg(n_sentences=pl.len()), on="rid")
            .join(conflicts, on="rid", how="left")
            .with_columns(
                pl.col("value_conflicts", "group_conflicts", "name_conflicts", "negated_words").fill_null(
                    pl.lit([], dtype=pl.List(pl.String))
                ),
                pl.col("negation_conflict").fill_null(False),
            )
        )
        has_conflict = (
            (
                pl.col("value_conflicts").list.len()
                + pl.col("group_conflicts").list.len()
                + pl.col("name_conflicts").list.len()
            )
            > 0
        ) | pl.col("negation_conflict")
        # The claim's words in conflict are missing by nature; how much of the rest is found says whether the
        # evidence speaks of the same thing.
        in_conflict = pl.col("_group_tids").list.len().fill_null(0) + pl.col("_name_tids").list.len().fill_null(0)
        rest = pl.col("n_nonnum") - in_conflict
        topical = pl.when(rest <= 0).then(1.0).otherwise(pl.col("n_found_nonnum") / rest)
        contradicted = has_conflict & (topical >= self.contradiction_overlap)
        score = (
            pl.col("n_found")
            / pl.col("n_words")
            * pl.lit(NUMBER_PENALTY).pow(pl.col("missing_numbers").list.len())
            * pl.lit(NAME_PENALTY).pow(pl.col("missing_names").list.len())
            * pl.lit(PARTIAL_NAME_PENALTY).pow(pl.col("n_partial_names"))
            * pl.lit(OPINION_PENALTY).pow(pl.col("missing_opinions").list.len())
            * pl.when(pl.col("_conflict")).then(CONFLICT_PENALTY).otherwise(1.0)
        ).round(4)
        decided = decided.with_columns(_contradicted=contradicted, _conflict=has_conflict).with_columns(score=score)
        supported = ~pl.col("_contradicted") & (pl.col("score") >= self.support_threshold)
        verdict = (
            pl.when(pl.col("_contradicted"))
            .then(pl.lit("CONTRADICTED"))
            .when(supported)
            .then(pl.lit("SUPPORTED"))
            .otherwise(pl.lit("NOT_IN_EVIDENCE"))
        )
        return (
            decided.with_columns(verdict=verdict)
            .with_columns(reason=self._reason())
            .select("rid", "verdict", "score", "reason")
        )

    def _reason(self) -> pl.Expr:
        """A reason a person can check: the score against the threshold, what was found, missing or in conflict."""
        threshold = f"{self.support_threshold:g}"
        found = pl.format("{} of {} claim words in {} evidence sentence(s)", "n_found", "n_words", "n_sentences")
        details = pl.concat_str(
            [
                _listing("value_conflicts", "; conflicting value "),
                _listing("group_conflicts", "; conflicting "),
                _listing("name_conflicts", "; conflicting name "),
                _listing("negated_words", "; negated on one side only: "),
                _listing("missing_numbers", "; number not in the evidence: "),
                _listing("missing_names", "; name not in the evidence: "),
                _listing("missing_opinions", "; opinion not in the evidence: "),
                _listing("missing_words", "; not found: "),
            ]
        )
        head = (
            pl.when(pl.col("verdict") == "CONTRADICTED")
            .then(pl.format("contradicted (support {})", pl.col("score").round(4)))
            .when(pl.col("verdict") == "SUPPORTED")
            .then(pl.format("support {} >= {}", pl.col("score").round(4), pl.lit(threshold)))
            .otherwise(pl.format("support {} < {}", pl.col("score").round(4), pl.lit(threshold)))
        )
        return pl.concat_str([head, pl.lit(": "), found, details])

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        from eval_pipeline.judge.pairwise import prefer_by_claims

        return prefer_by_claims(self, requests)

    def could_support(self, requests: pl.DataFrame) -> pl.DataFrame:
        """request_key, could_support: false when even the evidence's best sentences score below the support threshold
        (judge.local_bound)."""
        return support_bound(
            requests,
            self.support_threshold,
            number_penalty=NUMBER_PENALTY,
            name_penalty=NAME_PENALTY,
            opinion_penalty=OPINION_PENALTY,
        )


def _listing(column: str, prefix: str) -> pl.Expr:
    return (
        pl.when(pl.col(column).list.len() > 0)
        .then(pl.lit(prefix) + pl.col(column).list.join(", "))
        .otherwise(pl.lit(""))
    )
