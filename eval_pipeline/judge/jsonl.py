"""`eval-pipeline judge`: any JSONL file of (context, answer or claim) judged without a pipeline run.

An input line is `{"id": …, "context": STRING or [STRING or {"doc_id", "text"}], "answer": STRING}`, or with the claim
already split, `"claim": STRING` instead of `"answer"`. Answers are split into claims as in the pipeline
(pleasantries, questions and refusals are not claims); a claim is judged as given.

Output, claim level: one line per claim `{"id", "claim_index", "claim", "verdict", "score", "evidence_quote",
"reason", "judge_version", "status"}`; an answer with no checkable claim gets one line with a null claim and
verdict, so no input disappears. Answer level: one line per input `{"id", "grounded", "score", "n_claims",
"n_supported", "judge_version", "status", "reason"}`: grounded when the answer has at least one claim and every
claim is SUPPORTED (an answer that states nothing checkable is not grounded); score = the lowest claim score;
a claim the judge could not finish makes the answer `status: incomplete` with grounded null, never false.
Bad lines (not JSON, not an object, no id, a duplicate id, a context of the wrong shape, neither or both of
answer and claim) are reported with their line number and skipped.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import orjson
import polars as pl

from eval_pipeline.io.json_errors import json_problem
from eval_pipeline.judge.base import EVIDENCE, Judge
from eval_pipeline.judge.claim_text import claims_of_texts

NO_CLAIM_REASON = "the answer has no checkable claim (only questions, pleasantries or refusals)"


@dataclass
class JudgeInput:
    """The valid records of a batch of input lines and the lines that were skipped."""

    records: list[dict[str, Any]] = field(default_factory=list)
    bad: list[tuple[int, str]] = field(default_factory=list)


def _evidence(context: Any) -> list[dict[str, str]] | None:
    """The context as evidence chunks, or None when it has the wrong shape."""
    if isinstance(context, str):
        return [{"doc_id": "context", "text": context}]
    if not isinstance(context, list):
        return None
    chunks = []
    for position, item in enumerate(context):
        if isinstance(item, str):
            chunks.append({"doc_id": str(position), "text": item})
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            doc_id = item.get("doc_id", position)
            chunks.append({"doc_id": str(doc_id), "text": item["text"]})
        else:
            return None
    return chunks


def parse_line(raw: bytes, seen: dict[str, int], number: int) -> tuple[dict[str, Any] | None, str | None]:
    """(record, None) for a valid input line, (None, reason) otherwise; `seen` maps ids to their first line."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        # in Python's words (orjson's "invalid literal, expected 'null'" tells a reader nothing)
        return None, f"not valid JSON: {json_problem(raw)}"
    if not isinstance(value, dict):
        return None, "a line must be a JSON object"
    if "id" not in value or isinstance(value["id"], (dict, list)) or value["id"] is None:
        return None, "id is required (a string or number)"
    key = orjson.dumps(value["id"]).decode()
    if key in seen:
        return None, f"duplicate id {value['id']!r} (first on line {seen[key]})"
    evidence = _evidence(value.get("context"))
    if evidence is None:
        return None, "context must be a string or a list of strings or {doc_id, text} objects"
    has_answer, has_claim = "answer" in value, "claim" in value
    if has_answer == has_claim:
        return None, "give either answer or claim (one of them)"
    text = value["answer"] if has_answer else value["claim"]
    if not isinstance(text, str):
        return None, f"{'answer' if has_answer else 'claim'} must be a string"
    seen[key] = number
    return {"id": value["id"], "key": key, "evidence": evidence, "text": text, "is_claim": has_claim}, None


def read_batches(stream: IO[bytes], batch_lines: int) -> Iterator[JudgeInput]:
    """Input lines in batches of up to `batch_lines` valid records (blank lines skipped silently)."""
    seen: dict[str, int] = {}
    batch = JudgeInput()
    for number, raw in enumerate(stream, start=1):
        if not raw.strip():
            continue
        record, reason = parse_line(raw, seen, number)
        if record is None:
            batch.bad.append((number, reason or "bad line"))
        else:
            batch.records.append(record)
        if len(batch.records) >= batch_lines:
            yield batch
            batch = JudgeInput()
    if batch.records or batch.bad:
        yield batch


def judge_batch(records: list[dict[str, Any]], judge: Judge) -> pl.DataFrame:
    """One row per claim (claim null for an answer without claims): key, id position, claim_index, claim and the
    verdict."""
    frame = pl.DataFrame(
        {
            "row": list(range(len(records))),
            "text": [r["text"] for r in records],
            "is_claim": [r["is_claim"] for r in records],
        },
        schema={"row": pl.Int64, "text": pl.String, "is_claim": pl.Boolean},
    )
    split = claims_of_texts(frame.filter(~pl.col("is_claim")), ["row"], "text").select("row", "claim_index", "claim")
    given = frame.filter(pl.col("is_claim")).select(
        "row", pl.lit(0, dtype=pl.Int64).alias("claim_index"), pl.col("text").alias("claim")
    )
    claims = pl.concat([split, given]).sort("row", "claim_index")
    evidence = pl.DataFrame(
        {"row": frame["row"], "evidence": [r["evidence"] for r in records]},
        schema={"row": pl.Int64, "evidence": EVIDENCE},
    )
    requests = claims.join(evidence, on="row").select(
        pl.format("{}\x1f{}", "row", "claim_index").alias("request_key"),
        "claim",
        "evidence",
        pl.col("row").cast(pl.String).alias("evidence_key"),
    )
    results = judge.judge_claims(requests)
    judged = claims.with_columns(request_key=pl.format("{}\x1f{}", "row", "claim_index")).join(
        results, on="request_key", how="left"
    )
    without = frame.select("row").join(claims.select("row").unique(), on="row", how="anti")
    return pl.concat([judged.drop("request_key"), without], how="diagonal_relaxed").sort(
        "row", "claim_index", nulls_last=False
    )


