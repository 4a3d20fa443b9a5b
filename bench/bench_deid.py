"""De-identification throughput against Microsoft Presidio on the same text (a benchmark, not a test).

    /work/venv/bin/python bench/bench_deid.py --traces 100000 --presidio-sample 1000 --seed 7

Generates a run of N traces (plus cases and corpus) with personal data in every text field, times `deidentify`
over all of it (detection, checksums, tokens, replacement, report) and the residual `scan_frame` over the output,
then times Presidio's AnalyzerEngine (predefined recognizers, blank spaCy pipeline, the entity types both tools
cover; detection only, no replacement) on every de-identified text field of a sample of the same traces, and
prints traces/second, MB/second and the ratio. Needs the test extra `presidio-analyzer`.
"""

from __future__ import annotations

import argparse
import platform
import random
import resource
import time

import polars as pl

from eval_pipeline.deid import DEMO_KEY, collect_names, deidentify
from eval_pipeline.deid.columns import VALUE, leaf_values
from eval_pipeline.deid.scan import scan_frame
from eval_pipeline.deid.tables import CASE_TEXT_PATHS, CORPUS_TEXT_PATHS, TRACE_TEXT_PATHS
from eval_pipeline_harness.deid_compare import PRESIDIO_TYPES, blank_presidio_analyzer, synthetic_run


def text_bytes(frame: pl.DataFrame, paths) -> int:
    """UTF-8 bytes of all values of the given leaves."""
    return sum(int(leaf_values(frame, p)[VALUE].str.len_bytes().sum() or 0) for p in paths)


def trace_texts(traces: pl.DataFrame) -> list[list[str]]:
    """Per trace, the values of every de-identified text leaf (what Presidio is given)."""
    per_row: dict[int, list[str]] = {}
    for path in TRACE_TEXT_PATHS:
        for row, value in leaf_values(traces, path).iter_rows():
            per_row.setdefault(row, []).append(value)
    return [per_row.get(i, []) for i in range(traces.height)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument(
        "--presidio-sample", type=int, default=1000, help="traces Presidio analyzes (its time is per trace)"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    started = time.perf_counter()
    traces, cases, corpus = synthetic_run(args.traces, args.cases, args.seed)
    print(
        f"generated {traces.height} traces, {cases.height} cases, {corpus.height} docs"
        f" in {time.perf_counter() - started:.1f}s"
    )
    total_bytes = (
        text_bytes(traces, TRACE_TEXT_PATHS)
        + text_bytes(cases, CASE_TEXT_PATHS)
        + text_bytes(corpus, CORPUS_TEXT_PATHS)
    )
    trace_bytes = text_bytes(traces, TRACE_TEXT_PATHS)

    started = time.perf_counter()
    result = deidentify(traces, cases, corpus, DEMO_KEY)
    ours_s = time.perf_counter() - started
    replacements = int(result.report["replacements"].sum())

    names = collect_names(traces, cases)
    started = time.perf_counter()
    residual = scan_frame(result.traces, "deid_traces", names).height
    scan_s = time.perf_counter() - started

    sample_rows = sorted(
        random.Random(args.seed).sample(range(traces.height), min(args.presidio_sample, traces.height))
    )
    sample_texts = trace_texts(traces[sample_rows])
    sample_bytes = sum(len(t.encode()) for texts in sample_texts for t in texts)
    analyzer = blank_presidio_analyzer()
    entities = list(PRESIDIO_TYPES)
    analyzer.analyze(text="warm up jane@example.com", language="en", entities=entities)
    started = time.perf_counter()
    presidio_hits = sum(
        len(analyzer.analyze(text=t, language="en", entities=entities)) for texts in sample_texts for t in texts
    )
    presidio_s = time.perf_counter() - started

    ours_tps = traces.height / ours_s
    presidio_tps = len(sample_rows) / presidio_s
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print(
        f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()},"
        f" polars {pl.__version__}"
    )
    print("| measure | value |")
    print("|---|---|")
    print(f"| traces | {traces.height} (+ {cases.height} cases, {corpus.height} docs) |")
    print(f"| text de-identified | {total_bytes / 1e6:.1f} MB ({trace_bytes / traces.height:.0f} bytes per trace) |")
    print(f"| deidentify wall time | {ours_s:.2f} s |")
    print(f"| deidentify throughput | {ours_tps:,.0f} traces/s, {total_bytes / 1e6 / ours_s:.1f} MB/s |")
    print(f"| replacements | {replacements:,} |")
    print(f"| residual scan of deid_traces | {scan_s:.2f} s, {residual} findings |")
    print(f"| Presidio sample | {len(sample_rows)} traces, {sample_bytes / 1e6:.2f} MB, {presidio_hits:,} detections |")
    print(f"| Presidio wall time (sample) | {presidio_s:.2f} s |")
    print(f"| Presidio throughput | {presidio_tps:,.1f} traces/s, {sample_bytes / 1e6 / presidio_s:.2f} MB/s |")
    print(f"| Presidio, extrapolated to {traces.height} traces | {traces.height / presidio_tps:,.0f} s |")
    print(f"| speed-up (ours / Presidio, traces/s) | {ours_tps / presidio_tps:,.0f}x |")
    print(f"| peak RSS | {peak_mib:,.0f} MiB |")


if __name__ == "__main__":
    main()
