"""TREC qrels and run files: read them into frames, write them from frames or from the retrieval hits of traces.

A run file exported from traces ranks each trace's deduplicated hit list (SPEC §5: hits of every round in order,
first occurrence wins). Scores logged per round are not comparable across rounds or variants, so the exported
score encodes our rank (n + 1 - rank): trec_eval, which re-sorts by score, then sees exactly our order.
A TREC query id must be unique in a run file, so several attempts of one case are either written to one file
per (run, attempt) (`write_trec_runs`) or keyed by trace id (`query_id="trace_id"`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import polars as pl

from eval_pipeline.trec.ranking import ranked_hits
from eval_pipeline.trec.trec_eval import pair_key

QRELS_LINE = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"
RUN_LINE = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"


def _source(path_or_text: str | os.PathLike[str]) -> tuple[Path | None, str | None]:
    """(the file, None) when given a path or a string naming an existing file, else (None, the text itself)."""
    if isinstance(path_or_text, os.PathLike):
        return Path(path_or_text), None
    if "\n" not in path_or_text and Path(path_or_text).is_file():
        return Path(path_or_text), None
    if "\n" not in path_or_text and len(path_or_text.split()) < 4:
        raise FileNotFoundError(f"no such TREC file: {path_or_text}")
    return None, path_or_text


def _fields(path_or_text: str | os.PathLike[str], pattern: str, names: list[str], kind: str) -> pl.DataFrame:
    """Whitespace-separated columns of every non-blank line (with its line number); a malformed line raises."""
    path, text = _source(path_or_text)
    if path is not None:
        # Files written with single spaces (ours, most tools') parse with the CSV reader; others take the general path.
        try:
            frame = pl.read_csv(
                path, separator=" ", has_header=False, new_columns=names, schema=dict.fromkeys(names, pl.String), quote_char=None
            )
        except (pl.exceptions.PolarsError, OSError):
            frame = None
        if frame is not None and not frame.select(pl.any_horizontal(pl.all().is_null()).any()).item():
            return frame.with_row_index("line_no", offset=1)
        text = path.read_text()
    lines = pl.DataFrame({"line": text.splitlines()}).with_row_index("line_no", offset=1)
    lines = lines.filter(pl.col("line").str.strip_chars() != "")
    parts = lines.with_columns(pl.col("line").str.extract_groups(pattern).struct.rename_fields(names).alias("f")).unnest("f")
    bad = parts.filter(pl.col(names[0]).is_null())
    if bad.height:
        first = bad.row(0, named=True)
        raise ValueError(f"malformed {kind} line {first['line_no']}: {first['line']!r} (expected {len(names)} fields)")
    return parts


def _integers(frame: pl.DataFrame, column: str, kind: str) -> pl.Series:
    values = frame.get_column(column).cast(pl.Int64, strict=False)
    bad = frame.filter(values.is_null())
    if bad.height:
        first = bad.row(0, named=True)
        raise ValueError(f"malformed {kind} line {first['line_no']}: {column} {first[column]!r} is not an integer")
    return values


def _refuse_duplicates(frame: pl.DataFrame, kind: str) -> pl.DataFrame:
    """trec_eval refuses a file naming one doc twice for one query; so do we, naming the first such pair."""
    # Distinct pair hashes prove distinct pairs; only when two hashes meet are the pairs compared themselves.
    if frame.select(pair_key().n_unique()).item() == frame.height:
        return frame
    repeated = frame.filter(pl.struct("query_id", "doc_id").is_duplicated())
    if repeated.height:
        first = repeated.row(0, named=True)
        raise ValueError(f"{kind}: duplicate docs {first['query_id']} {first['doc_id']}")
    return frame


def read_trec_qrels(path_or_text: str | os.PathLike[str]) -> pl.DataFrame:
    """A TREC qrels file (`qid iter docno rel`) as query_id, doc_id, grade (Int64; negative grades kept)."""
    parts = _fields(path_or_text, QRELS_LINE, ["query_id", "iteration", "doc_id", "grade"], "qrels")
    frame = pl.DataFrame(
        {"query_id": parts.get_column("query_id"), "doc_id": parts.get_column("doc_id"), "grade": _integers(parts, "grade", "qrels")}
    )
    return _refuse_duplicates(frame, "qrels")


def read_trec_run(path_or_text: str | os.PathLike[str]) -> pl.DataFrame:
    """A TREC run file (`qid Q0 docno rank score tag`) as query_id, doc_id, rank, score, tag."""
    parts = _fields(path_or_text, RUN_LINE, ["query_id", "q0", "doc_id", "rank", "score", "tag"], "run")
    scores = parts.get_column("score").cast(pl.Float64, strict=False)
    if scores.null_count():
        first = parts.filter(scores.is_null()).row(0, named=True)
        raise ValueError(f"malformed run line {first['line_no']}: score {first['score']!r} is not a number")
    frame = pl.DataFrame(
        {
            "query_id": parts.get_column("query_id"),
            "doc_id": parts.get_column("doc_id"),
            "rank": _integers(parts, "rank", "run"),
            "score": scores,
            "tag": parts.get_column("tag"),
        }
    )
    return _refuse_duplicates(frame, "run")


def write_trec_qrels(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write query_id, doc_id, grade as a TREC qrels file (iteration column 0)."""
    out = Path(path)
    frame.select(
        pl.col("query_id").cast(pl.String), pl.lit("0").alias("iteration"), pl.col("doc_id").cast(pl.String), pl.col("grade").cast(pl.Int64)
    ).sort("query_id", "doc_id").write_csv(out, include_header=False, separator=" ", quote_style="never")
    return out


