"""Benchmark: our columnar trec_eval measures against pytrec_eval and ranx on one synthetic graded run (not a test).

    .venv/bin/python bench/bench_retrieval.py --queries 100000 --docs 100
    .venv/bin/python bench/bench_retrieval.py --from-files --queries 50000 --docs 100 --repeat 7

Generates (fixed seed) a run of `--queries` queries x `--docs` retrieved docs with distinct random scores and graded
qrels (0..3) that judge about half of the retrieved docs plus as many docs that were not retrieved, then, in one
process and on the same data:
  * ours:        eval_pipeline.trec.trec_eval.evaluate on the polars frames (the pipeline's own input form);
  * pytrec_eval: RelevanceEvaluator(qrels).evaluate(run) on dict-of-dicts built from the same frames;
  * ranx:        ranx.evaluate(Qrels, Run) - the first call compiles with numba (cold), later calls are warm.
Each tool's conversion from the shared frames is timed separately from its evaluation. Per-query values of every
measure are compared across the three tools.

With --from-files, the run and qrels are written as TREC files to a temporary folder first, and each tool starts from
the files: ours exactly as `eval-pipeline trec-eval -m ... QRELS RUN` does it (the command's own entry point, reading
with the polars CSV reader, evaluating, printing the `all` lines), pytrec_eval with its own parse_qrel / parse_run on
the open files, RelevanceEvaluator and evaluate. The two tools' repetitions alternate, so both see the same machine
load; per-query values are compared. Peak memory is the resident set size (RSS) sampled from
/proc/self/statm every 5 ms by a background thread while a step runs (tracemalloc would miss the native
allocations of polars, numba and trec_eval), reported as the peak and as the growth over the RSS before the step.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Self

import numpy as np
import polars as pl

from eval_pipeline.trec.trec_eval import evaluate

# Measures all three tools define identically: ours/pytrec_eval name -> ranx name.
MEASURES = {
    "map": "map",
    "recip_rank": "mrr",
    "P_10": "precision@10",
    "recall_10": "recall@10",
    "ndcg_cut_10": "ndcg@10",
}
PYTREC_MEASURES = {"map", "recip_rank", "P.10", "recall.10", "ndcg_cut.10"}
PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


class PeakRss:
    """Samples RSS in a background thread while the `with` block runs; `peak` and `growth` in bytes afterwards."""

    def __enter__(self) -> Self:
        gc.collect()
        self.start = self.peak = rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.005)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def growth(self) -> int:
        return self.peak - self.start


def cpu_seconds() -> float:
    """User + system CPU time of this process so far (all its threads)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(label: str, fn: Callable[[], Any], log: list[dict]) -> Any:
    """Run fn once under the RSS sampler, record seconds, CPU seconds and memory under `label`, return its result."""
    with PeakRss() as mem:
        t0, c0 = time.perf_counter(), cpu_seconds()
        result = fn()
        seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    log.append(
        {
            "step": label,
            "seconds": seconds,
            "cpu": cpu,
            "peak_rss_mib": mem.peak / 2**20,
            "rss_growth_mib": mem.growth / 2**20,
        }
    )
    print(
        f"  {label:<40} {seconds:8.3f} s  cpu {cpu:7.3f} s   "
        f"peak RSS {mem.peak / 2**20:8.0f} MiB  (+{mem.growth / 2**20:.0f})",
        flush=True,
    )
    return result


