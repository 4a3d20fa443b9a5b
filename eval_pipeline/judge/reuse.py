"""Verdicts reused for unchanged requests: a claim with the same evidence, under the same judge version, is judged once.

A request's digest is two seeded 64-bit polars hashes of (claim, evidence) — 128 bits, computed in columns. Hash
values are only stable within one polars release, so stored rows carry `hash_scheme` and a polars upgrade simply
judges again. Requests that share a digest within one batch are also sent once. Only completed verdicts are stored:
an incomplete call is asked again next time, never replayed.

A verdict keeps what was recorded when it was made: a reused verdict's tokens, cost and latency are those of the call
that made it (null stays null), in `judge_verdicts` and in the claim rows, so a rerun on the same warehouse writes the
rows a fresh run writes. `cached` marks a claim that repeats an identical request of its own run (no call of its
own; its counted costs are 0); whether the run reused a verdict from an earlier one is the run's use, counted in
`reused` (the claims materialization's `judge_reused`), not a property of the row.
"""

from __future__ import annotations

import polars as pl

from eval_pipeline.judge.base import RAW_RESULT_SCHEMA, Judge, conform

# The table of every run's verdicts, read back for reuse by later runs and by `eval-pipeline judge-estimate`.
VERDICT_STORE = "judge_verdicts"
# The verdicts of per-family support (docs/evidence_diversity.md), kept apart so the claim verdicts' counts stay theirs.
FAMILY_VERDICT_STORE = "judge_family_verdicts"
HASH_SCHEME = f"polars-{pl.__version__}/struct-hash-1"
DIGEST = ("digest_a", "digest_b")
COSTS = {"input_tokens": pl.Int64, "output_tokens": pl.Int64, "cost_usd": pl.Float64, "latency_ms": pl.Float64}
_SEEDS = (0x5EED_A, 0x5EED_B)
RESULT_COLUMNS = tuple(name for name in RAW_RESULT_SCHEMA if name not in ("request_key", "cached"))
STORED_SCHEMA: dict[str, pl.DataType] = {
    "judge_version": pl.String,
    "hash_scheme": pl.String,
    "digest_a": pl.Int64,
    "digest_b": pl.Int64,
    **{name: RAW_RESULT_SCHEMA[name] for name in RESULT_COLUMNS},
}


def with_digests(requests: pl.DataFrame) -> pl.DataFrame:
    """The requests with digest_a, digest_b; evidence is hashed once per evidence_key."""
    evidence = (
        requests.select("evidence_key", "evidence")
        .unique("evidence_key", keep="first")
        .select("evidence_key", *(pl.col("evidence").hash(seed).alias(f"_ev{i}") for i, seed in enumerate(_SEEDS)))
    )
    keyed = pl.struct("claim", "_ev0", "_ev1")
    return (
        requests.join(evidence, on="evidence_key", how="left")
        # Delta has no unsigned integers: the same 64 bits, read as signed.
        .with_columns(
            *(keyed.hash(seed).reinterpret(signed=True).alias(name) for name, seed in zip(DIGEST, _SEEDS, strict=True))
        )
        .drop("_ev0", "_ev1")
    )