def claim_lines(records: list[dict[str, Any]], judged: pl.DataFrame, version: str) -> Iterator[bytes]:
    """Claim-level output lines of a judged batch."""
    for row in judged.iter_rows(named=True):
        no_claim = row["claim"] is None
        yield (
            orjson.dumps(
                {
                    "id": records[row["row"]]["id"],
                    "claim_index": row["claim_index"],
                    "claim": row["claim"],
                    "verdict": row.get("verdict"),
                    "score": row.get("score"),
                    "evidence_quote": row.get("evidence_quote"),
                    "reason": NO_CLAIM_REASON if no_claim else row.get("reason"),
                    "judge_version": version,
                    "status": "ok" if no_claim else row.get("status"),
                }
            )
            + b"\n"
        )


def answer_frame(judged: pl.DataFrame) -> pl.DataFrame:
    """Per input row: grounded, score, n_claims, n_supported, status, reason (module docstring)."""
    claims = judged.filter(pl.col("claim").is_not_null())
    incomplete = (pl.col("status") != "ok").any()
    first_unsupported = (
        pl.format("claim {}: {}: {}", "claim_index", "verdict", "reason")
        .filter(pl.col("verdict") != "SUPPORTED")
        .first()
    )
    per_answer = claims.group_by("row").agg(
        n_claims=pl.len(),
        n_supported=(pl.col("verdict") == "SUPPORTED").sum(),
        score=pl.when(incomplete).then(None).otherwise(pl.col("score").min()),
        status=pl.when(incomplete).then(pl.lit("incomplete")).otherwise(pl.lit("ok")),
        reason=pl.when(incomplete)
        .then(pl.col("reason").filter(pl.col("status") != "ok").first())
        .otherwise(first_unsupported),
    )
    rows = judged.select("row").unique().join(per_answer, on="row", how="left")
    return (
        rows.with_columns(
            n_claims=pl.col("n_claims").fill_null(0),
            n_supported=pl.col("n_supported").fill_null(0),
            status=pl.col("status").fill_null("ok"),
            reason=pl.when(pl.col("n_claims").is_null()).then(pl.lit(NO_CLAIM_REASON)).otherwise(pl.col("reason")),
        )
        .with_columns(
            grounded=pl.when(pl.col("status") != "ok")
            .then(None)
            .otherwise((pl.col("n_claims") > 0) & (pl.col("n_supported") == pl.col("n_claims")))
        )
        .sort("row")
    )


def answer_lines(records: list[dict[str, Any]], judged: pl.DataFrame, version: str) -> Iterator[bytes]:
    """Answer-level output lines of a judged batch."""
    for row in answer_frame(judged).iter_rows(named=True):
        yield (
            orjson.dumps(
                {
                    "id": records[row["row"]]["id"],
                    "grounded": row["grounded"],
                    "score": row["score"],
                    "n_claims": row["n_claims"],
                    "n_supported": row["n_supported"],
                    "judge_version": version,
                    "status": row["status"],
                    "reason": row["reason"],
                }
            )
            + b"\n"
        )


def judge_file(
    stream: IO[bytes],
    out: IO[bytes],
    judge: Judge,
    level: str,
    batch_lines: int = 2000,
    name: str = "input",
    progress: IO[str] | None = sys.stderr,
) -> tuple[int, int, list[tuple[int, str]]]:
    """Judge every valid line of `stream` into `out`; (lines judged, claims judged, skipped lines with reasons)."""
    judged_lines = judged_claims = 0
    skipped: list[tuple[int, str]] = []
    # the counts after a batch, shown once another batch follows: after the last one the caller's summary says it
    pending: str | None = None
    for batch in read_batches(stream, batch_lines):
        if pending is not None and progress is not None:
            print(pending, file=progress, flush=True)
            pending = None
        for number, reason in batch.bad:
            skipped.append((number, reason))
            if progress is not None:
                print(f"{name}:{number}: skipped: {reason}", file=progress)
        if not batch.records:
            continue
        judged = judge_batch(batch.records, judge)
        writer = claim_lines if level == "claim" else answer_lines
        out.writelines(writer(batch.records, judged, judge.version))
        judged_lines += len(batch.records)
        judged_claims += judged.filter(pl.col("claim").is_not_null()).height
        pending = f"judge: {judged_lines} lines, {judged_claims} claims judged, {len(skipped)} skipped so far"
    return judged_lines, judged_claims, skipped
