"""The judge interface: claims against evidence, and pairwise preference, behind one contract for every backend.

A judge sees only the claim (or the two answers and the question) and the evidence text, never expected
answers. Whatever the backend, the quote it gives is checked against the evidence here
(white space folded, case kept): a SUPPORTED or CONTRADICTED verdict whose quote is not in the evidence
becomes NOT_IN_EVIDENCE with `quote_verified = false`. A request the backend could not finish is
`status = incomplete` with a null verdict and a reason, never a verdict.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import polars as pl

from eval_pipeline.judge.text import normalize_ws, with_distinct

VERDICTS = ("SUPPORTED", "CONTRADICTED", "NOT_IN_EVIDENCE")
PREFERENCES = ("A", "B", "tie")

EVIDENCE = pl.List(pl.Struct({"doc_id": pl.String, "text": pl.String}))

# evidence_key (optional): requests that share it share their evidence (the claims of one answer), so a
# backend reads that evidence once; null means the request's own key.
REQUEST_SCHEMA: dict[str, pl.DataType] = {
    "request_key": pl.String,
    "claim": pl.String,
    "evidence": EVIDENCE,
    "evidence_key": pl.String,
}

COST_SCHEMA: dict[str, pl.DataType] = {
    "input_tokens": pl.Int64,
    "output_tokens": pl.Int64,
    "cost_usd": pl.Float64,
    "latency_ms": pl.Float64,
    "cached": pl.Boolean,
}

# What a backend returns before the shared quote check. `score`: the backend's support score in [0, 1] where it
# gives one (local and model judges), null otherwise.
RAW_RESULT_SCHEMA: dict[str, pl.DataType] = {
    "request_key": pl.String,
    "verdict": pl.String,
    "score": pl.Float64,
    "evidence_quote": pl.String,
    "evidence_doc_id": pl.String,
    "status": pl.String,
    "reason": pl.String,
    **COST_SCHEMA,
}

RESULT_SCHEMA: dict[str, pl.DataType] = {
    "request_key": pl.String,
    "verdict": pl.String,
    "score": pl.Float64,
    "evidence_quote": pl.String,
    "evidence_doc_id": pl.String,
    "quote_verified": pl.Boolean,
    "judge_version": pl.String,
    "judge_model": pl.String,
    "status": pl.String,
    "reason": pl.String,
    **COST_SCHEMA,
}

PAIR_REQUEST_SCHEMA: dict[str, pl.DataType] = {
    "request_key": pl.String,
    "question": pl.String,
    "answer_a": pl.String,
    "answer_b": pl.String,
    "evidence": EVIDENCE,
}

RAW_PAIR_RESULT_SCHEMA: dict[str, pl.DataType] = {
    "request_key": pl.String,
    "preference": pl.String,
    "status": pl.String,
    "reason": pl.String,
    **COST_SCHEMA,
}

PAIR_RESULT_SCHEMA: dict[str, pl.DataType] = {
    **RAW_PAIR_RESULT_SCHEMA,
    "judge_version": pl.String,
    "judge_model": pl.String,
}


class JudgeConfigError(ValueError):
    """A judge was configured in a way it cannot run (unknown backend, missing key, bad option)."""


def conform(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """The frame with exactly the schema's columns, in order, cast to its types (absent columns null)."""
    return frame.select(
        [
            (pl.col(name) if name in frame.columns else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in schema.items()
        ]
    )


def evidence_sets(requests: pl.DataFrame) -> pl.DataFrame:
    """One row per evidence chunk of each distinct evidence_key: evidence_key, ev_pos (0-based), doc_id, text."""
    return (
        requests.select("evidence_key", "evidence")
        .unique("evidence_key", keep="first", maintain_order=True)
        .explode("evidence", keep_nulls=False, empty_as_null=False)
        .with_columns(ev_pos=pl.int_range(pl.len(), dtype=pl.Int64).over("evidence_key"))
        .select(
            "evidence_key", "ev_pos", pl.col("evidence").struct.field("doc_id"), pl.col("evidence").struct.field("text")
        )
    )


QUOTE_PARTS = " … "


def _found_in(rows: pl.DataFrame) -> pl.DataFrame:
    """(request_key, part) → doc_id of the first chunk (in `rows` order) whose folded text holds the folded part."""
    return (
        rows.filter(pl.col("_text").str.contains(pl.col("_part"), literal=True))
        .group_by("request_key", "part", maintain_order=True)
        .agg(pl.col("doc_id").first().alias("_found_doc"))
    )


def verify_quotes(requests: pl.DataFrame, raw: pl.DataFrame) -> pl.DataFrame:
    """Raw verdicts with quote_verified set and unverifiable SUPPORTED/CONTRADICTED downgraded to NOT_IN_EVIDENCE.

    A quote may join passages with " … "; it is verified when every passage is in the evidence.
    """
    raw = with_distinct(raw, "evidence_quote", _quote=normalize_ws(pl.col("evidence_quote")))
    quoted = (
        raw.filter((pl.col("status") == "ok") & (pl.col("_quote").str.len_chars() > 0))
        .select("request_key", "_quote", "evidence_doc_id")
        .join(requests.select("request_key", "evidence_key"), on="request_key")
    )
    if quoted["request_key"].n_unique() == quoted.height:
        # One quote per request (as every backend answers): a passage's number is its place in the quote, which
        # needs no window over 100k groups.
        parts = (
            pl.col("_quote")
            .str.split(QUOTE_PARTS)
            .list.eval(pl.element().str.strip_chars().filter(pl.element().str.len_chars() > 0))
        )
        quoted = (
            quoted.with_columns(_part=parts)
            .with_columns(part=pl.int_ranges(pl.col("_part").list.len(), dtype=pl.Int32))
            .explode("_part", "part", empty_as_null=False)
        )
    else:
        quoted = (
            quoted.with_columns(_part=pl.col("_quote").str.split(QUOTE_PARTS))
            .explode("_part")
            .with_columns(_part=pl.col("_part").str.strip_chars())
            .filter(pl.col("_part").str.len_chars() > 0)
            .with_columns(part=pl.int_range(pl.len(), dtype=pl.Int32).over("request_key"))
        )
    chunks = evidence_sets(requests.join(quoted.select("evidence_key").unique(), on="evidence_key", how="semi"))
    chunks = with_distinct(chunks, "text", _text=normalize_ws(pl.col("text"))).drop("text")
    # The chunk the judge named is tried first; only passages not found there are searched in every chunk.
    named = _found_in(
        quoted.join(chunks, left_on=["evidence_key", "evidence_doc_id"], right_on=["evidence_key", "doc_id"]).rename(
            {"evidence_doc_id": "doc_id"}
        )
    )
    rest = quoted.join(named, on=["request_key", "part"], how="anti").select(
        "request_key", "part", "evidence_key", "_part"
    )
    anywhere = _found_in(rest.join(chunks, on="evidence_key").sort("request_key", "part", "ev_pos"))
    found = (
        quoted.select("request_key", "part")
        .join(pl.concat([named, anywhere]), on=["request_key", "part"], how="left")
        .sort("request_key", "part")
        .group_by("request_key")
        .agg(_found_doc=pl.when(pl.col("_found_doc").is_not_null().all()).then(pl.col("_found_doc").first()))
    )
    ok = pl.col("status") == "ok"
    verified = pl.col("_found_doc").is_not_null()
    claimed = pl.col("verdict").is_in(["SUPPORTED", "CONTRADICTED"])
    downgraded = ok & claimed & ~verified
    no_quote = pl.col("_quote").fill_null("").str.len_chars() == 0
    return (
        raw.join(found, on="request_key", how="left")
        .with_columns(
            verdict=pl.when(~ok)
            .then(None)
            .when(downgraded)
            .then(pl.lit("NOT_IN_EVIDENCE"))
            .otherwise(pl.col("verdict")),
            quote_verified=pl.when(ok).then(verified),
            evidence_doc_id=pl.coalesce("_found_doc", "evidence_doc_id"),
            reason=pl.when(downgraded & no_quote)
            .then(pl.format("no evidence quote given: {} downgraded to NOT_IN_EVIDENCE", pl.col("verdict")))
            .when(downgraded)
            .then(pl.format("quote not found in the evidence: {} downgraded to NOT_IN_EVIDENCE", pl.col("verdict")))
            .otherwise(pl.col("reason")),
        )
        .drop("_quote", "_found_doc")
    )


def _invalid_verdicts_incomplete(raw: pl.DataFrame) -> pl.DataFrame:
    bad = (pl.col("status") == "ok") & ~pl.col("verdict").is_in(list(VERDICTS)).fill_null(False)
    return raw.with_columns(
        status=pl.when(bad).then(pl.lit("incomplete")).otherwise(pl.col("status")),
        reason=pl.when(bad)
        .then(pl.format("judge returned an invalid verdict {}", pl.col("verdict").fill_null("null")))
        .otherwise(pl.col("reason")),
        verdict=pl.when(bad).then(None).otherwise(pl.col("verdict")),
    )


class Judge(ABC):
    """A grounding judge: `judge_claims` gives a verdict per claim request, `judge_pairs` a preference per pair."""

    version: str
    model: str
    # Whether the same request always gets the same verdict (then self-consistency is 1 by construction).
    deterministic: bool = False

    def uncached(self) -> Judge:
        """This judge without any verdict cache, to ask the same requests again (self-consistency)."""
        return self

    def judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        """RESULT_SCHEMA rows, one per request (REQUEST_SCHEMA: request_key, claim, evidence list of {doc_id, text})."""
        requests = (
            conform(requests, REQUEST_SCHEMA)
            .unique("request_key", keep="first", maintain_order=True)
            .with_columns(evidence_key=pl.coalesce("evidence_key", "request_key"))
        )
        if requests.is_empty():
            return pl.DataFrame(schema=RESULT_SCHEMA)
        raw = conform(self._judge_claims(requests), RAW_RESULT_SCHEMA)
        missing = requests.join(raw, on="request_key", how="anti").select("request_key")
        raw = pl.concat(
            [
                raw,
                conform(
                    missing.with_columns(status=pl.lit("incomplete"), reason=pl.lit("the judge returned no result")),
                    RAW_RESULT_SCHEMA,
                ),
            ]
        )
        judged = verify_quotes(requests, _invalid_verdicts_incomplete(raw))
        return conform(
            judged.with_columns(judge_version=pl.lit(self.version), judge_model=pl.lit(self.model)), RESULT_SCHEMA
        )

    def could_support(self, requests: pl.DataFrame) -> pl.DataFrame:
        """request_key, could_support: false only where this judge cannot find the claim SUPPORTED by that evidence,
        known without asking (a backend with an exact bound says so); such a request need not be asked when only support
        matters. The default knows no bound: every request could be supported."""
        keys = conform(requests, REQUEST_SCHEMA).select("request_key").unique(maintain_order=True)
        return keys.with_columns(could_support=pl.lit(True))

    def judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        """PAIR_RESULT_SCHEMA rows: which answer (A, B or tie) is better grounded in the evidence and answers the
        question."""
        requests = conform(requests, PAIR_REQUEST_SCHEMA).unique("request_key", keep="first", maintain_order=True)
        if requests.is_empty():
            return pl.DataFrame(schema=PAIR_RESULT_SCHEMA)
        raw = conform(self._judge_pairs(requests), RAW_PAIR_RESULT_SCHEMA)
        bad = (pl.col("status") == "ok") & ~pl.col("preference").is_in(list(PREFERENCES)).fill_null(False)
        raw = raw.with_columns(
            status=pl.when(bad).then(pl.lit("incomplete")).otherwise(pl.col("status")),
            reason=pl.when(bad).then(pl.lit("judge returned an invalid preference")).otherwise(pl.col("reason")),
            preference=pl.when(bad | (pl.col("status") != "ok")).then(None).otherwise(pl.col("preference")),
        )
        return conform(
            raw.with_columns(judge_version=pl.lit(self.version), judge_model=pl.lit(self.model)), PAIR_RESULT_SCHEMA
        )

    @abstractmethod
    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        """Backend verdicts (RAW_RESULT_SCHEMA) for de-duplicated requests."""

    @abstractmethod
    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        """Backend preferences (RAW_PAIR_RESULT_SCHEMA) for de-duplicated pair requests."""
