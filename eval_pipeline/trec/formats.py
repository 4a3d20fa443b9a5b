"""TREC qrels and run files: read them into frames, write them from frames or from the retrieval hits of traces.

A run file exported from traces ranks each trace's deduplicated hit list (docs/metrics.md#retrieval: hits of every
round in order, first occurrence wins). Scores logged per round are not comparable across rounds or variants, so the
exported score encodes our rank (n + 1 - rank): trec_eval, which re-sorts by score, then sees exactly our order.
A TREC query id must be unique in a run file, so several attempts of one case are either written to one file
per (run, attempt) (`write_trec_runs`) or keyed by trace id (`query_id="trace_id"`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from eval_pipeline.trec.ranking import ranked_hits
from eval_pipeline.trec.trec_eval import pair_key

QRELS_LINE = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"
# trec_eval ignores any field after a run line's tag.
RUN_LINE = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)(?:\s.*)?$"
ZSCORE_LINE = r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$"
RUN_SCHEMA = {
    "query_id": pl.String,
    "q0": pl.String,
    "doc_id": pl.String,
    "rank": pl.Int64,
    "score": pl.Float64,
    "tag": pl.String,
}
QRELS_SCHEMA = {"query_id": pl.String, "iteration": pl.String, "doc_id": pl.String, "grade": pl.Int64}


def _source(path_or_text: str | os.PathLike[str]) -> tuple[Path | None, str | None]:
    """(the file, None) when given a path or a string naming an existing file, else (None, the text itself)."""
    if isinstance(path_or_text, os.PathLike):
        return Path(path_or_text), None
    if "\n" not in path_or_text and Path(path_or_text).is_file():
        return Path(path_or_text), None
    if "\n" not in path_or_text and len(path_or_text.split()) < 4:
        raise FileNotFoundError(f"no such TREC file: {path_or_text}")
    return None, path_or_text


def _fields(
    path_or_text: str | os.PathLike[str],
    pattern: str,
    schema: dict[str, pl.DataType],
    kind: str,
    comment: str,
    columns: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Whitespace-separated columns of every line that is not blank or a comment (`comment`: 'start', a '#' in the
    first column as trec_eval's qrels reader wants, or 'word', a first word starting with '#' as its run reader
    does), typed by `schema` where the fast reader applies (else strings, with their line numbers); a malformed line
    raises. `columns` (default all) are the fields wanted: the fast reader does not parse the others, though a line
    must still hold every field up to the last one wanted."""
    names = list(schema)
    wanted = list(columns) if columns is not None else names
    path, text = _source(path_or_text)
    if path is not None:
        # Files written with single spaces (ours, most tools') parse with the CSV reader, already typed; others (tabs,
        # padding, extra fields, a bad value) take the general path, which also names the first bad line.
        frame = _csv(path, schema, [names.index(c) for c in wanted])
        if frame is not None and frame.get_column(names[0]).str.starts_with("#").any():
            # Reading comment lines costs the CSV reader a quarter more, so it does so only for files that have them.
            frame = _csv(path, schema, [names.index(c) for c in wanted], comment="#")
        # A short line reads as nulls; null counts are kept with the columns, so this check costs nothing.
        if frame is not None and not sum(frame.null_count().row(0)):
            return frame
        text = path.read_text()
    lines = pl.DataFrame({"line": text.splitlines()}).with_row_index("line_no", offset=1)
    opening = pl.col("line").str.strip_chars_start() if comment == "word" else pl.col("line")
    lines = lines.filter((pl.col("line").str.strip_chars() != "") & ~opening.str.starts_with("#"))
    parts = lines.with_columns(
        pl.col("line").str.extract_groups(pattern).struct.rename_fields(names).alias("f")
    ).unnest("f")
    bad = parts.filter(pl.col(names[0]).is_null())
    if bad.height:
        first = bad.row(0, named=True)
        raise ValueError(f"malformed {kind} line {first['line_no']}: {first['line']!r} (expected {len(names)} fields)")
    return parts


def _csv(
    path: Path, schema: dict[str, pl.DataType], columns: list[int], comment: str | None = None
) -> pl.DataFrame | None:
    """The file read by polars' CSV reader as single-space separated fields, or None where it cannot."""
    try:
        return pl.read_csv(
            path,
            separator=" ",
            has_header=False,
            schema=schema,
            columns=columns,
            quote_char=None,
            comment_prefix=comment,
        )
    except (pl.exceptions.PolarsError, OSError):
        return None


def _integers(frame: pl.DataFrame, column: str, kind: str) -> pl.Series:
    values = frame.get_column(column)
    if values.dtype.is_integer():
        return values.cast(pl.Int64)
    values = values.cast(pl.Int64, strict=False)
    bad = frame.filter(values.is_null())
    if bad.height:
        first = bad.row(0, named=True)
        raise ValueError(f"malformed {kind} line {first['line_no']}: {column} {first[column]!r} is not an integer")
    return values


def _floats(frame: pl.DataFrame, column: str, kind: str) -> pl.Series:
    values = frame.get_column(column)
    if values.dtype.is_float():
        return values
    values = values.cast(pl.Float64, strict=False)
    if values.null_count():
        first = frame.filter(values.is_null()).row(0, named=True)
        raise ValueError(f"malformed {kind} line {first['line_no']}: {column} {first[column]!r} is not a number")
    return values