def write_run_frame(run: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write a run frame (query_id, doc_id, rank, score, tag) as a TREC run file."""
    out = Path(path)
    run.select(
        pl.col("query_id").cast(pl.String),
        pl.lit("Q0").alias("q0"),
        pl.col("doc_id").cast(pl.String),
        pl.col("rank").cast(pl.Int64),
        pl.col("score").cast(pl.Float64),
        pl.col("tag").cast(pl.String),
    ).sort("query_id", "rank").write_csv(out, include_header=False, separator=" ", quote_style="never")
    return out


def run_frame_from_traces(
    traces: pl.DataFrame, *, query_id: str = "case_id", attempt: int | None = None, tag: str | None = None
) -> pl.DataFrame:
    """The deduplicated hit lists of traces as a run frame; query_id is the case id (one attempt per case) or the trace id."""
    if query_id not in ("case_id", "trace_id"):
        raise ValueError(f"query_id must be 'case_id' or 'trace_id', got {query_id!r}")
    chosen = traces if attempt is None else traces.filter(pl.col("attempt") == attempt)
    if query_id == "case_id":
        repeated = chosen.group_by("case_id").agg(pl.len().alias("n")).filter(pl.col("n") > 1)
        if repeated.height:
            example = repeated.sort("case_id").row(0, named=True)
            raise ValueError(
                f"case {example['case_id']} has {example['n']} traces: pick one attempt (attempt=...), key by trace id"
                " (query_id='trace_id'), or write one file per run and attempt with write_trec_runs"
            )
    hits = ranked_hits(chosen.with_row_index("_tid"))
    keys = chosen.with_row_index("_tid").select("_tid", pl.col(query_id).alias("query_id"), pl.col("run_id"))
    return (
        hits.join(keys, on="_tid", how="inner")
        .with_columns(score=(pl.len().over("_tid") + 1 - pl.col("rank")).cast(pl.Float64))
        .select("query_id", "doc_id", "rank", "score", (pl.lit(tag) if tag is not None else pl.col("run_id")).alias("tag"))
        .sort("query_id", "rank")
    )


def write_trec_run(
    traces: pl.DataFrame,
    path: str | os.PathLike[str],
    *,
    query_id: str = "case_id",
    attempt: int | None = None,
    tag: str | None = None,
) -> Path:
    """Write the retrieval hits of traces as one TREC run file (see `run_frame_from_traces` for the query id choice)."""
    return write_run_frame(run_frame_from_traces(traces, query_id=query_id, attempt=attempt, tag=tag), path)


def write_trec_runs(traces: pl.DataFrame, directory: str | os.PathLike[str]) -> list[Path]:
    """One TREC run file per (run_id, attempt), query id = case id, named `<run_id>.attempt<N>.run`; returns the paths."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for run_id, attempt in traces.select("run_id", "attempt").unique().sort("run_id", "attempt").iter_rows():
        subset = traces.filter((pl.col("run_id") == run_id) & (pl.col("attempt") == attempt))
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(run_id))
        paths.append(write_trec_run(subset, out / f"{safe}.attempt{attempt}.run", tag=str(run_id)))
    return paths