def generate(
    queries: int, docs: int, seed: int, judged_fraction: float, unretrieved: int, ranked: bool = True
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A run (query_id, doc_id, score) grouped by query as run files are, and graded qrels (query_id, doc_id, grade).

    ranked=True lists each query's docs by descending score, as systems write run files; False in random order.
    """
    rng = np.random.default_rng(seed)
    # Scores k / 2^24 with distinct k per query: exact as 32-bit floats (trec_eval and pytrec_eval keep C floats,
    # ranx doubles), so every tool sees the same order and no tie leaves the order to a tool's tie-break.
    offsets = rng.integers(0, 2**24, size=(queries, 1))
    scores = ((offsets + np.arange(docs)[None, :] * (2**24 // docs)) % 2**24) / 2**24
    scores = -np.sort(-scores, axis=1) if ranked else rng.permuted(scores, axis=1)
    qids = np.repeat(np.arange(queries), docs)
    # Distinct doc ids per query: a random offset plus a stride, in a collection of 10M ids.
    base = rng.integers(0, 10_000_000, size=(queries, 1))
    doc_numbers = ((base + np.arange(docs)[None, :] * 7919) % 10_000_000).ravel()
    run = pl.DataFrame({"q": qids, "d": doc_numbers, "score": scores.ravel()}).select(
        pl.format("q{}", pl.col("q").cast(pl.String).str.pad_start(6, "0")).alias("query_id"),
        pl.format("d{}", pl.col("d").cast(pl.String).str.pad_start(8, "0")).alias("doc_id"),
        "score",
    )
    retrieved_judged = run.filter(pl.Series(rng.random(run.height) < judged_fraction)).select("query_id", "doc_id")
    # Judged docs the run never retrieved: they count in recall and in the ideal DCG.
    missed = (
        run.select(pl.col("query_id").unique(maintain_order=True))
        .with_columns(i=pl.int_ranges(0, unretrieved))
        .explode("i")
        .select("query_id", pl.format("u{}-{}", pl.col("query_id"), pl.col("i")).alias("doc_id"))
    )
    # Qrels files list each query's judgments together, as the run does.
    judged = pl.concat([retrieved_judged, missed]).sort("query_id", "doc_id")
    grades = rng.choice(4, size=judged.height, p=[0.55, 0.25, 0.15, 0.05])
    return run, judged.with_columns(grade=pl.Series(grades, dtype=pl.Int64))


def nested(frame: pl.DataFrame, value: str, cast: type) -> dict[str, dict[str, Any]]:
    """dict[query][doc] = value, the input form of pytrec_eval and ranx."""
    out: dict[str, dict[str, Any]] = {}
    for q, d, v in zip(
        frame.get_column("query_id").to_list(),
        frame.get_column("doc_id").to_list(),
        frame.get_column(value).to_list(),
        strict=True,
    ):
        out.setdefault(q, {})[d] = cast(v)
    return out


def max_difference(ours: pl.DataFrame, other: pl.DataFrame) -> dict[str, float]:
    """Largest absolute per-query difference of each measure (queries joined by id)."""
    joined = ours.join(other, on="query_id", how="full", suffix="_other", coalesce=True)
    if joined.height != ours.height or joined.height != other.height:
        raise SystemExit(f"query sets differ: ours {ours.height}, other {other.height}, union {joined.height}")
    return {m: joined.select((pl.col(m) - pl.col(f"{m}_other")).abs().max()).item() for m in MEASURES}


def from_files(run: pl.DataFrame, qrels: pl.DataFrame, measures: list[str], args: argparse.Namespace) -> int:
    """Both tools from the same TREC files.

    Ours as `eval-pipeline trec-eval` runs, pytrec_eval with its file parsers.
    """
    import contextlib
    import io
    import tempfile
    from pathlib import Path

    import pytrec_eval

    from eval_pipeline.cli.trec import main as trec_eval_command
    from eval_pipeline.trec.formats import read_trec_qrels, read_trec_run, write_run_frame, write_trec_qrels

    log: list[dict] = []
    with tempfile.TemporaryDirectory() as folder:
        qrels_path, run_path = Path(folder) / "qrels.txt", Path(folder) / "run.txt"
        ranked = run.with_columns(rank=pl.int_range(1, pl.len() + 1).over("query_id"), tag=pl.lit("bench"))
        timed(
            "write qrels + run files",
            lambda: (write_trec_qrels(qrels, qrels_path), write_run_frame(ranked, run_path)),
            log,
        )
        print(
            f"  qrels file {qrels_path.stat().st_size / 2**20:.0f} MiB, "
            f"run file {run_path.stat().st_size / 2**20:.0f} MiB"
        )
        command = [*(a for m in measures for a in ("-m", m)), str(qrels_path), str(run_path)]

        def ours() -> str:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                if trec_eval_command(command) != 0:
                    raise SystemExit("trec-eval failed")
            return out.getvalue()

        def pytrec() -> dict:
            with open(qrels_path) as f:
                judged = pytrec_eval.parse_qrel(f)
            with open(run_path) as f:
                ranking = pytrec_eval.parse_run(f)
            return pytrec_eval.RelevanceEvaluator(judged, PYTREC_MEASURES).evaluate(ranking)

        print("warm-up (page cache, imports): one untimed call each")
        ours()
        pytrec()
        scores: dict = {}
        for i in range(args.repeat):
            printed = timed(f"ours trec-eval command #{i}", ours, log)
            scores = timed(f"pytrec_eval from files #{i}", pytrec, log)
        print(printed, end="")
        print("ours, parts of the command (same calls, timed one by one)")
        for i in range(min(args.repeat, 3)):
            q = timed(f"ours read_trec_qrels #{i}", lambda: read_trec_qrels(qrels_path), log)
            r = timed(
                f"ours read_trec_run #{i}", lambda: read_trec_run(run_path, ranks=False, refuse_duplicates=False), log
            )
            evaluation = timed(
                f"ours evaluate #{i}", lambda q=q, r=r: evaluate(q, r, measures=measures, refuse_duplicates=True), log
            )
    ours_q = evaluation.per_query.select("query_id", *MEASURES)
    theirs = pl.DataFrame({"query_id": list(scores), **{m: [scores[q][m] for q in scores] for m in MEASURES}})
    diffs = max_difference(ours_q, theirs)
    agree = all(d <= args.tolerance for d in diffs.values())
    print("agreement (largest per-query absolute difference)")
    print(
        "  ours vs pytrec_eval  "
        + "  ".join(f"{m} {d:.1e}" for m, d in diffs.items())
        + ("  OK" if agree else "  DIFFERENT")
    )
    frame = pl.DataFrame(log)

    def seconds(prefix: str, column: str = "seconds") -> tuple[float, float]:
        rows = frame.filter(pl.col("step").str.starts_with(prefix)).get_column(column).to_list()
        return min(rows), statistics.median(rows)

    (ours_best, ours_median), (theirs_best, theirs_median) = (
        seconds("ours trec-eval command"),
        seconds("pytrec_eval from files"),
    )
    print(f"summary ({args.repeat} alternating repetitions: best and median)")
    for name in ("read_trec_qrels", "read_trec_run", "evaluate"):
        best, middle = seconds(f"ours {name}")
        print(f"  ours {name:<24} best {best:7.3f} s  median {middle:7.3f} s")
    print(f"  {'ours trec-eval command':<29} best {ours_best:7.3f} s  median {ours_median:7.3f} s")
    print(f"  {'pytrec_eval from files':<29} best {theirs_best:7.3f} s  median {theirs_median:7.3f} s")
    best_ratio, median_ratio = theirs_best / ours_best, theirs_median / ours_median
    verdict = "met" if min(best_ratio, median_ratio) >= 4 else "NOT met"
    print(f"  speed-up from files: best {best_ratio:.2f}x, median {median_ratio:.2f}x (target >= 4x: {verdict})")
    # CPU seconds (all threads) barely move with other processes' load: the work each tool does.
    (ours_cpu, ours_cpu_median), (theirs_cpu, theirs_cpu_median) = (
        seconds("ours trec-eval command", "cpu"),
        seconds("pytrec_eval from files", "cpu"),
    )
    print(
        f"  CPU seconds: ours best {ours_cpu:.3f} median {ours_cpu_median:.3f}, "
        f"pytrec_eval best {theirs_cpu:.3f} median {theirs_cpu_median:.3f}"
        f" (ratio {theirs_cpu / ours_cpu:.2f}x / {theirs_cpu_median / ours_cpu_median:.2f}x)"
    )
    print(f"  load average now: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"  process max RSS (getrusage): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0 if agree else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--docs", type=int, default=100, help="retrieved docs per query")
    parser.add_argument("--seed", type=int, default=20260301)
    parser.add_argument(
        "--order",
        choices=("ranked", "random"),
        default="ranked",
        help="docs of a query by descending score (as run files) or shuffled",
    )
    parser.add_argument("--judged-fraction", type=float, default=0.1, help="share of retrieved docs that are judged")
    parser.add_argument(
        "--unretrieved", type=int, default=5, help="judged docs per query that the run did not retrieve"
    )
    parser.add_argument("--repeat", type=int, default=3, help="warm repetitions of each evaluation (median reported)")
    parser.add_argument("--tolerance", type=float, default=1e-9, help="largest per-query difference accepted")
    parser.add_argument("--skip-ranx", action="store_true")
    parser.add_argument("--skip-pytrec", action="store_true")
    parser.add_argument(
        "--from-files",
        action="store_true",
        help="both tools start from TREC files: ours as the trec-eval command, pytrec_eval",
    )
    args = parser.parse_args(argv)

    log: list[dict] = []
    print(
        f"python {sys.version.split()[0]}, polars {pl.__version__} ({pl.thread_pool_size()} threads), "
        f"{os.cpu_count()} CPUs"
    )
    print(f"generating {args.queries} queries x {args.docs} docs ({args.order} order), seed {args.seed}")
    run, qrels = generate(
        args.queries, args.docs, args.seed, args.judged_fraction, args.unretrieved, args.order == "ranked"
    )
    print(
        f"  run rows {run.height:,}, qrels rows {qrels.height:,}, "
        f"relevant (grade>=1) {qrels.filter(pl.col('grade') >= 1).height:,}"
    )
    measures = [m.replace("_10", ".10") if m != "recip_rank" else m for m in MEASURES]
    if args.from_files:
        return from_files(run, qrels, measures, args)

    print("ours (polars, columnar)")
    ours = None
    for i in range(args.repeat + 1):
        ours = timed(f"ours evaluate #{i}", lambda: evaluate(qrels, run, measures=measures), log)
    ours_q = ours.per_query.select("query_id", *MEASURES)
    results: dict[str, pl.DataFrame] = {}

    if not args.skip_pytrec:
        import pytrec_eval

        print(f"pytrec_eval {getattr(pytrec_eval, '__version__', '')} (trec_eval in C, one thread)")
        run_dict = timed("pytrec/ranx: run -> dict of dicts", lambda: nested(run, "score", float), log)
        qrels_dict = timed("pytrec/ranx: qrels -> dict of dicts", lambda: nested(qrels, "grade", int), log)
        evaluator = timed(
            "pytrec RelevanceEvaluator(qrels)", lambda: pytrec_eval.RelevanceEvaluator(qrels_dict, PYTREC_MEASURES), log
        )
        scores = None
        for i in range(args.repeat):
            scores = timed(f"pytrec evaluate(run) #{i}", lambda: evaluator.evaluate(run_dict), log)
        results["pytrec_eval"] = pl.DataFrame(
            {"query_id": list(scores), **{m: [scores[q][m] for q in scores] for m in MEASURES}}
        )
    if not args.skip_ranx:
        import numba
        import ranx

        print(
            f"ranx {ranx.__version__ if hasattr(ranx, '__version__') else ''} "
            f"(numba {numba.__version__}, {numba.get_num_threads()} threads)"
        )
        if args.skip_pytrec:
            run_dict = timed("ranx: run -> dict of dicts", lambda: nested(run, "score", float), log)
            qrels_dict = timed("ranx: qrels -> dict of dicts", lambda: nested(qrels, "grade", int), log)
        ranx_qrels = timed("ranx Qrels(dict)", lambda: ranx.Qrels(qrels_dict), log)
        ranx_run = timed("ranx Run(dict)", lambda: ranx.Run(run_dict), log)
        metrics = list(MEASURES.values())
        values = timed(
            "ranx evaluate cold (numba compile)",
            lambda: ranx.evaluate(ranx_qrels, ranx_run, metrics, return_mean=False),
            log,
        )
        for i in range(args.repeat):
            values = timed(
                f"ranx evaluate warm #{i}", lambda: ranx.evaluate(ranx_qrels, ranx_run, metrics, return_mean=False), log
            )
        qids = list(ranx_run.keys())
        results["ranx"] = pl.DataFrame(
            {"query_id": qids, **{m: np.asarray(values[r], dtype=float) for m, r in MEASURES.items()}}
        )

    print("agreement (largest per-query absolute difference)")
    agree = True
    for tool, frame in results.items():
        diffs = max_difference(ours_q, frame)
        ok = all(d <= args.tolerance for d in diffs.values())
        agree &= ok
        print(
            f"  ours vs {tool:<12} "
            + "  ".join(f"{m} {d:.1e}" for m, d in diffs.items())
            + ("  OK" if ok else "  DIFFERENT")
        )
    print("means: " + "  ".join(f"{m} {ours_q.get_column(m).mean():.6f}" for m in MEASURES))

    frame = pl.DataFrame(log)

    def seconds(prefix: str, skip_first: bool = False) -> tuple[float, float]:
        rows = frame.filter(pl.col("step").str.starts_with(prefix)).get_column("seconds").to_list()
        rows = rows[1:] if skip_first and len(rows) > 1 else rows
        return min(rows), statistics.median(rows)

    ours_min, ours_median = seconds("ours evaluate #", skip_first=True)
    print("summary (warm repetitions: best and median)")
    print(f"  {'ours evaluate':<29} best {ours_min:7.3f} s  median {ours_median:7.3f} s")
    rivals = {}
    if "pytrec_eval" in results:
        rivals["pytrec_eval evaluate"] = seconds("pytrec evaluate(run)")
    if "ranx" in results:
        rivals["ranx evaluate (warm)"] = seconds("ranx evaluate warm")
        rivals["ranx evaluate (cold)"] = seconds("ranx evaluate cold")
    for name, (best, middle) in rivals.items():
        print(
            f"  {name:<29} best {best:7.3f} s  median {middle:7.3f} s   "
            f"ratio best {best / ours_min:5.2f}x  median {middle / ours_median:5.2f}x"
        )
    warm = {k: v for k, v in rivals.items() if "cold" not in k}
    if warm:
        best_ratio = min(v[0] for v in warm.values()) / ours_min
        median_ratio = min(v[1] for v in warm.values()) / ours_median
        verdict = "met" if median_ratio >= 3 else "NOT met"
        print(
            f"  speed-up over the faster of the two (warm): best {best_ratio:.2f}x, median {median_ratio:.2f}x "
            f"(target >= 3x: {verdict})"
        )
    # End to end from the shared polars frames: each tool's conversion from them plus one warm evaluation.
    conversion = frame.filter(pl.col("step").str.contains("-> dict")).get_column("seconds").sum()
    end_to_end = {}
    if "pytrec_eval" in results:
        end_to_end["pytrec_eval"] = (
            conversion + seconds("pytrec RelevanceEvaluator")[1] + rivals["pytrec_eval evaluate"][1]
        )
    if "ranx" in results:
        end_to_end["ranx"] = (
            conversion + seconds("ranx Qrels")[1] + seconds("ranx Run")[1] + rivals["ranx evaluate (warm)"][1]
        )
    for name, total in end_to_end.items():
        print(
            f"  end to end from the frames: {name:<12} {total:7.3f} s   "
            f"ratio {total / ours_median:5.2f}x (ours {ours_median:.3f} s)"
        )
    print(f"  process max RSS (getrusage): {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