def _refuse_duplicates(frame: pl.DataFrame, kind: str, keys: tuple[str, ...] = ("query_id", "doc_id")) -> pl.DataFrame:
    """trec_eval refuses a file naming one doc twice for one query; so do we, naming the first such pair."""
    # Distinct pair hashes prove distinct pairs; only when two hashes meet are the pairs compared themselves.
    key = pair_key() if len(keys) == 2 else pl.struct(*keys).hash(seed=0x5EED)
    if frame.select(key.n_unique()).item() == frame.height:
        return frame
    repeated = frame.filter(pl.struct(*keys).is_duplicated())
    if repeated.height:
        first = repeated.row(0, named=True)
        raise ValueError(f"{kind}: duplicate docs {' '.join(str(first[k]) for k in keys)}")
    return frame


def read_trec_qrels(path_or_text: str | os.PathLike[str], groups: bool = False) -> pl.DataFrame:
    """A TREC qrels file (`qid iter docno rel`; lines starting with '#' skipped) as query_id, doc_id, grade (Int64;
    negative grades kept). With `groups`, trec_eval's qrels_jg reading: the second field is the judgment group,
    kept as `group`, and a doc may be judged once per group."""
    parts = _fields(path_or_text, QRELS_LINE, QRELS_SCHEMA, "qrels", comment="start")
    columns = {
        "query_id": parts.get_column("query_id"),
        "doc_id": parts.get_column("doc_id"),
        "grade": _integers(parts, "grade", "qrels"),
    }
    if groups:
        columns["group"] = parts.get_column("iteration")
    keys = ("query_id", "group", "doc_id") if groups else ("query_id", "doc_id")
    return _refuse_duplicates(pl.DataFrame(columns), "qrels", keys)


def read_trec_run(
    path_or_text: str | os.PathLike[str], ranks: bool = True, refuse_duplicates: bool = True
) -> pl.DataFrame:
    """A TREC run file (`qid Q0 docno rank score tag`, fields after the tag ignored, lines whose first word starts with
    '#' skipped) as query_id, doc_id, rank, score, tag.

    With `ranks=False`, the reading `eval-pipeline trec-eval` does: the iteration and rank fields are not parsed and
    the frame has no rank column (trec_eval ignores both: it ranks by score), and every row's tag is the tag of the
    file's last line (the only one trec_eval keeps), which the fast reader then takes from that line alone; on that
    path a line must hold its first five fields. With `refuse_duplicates=False` a doc named twice for one query is
    left for `evaluate(..., refuse_duplicates=True)` to refuse, where the pairs are hashed anyway.
    """
    path, _ = _source(path_or_text)
    wanted = ["query_id", "q0", "doc_id", "rank", "score", "tag"] if ranks else ["query_id", "doc_id", "score"]
    parts = _fields(path_or_text, RUN_LINE, RUN_SCHEMA, "run", comment="word", columns=wanted)
    columns = {"query_id": parts.get_column("query_id"), "doc_id": parts.get_column("doc_id")}
    if ranks:
        columns["rank"] = _integers(parts, "rank", "run")
    columns["score"] = _floats(parts, "score", "run")
    if "tag" in parts.columns and ranks:
        columns["tag"] = parts.get_column("tag")
    frame = pl.DataFrame(columns)
    if not ranks:
        tag = None if not parts.height else parts.get_column("tag")[-1] if "tag" in parts.columns else _last_tag(path)
        frame = frame.with_columns(tag=pl.lit(tag, dtype=pl.String))
    return _refuse_duplicates(frame, "run") if refuse_duplicates else frame


def _last_tag(path: Path | None) -> str | None:
    """The tag (sixth field) of a run file's last line that is not blank or a comment."""
    if path is None:
        return None
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        block = 1 << 16
        while True:
            f.seek(max(0, size - block))
            # The block may start inside a line (or a character): only its last full line is used.
            text = f.read().decode(errors="replace")
            lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
            if size <= block or len(lines) > 1:
                break
            block *= 4
    fields = lines[-1].split() if lines else []
    if len(fields) < 6:
        raise ValueError(f"malformed run line (the last): {lines[-1] if lines else ''!r} (expected 6 fields)")
    return fields[5]


def read_trec_zscores(path_or_text: str | os.PathLike[str]) -> pl.DataFrame:
    """A trec_eval -Z file (`qid measure mean std_dev` per line) as query_id, measure, mean, std_dev."""
    schema = {"query_id": pl.String, "measure": pl.String, "mean": pl.Float64, "std_dev": pl.Float64}
    parts = _fields(path_or_text, ZSCORE_LINE, schema, "z-score", comment="word")
    return pl.DataFrame(
        {
            "query_id": parts.get_column("query_id"),
            "measure": parts.get_column("measure"),
            "mean": _floats(parts, "mean", "z-score"),
            "std_dev": _floats(parts, "std_dev", "z-score"),
        }
    )


def write_trec_qrels(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write query_id, doc_id, grade as a TREC qrels file (iteration column 0)."""
    out = Path(path)
    frame.select(
        pl.col("query_id").cast(pl.String),
        pl.lit("0").alias("iteration"),
        pl.col("doc_id").cast(pl.String),
        pl.col("grade").cast(pl.Int64),
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
    """The deduplicated hit lists of traces as a run frame.

    query_id is the case id (one attempt per case) or the trace id.
    """
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
        .select(
            "query_id", "doc_id", "rank", "score", (pl.lit(tag) if tag is not None else pl.col("run_id")).alias("tag")
        )
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
    """One TREC run file per (run_id, attempt), query id = case id, named `<run_id>.attempt<N>.run`.

    Returns the paths.
    """
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for run_id, attempt in traces.select("run_id", "attempt").unique().sort("run_id", "attempt").iter_rows():
        subset = traces.filter((pl.col("run_id") == run_id) & (pl.col("attempt") == attempt))
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", str(run_id))
        paths.append(write_trec_run(subset, out / f"{safe}.attempt{attempt}.run", tag=str(run_id)))
    return paths