class ReusingJudge(Judge):
    """`inner` behind a store of earlier verdicts; `fresh` holds the verdicts judged here, `used()` every verdict the
    run's claims rest on (fresh or reused), as the run's rows of the store."""

    def __init__(self, inner: Judge, known: pl.LazyFrame | None = None) -> None:
        self.inner = inner
        self.version = inner.version
        self.model = inner.model
        self._known = known
        self.fresh = pl.DataFrame(schema=STORED_SCHEMA)
        self._reused_rows = pl.DataFrame(schema=STORED_SCHEMA)
        self.judged = 0
        self.reused = 0
        # what this run's calls cost (USD), null when the backend counts none: reused verdicts keep their own cost
        self.cost_usd: float | None = None

    def _stored_for(self, digests: pl.DataFrame) -> pl.DataFrame:
        """Stored verdicts for these digests: earlier runs' and those judged earlier in this one."""
        columns = [*DIGEST, *RESULT_COLUMNS]
        if digests.is_empty():
            return pl.DataFrame(schema={name: STORED_SCHEMA[name] for name in columns})
        scheme = (pl.col("judge_version") == self.version) & (pl.col("hash_scheme") == HASH_SCHEME)
        sources = [self.fresh.lazy(), *([self._known] if self._known is not None else [])]
        stored = pl.concat(
            [
                source.filter(scheme & (pl.col("status") == "ok"))
                .join(digests.lazy(), on=list(DIGEST), how="semi")
                .select(columns)
                for source in sources
            ]
        ).collect()
        return stored.unique(list(DIGEST), keep="first")

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        keyed = with_digests(requests)
        # digests an earlier batch of this run already answered: their requests here are answers given again
        answered = pl.concat([self.fresh.select(DIGEST), self._reused_rows.select(DIGEST)])
        distinct = keyed.unique(list(DIGEST), keep="first", maintain_order=True)
        first_of_digest = (
            distinct.join(answered, on=list(DIGEST), how="anti").select("request_key").with_columns(_first=pl.lit(True))
        )
        stored = self._stored_for(distinct.select(*DIGEST))
        todo = distinct.join(stored, on=list(DIGEST), how="anti")
        # a reused verdict is stored again as it was recorded, costs included: the run's rows equal a fresh run's
        self._reused_rows = pl.concat(
            [
                self._reused_rows,
                conform(
                    stored.with_columns(judge_version=pl.lit(self.version), hash_scheme=pl.lit(HASH_SCHEME)),
                    STORED_SCHEMA,
                ),
            ]
        )
        judged = pl.DataFrame(schema={name: STORED_SCHEMA[name] for name in (*DIGEST, *RESULT_COLUMNS)})
        if todo.height:
            judged = conform(self.inner._judge_claims(todo.drop(*DIGEST)), RAW_RESULT_SCHEMA)
            judged = judged.join(todo.select("request_key", *DIGEST), on="request_key").select(*DIGEST, *RESULT_COLUMNS)
            counted = judged["cost_usd"].drop_nulls()
            if counted.len():
                self.cost_usd = (self.cost_usd or 0.0) + float(counted.sum())
            done = judged.filter(pl.col("status") == "ok").with_columns(
                judge_version=pl.lit(self.version), hash_scheme=pl.lit(HASH_SCHEME)
            )
            self.fresh = pl.concat([self.fresh, conform(done, STORED_SCHEMA)])
        self.judged += todo.height
        self.reused += distinct.height - todo.height
        # Reused or judged here, the first request of a digest carries the verdict as recorded when it was made.
        answers = pl.concat([stored, judged], how="vertical_relaxed")
        # A request sharing its digest with an earlier one of this run is an answer given again, not a call: its
        # counted costs are 0 (null stays null: a backend that counts none counted nothing).
        return (
            keyed.select("request_key", *DIGEST)
            .join(answers, on=list(DIGEST), how="left")
            .join(first_of_digest, on="request_key", how="left")
            .with_columns(cached=pl.col("_first").is_null())
            .with_columns(
                *(
                    pl.when(pl.col("cached") & pl.col(name).is_not_null())
                    .then(pl.lit(0, dtype=dtype))
                    .otherwise(pl.col(name))
                    .alias(name)
                    for name, dtype in COSTS.items()
                )
            )
            .drop("_first")
            .pipe(conform, RAW_RESULT_SCHEMA)
        )

    def used(self) -> pl.DataFrame:
        """Every completed verdict this judge gave, fresh or reused, once per digest, in digest order."""
        return (
            pl.concat([self.fresh, self._reused_rows])
            .unique(list(DIGEST), keep="first")
            .sort("judge_version", "hash_scheme", *DIGEST, maintain_order=True)
        )

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        return self.inner._judge_pairs(requests)

    def could_support(self, requests: pl.DataFrame) -> pl.DataFrame:
        return self.inner.could_support(requests)
