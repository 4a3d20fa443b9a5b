"""The floor under the pipeline's ingest and de-identification: read, JSON-decode, regex-scan a trace file (not a test).

Prints seconds (best of --repeat) for each primitive over the same JSONL file, so the profile of a step in
docs/benchmarks/pipeline.md can be read against what the same bytes cost at the least:
- read: the file's bytes from disk (page cache warm after the first repetition);
- split_lines: the bytes split into lines as an Arrow string column (polars);
- json_stdlib: `json.loads` of every line (C decoder, Python objects);
- json_arrow: pyarrow's JSON reader over the whole file with the trace columns' schema (trace_schema.LINE_SCHEMA:
  every field but the free-form values, which no fixed schema can hold), columnar and multithreaded;
- regex_one: one RE2 pass of an e-mail pattern over every line (pyarrow);
- regex_union: one RE2 pass of the union of e-mail, phone-like and card-like patterns over every line.
"""

from __future__ import annotations

import argparse
import io
import json
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from eval_pipeline.io.trace_schema import LINE_SCHEMA

EMAIL = r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"
UNION = EMAIL + r"|\+?\d[\d ().-]{7,}\d|\b(?:\d[ -]?){13,19}\b"


def best(fn: Callable[[], object], repeat: int) -> float:
    """The fastest of `repeat` calls, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "file", type=Path, help="a JSONL trace file, e.g. .bench/n100000/data/traces/synth-100000/traces-00001.jsonl"
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    data = args.file.read_bytes()
    lines = pa.array(data.decode("utf-8").splitlines(), type=pa.large_string())
    results = {
        "read": best(args.file.read_bytes, args.repeat),
        "split_lines": best(lambda: pl.Series(data.decode("utf-8").split("\n")), args.repeat),
        "json_stdlib": best(lambda: [json.loads(line) for line in data.splitlines() if line.strip()], args.repeat),
        "json_arrow": best(
            lambda: pa_json.read_json(
                io.BytesIO(data),
                read_options=pa_json.ReadOptions(block_size=8 << 20),
                parse_options=pa_json.ParseOptions(explicit_schema=LINE_SCHEMA, unexpected_field_behavior="ignore"),
            ),
            args.repeat,
        ),
        "regex_one": best(lambda: pc.match_substring_regex(lines, EMAIL), args.repeat),
        "regex_union": best(lambda: pc.match_substring_regex(lines, UNION), args.repeat),
    }
    print(f"{len(lines):,} lines, {len(data) / 2**20:.1f} MiB")
    for name, seconds in results.items():
        print(f"{name:12s} {seconds:7.3f} s")
    print(
        json.dumps(
            {"lines": len(lines), "mib": round(len(data) / 2**20, 1), **{k: round(v, 3) for k, v in results.items()}}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
