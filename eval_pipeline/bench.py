"""`eval-pipeline bench`: the whole pipeline on synthetic batches — wall time, traces/s per stage, peak memory, re-score time."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

STEP_EVENTS = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def step_seconds(instance, dagster_run_id: str) -> dict[str, float]:
    """Wall seconds per step of a finished Dagster run, from its event log."""
    import dagster as dg

    started, took = {}, {}
    for record in instance.all_logs(dagster_run_id, of_type={dg.DagsterEventType[e] for e in STEP_EVENTS}):
        event = record.dagster_event
        if event.event_type_value == "STEP_START":
            started[event.step_key] = record.timestamp
        elif event.step_key in started:
            took[event.step_key] = record.timestamp - started[event.step_key]
    return took


def _execute(job, instance, run_id: str, selection=None) -> tuple[bool, str, float]:
    started = time.perf_counter()
    result = job.execute_in_process(partition_key=run_id, instance=instance, raise_on_error=False, asset_selection=selection)
    return result.success, result.run_id, time.perf_counter() - started


def measure(data: Path, work: Path) -> dict:
    """Run the full graph once, then re-score after a qrels bump (in a child process)."""
    import dagster as dg

    from eval_pipeline.defs.automation import QRELS_RESCORE, _asset_graph
    from eval_pipeline.defs.build import EVALUATE_RUN_JOB, build_definitions
    from eval_pipeline.defs.partitions import runs_partitions
    from eval_pipeline.defs.resources import EvalConfig
    from eval_pipeline.io.loaders import list_runs
    from eval_pipeline.io.storage import open_location
    from eval_pipeline.quality.contracts import warm_up_in_background

    run_id = list_runs(open_location(data))[0]
    config = EvalConfig(data_root=str(data), warehouse_root=str(work / "warehouse"), reports_root=str(work / "reports"), deid_demo=True)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(runs_partitions.name, [run_id])
    job = build_definitions(config).resolve_job_def(EVALUATE_RUN_JOB)
    traces = sum(1 for name in os.listdir(data / "traces" / run_id) if name.endswith(".jsonl") for _ in open(data / "traces" / run_id / name, "rb"))

    warm_up_in_background()
    ok, dagster_run, full_seconds = _execute(job, instance, run_id)
    steps = step_seconds(instance, dagster_run)
    peak_after_full = _peak_rss_mib()

    labels = data / "labels" / "qrels" / "bench-bump.jsonl"
    cases = next((data / "cases").iterdir())
    first_case = json.loads(next(open(next(cases.glob("*.jsonl")), encoding="utf-8")))
    labels.write_text(json.dumps({"query_id": first_case["case_id"], "doc_id": "bench/extra-doc", "grade": 1,
                                  "source": "human", "annotator": "bench"}) + "\n")
    try:
        selection = list(QRELS_RESCORE.resolve(_asset_graph()))
        rescore_ok, _, rescore_seconds = _execute(job, instance, run_id, selection)
    finally:
        labels.unlink()
    return {
        "traces": traces,
        "success": ok and rescore_ok,
        "full_seconds": round(full_seconds, 2),
        "traces_per_second": round(traces / full_seconds, 1),
        "rescore_seconds": round(rescore_seconds, 2),
        "rescore_share": round(rescore_seconds / full_seconds, 3),
        "peak_rss_mib": round(max(peak_after_full, _peak_rss_mib()), 1),
        "steps": {k: round(v, 2) for k, v in sorted(steps.items(), key=lambda kv: -kv[1])},
    }


def _child(args: argparse.Namespace) -> int:
    print(json.dumps(measure(Path(args.data), Path(args.work))))
    return 0


def _generate(out: Path, n: int, seed: int) -> float:
    from eval_pipeline.sample_data.synthetic import write_synthetic

    if (out / "traces").is_dir():
        return 0.0
    return write_synthetic(out, n, seed=seed, progress=sys.stderr).seconds


def bench(sizes: list[int], out: Path, seed: int = 7) -> list[dict]:
    """One fresh process per size (so peak memory is that size's alone); results as dicts."""
    results = []
    for n in sizes:
        data, work = out / f"n{n}" / "data", out / f"n{n}" / "work"
        generated = _generate(data, n, seed)
        if work.exists():
            subprocess.run(["rm", "-rf", str(work)], check=True)
        work.mkdir(parents=True)
        print(f"bench: {n} traces (generated in {generated:.1f}s) ...", file=sys.stderr)
        child = subprocess.run([sys.executable, "-m", "eval_pipeline.bench", "_child", "--data", str(data), "--work", str(work)],
                               capture_output=True, text=True)
        if child.returncode != 0:
            raise RuntimeError(f"bench child for {n} traces failed:\n{child.stderr[-3000:]}")
        result = json.loads(child.stdout.strip().splitlines()[-1])
        results.append(result)
        print(format_row(result), file=sys.stderr)
    return results


def format_row(r: dict) -> str:
    return (f"{r['traces']:>9} traces  {r['full_seconds']:>8.1f} s  {r['traces_per_second']:>9.0f} traces/s  "
            f"re-score {r['rescore_seconds']:>6.1f} s ({r['rescore_share']:.0%})  peak {r['peak_rss_mib'] / 1024:.2f} GiB"
            f"  {'ok' if r['success'] else 'FAILED'}")


def markdown(results: list[dict]) -> str:
    """The results as the README's table, plus the slowest steps of the largest size."""
    lines = ["| traces | wall s | traces/s | re-score after qrels bump s (share) | peak RSS GiB |", "|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['traces']:,} | {r['full_seconds']:.1f} | {r['traces_per_second']:,.0f} | "
                     f"{r['rescore_seconds']:.1f} ({r['rescore_share']:.0%}) | {r['peak_rss_mib'] / 1024:.2f} |")
    largest = results[-1]
    lines += ["", f"Steps of the {largest['traces']:,}-trace run (seconds, traces/s):", "",
              "| step | s | traces/s |", "|---|---:|---:|"]
    for step, seconds in largest["steps"].items():
        lines.append(f"| {step} | {seconds:.2f} | {largest['traces'] / seconds if seconds else 0:,.0f} |")
    return "\n".join(lines)


def register(sub) -> None:
    """Add the `bench` subcommand."""
    parser = sub.add_parser(
        "bench",
        help="benchmark the whole pipeline on synthetic batches (wall time, traces/s per step, peak memory)",
        description="Generate mixed synthetic batches (RAG and agent, 3 attempts per agent case; kept under --out for "
        "reuse), run the whole graph with the local judge once per size in a fresh process, then re-score after a "
        "qrels bump. Prints wall time, traces/s, re-score share, peak RSS and the slowest steps.",
    )
    parser.add_argument("--traces", type=int, action="append", required=True, metavar="N",
                        help="batch size (repeatable: --traces 10000 --traces 100000)")
    parser.add_argument("--out", default=".bench", help="folder for generated batches and warehouses (default .bench)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the raw results as JSON")
    parser.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    results = bench(sorted(args.traces), Path(args.out), args.seed)
    print(json.dumps(results, indent=2) if args.json else markdown(results))
    return 0 if all(r["success"] for r in results) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m eval_pipeline.bench")
    sub = parser.add_subparsers(dest="command", required=True)
    child = sub.add_parser("_child")
    child.add_argument("--data", required=True)
    child.add_argument("--work", required=True)
    child.set_defaults(handler=_child)
    register(sub)
    parsed = parser.parse_args()
    sys.exit(parsed.handler(parsed))
