"""`eval-pipeline bench`: the whole pipeline on synthetic batches.

Wall time, traces/s per stage, peak memory, re-score time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

STEP_EVENTS = ("STEP_START", "STEP_SUCCESS", "STEP_FAILURE")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _descendants(root: int) -> list[int]:
    """Process ids of `root`'s children, grandchildren and so on (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def _pss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


_PAGE_MIB = os.sysconf("SC_PAGE_SIZE") / 2**20


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * _PAGE_MIB
    except (OSError, IndexError, ValueError):
        return 0.0


class MemorySampler:
    """Memory of this process and every process it started, sampled on a daemon thread: (time, MiB) pairs.

    This process counts with its resident set (statm: constant time), every process it started with its proportional
    set size, so pages a forked worker shares with its parent count once for the worker's share and in full for the
    parent: an upper bound of what the machine holds. smaps_rollup walks a process's page tables under its memory
    lock (about 45 ms for 3 GiB), so reading it for the large bench process four times a second would slow the run
    being measured.
    """

    def __init__(self, every: float = 0.25) -> None:
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), name="bench-memory", daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        me = os.getpid()
        while not self._stop.wait(every):
            self.samples.append((time.time(), _rss_mib(me) + sum(_pss_mib(pid) for pid in _descendants(me))))

    def peak(self) -> float:
        return max((mib for _, mib in self.samples), default=0.0)

    def peak_between(self, start: float, end: float) -> float | None:
        inside = [mib for at, mib in self.samples if start <= at <= end]
        return max(inside) if inside else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def step_windows(instance, dagster_run_id: str) -> dict[str, tuple[float, float]]:
    """(start, end) wall-clock times of each step of a finished Dagster run, from its event log."""
    import dagster as dg

    started, windows = {}, {}
    for record in instance.all_logs(dagster_run_id, of_type={dg.DagsterEventType[e] for e in STEP_EVENTS}):
        event = record.dagster_event
        if event.event_type_value == "STEP_START":
            started[event.step_key] = record.timestamp
        elif event.step_key in started:
            windows[event.step_key] = (started[event.step_key], record.timestamp)
    return windows


def member_windows(instance, dagster_run_id: str) -> dict[str, tuple[float, float]]:
    """(start, end) of each asset definition computed inside a fused step, from the line it logs when done."""
    from eval_pipeline.defs.fused import member_of_message

    windows = {}
    for record in instance.all_logs(dagster_run_id):
        member = None if record.dagster_event else member_of_message(record.user_message or "")
        if member is not None:
            windows[member[0]] = (record.timestamp - member[1], record.timestamp)
    return windows


@dataclass
class Outcome:
    """What the bench needs of a finished Dagster run."""

    success: bool
    run_id: str
    judge_calls: int | None


def _judge_calls(events) -> int | None:
    """Requests the judge was sent (from the claims materialization), None if claims did not run."""
    for event in events:
        materialization = event.step_materialization_data.materialization if event.is_step_materialization else None
        if materialization is not None and materialization.asset_key.path == ["claims"]:
            return int(materialization.metadata["judge_calls"].value)
    return None


def _execute(instance, run_id: str, selection=None, *, run_config: dict, reconstructable):
    """One Dagster run of the reconstructable job for `run_id` with `run_config` (its executor included)."""
    import dagster as dg

    started = time.perf_counter()
    with dg.execute_job(
        reconstructable,
        instance=instance,
        run_config=run_config,
        raise_on_error=False,
        tags={"dagster/partition": run_id},
        asset_selection=selection,
    ) as result:
        outcome = Outcome(result.success, result.run_id, _judge_calls(result.all_events))
    return outcome, time.perf_counter() - started


def celery_placement(instance, dagster_run_ids: list[str]) -> dict[str, dict]:
    """Per Celery worker: steps it executed and their seconds, from the executor's engine events and step windows."""
    import dagster as dg

    placement: dict[str, dict] = {}
    for run_id in dagster_run_ids:
        windows = step_windows(instance, run_id)
        for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            worker = entry.dagster_event.event_specific_data.metadata.get("Celery worker")
            if worker is not None and entry.step_key in windows:
                start, end = windows[entry.step_key]
                share = placement.setdefault(worker.value, {"steps": 0, "step_seconds": 0.0})
                share["steps"] += 1
                share["step_seconds"] = round(share["step_seconds"] + end - start, 2)
    return placement


@contextmanager
def celery_cluster(work: Path, workers: int):
    """A PostgreSQL instance, a Redis broker and `workers` Celery workers on loopback for one measurement."""
    import dagster as dg

    import eval_pipeline
    from eval_pipeline_harness.loopback_services import celery_workers, postgres_server, redis_server

    deploy = Path(eval_pipeline.__file__).resolve().parents[1] / "deploy"
    if not (deploy / "celery" / "celery.yaml").exists():
        raise SystemExit(f"--executor celery needs the repository's deploy/ folder (looked in {deploy})")
    home = work / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    shutil.copy(deploy / "postgres" / "dagster.yaml", home / "dagster.yaml")
    with postgres_server() as database, redis_server(work / "redis.log") as broker:
        env = {"DAGSTER_HOME": str(home), **database.env(), **broker.celery_env()}
        os.environ.update(env)
        instance = dg.DagsterInstance.get()
        names = [f"benchworker{i + 1}" for i in range(workers)]
        with celery_workers(names, env, deploy / "celery" / "celery.yaml", work):
            yield instance


def measure(data: Path, work: Path, executor: str = "in_process", max_concurrent: int = 2) -> dict:
    """Run the full graph once, the judge step again, then re-score after a qrels bump (in a child process)."""
    if executor == "celery":
        with celery_cluster(work, max_concurrent) as instance:
            return _measure(data, work, executor, max_concurrent, instance)
    return _measure(data, work, executor, max_concurrent)


def _measure(data: Path, work: Path, executor: str, max_concurrent: int, instance=None) -> dict:
    import dagster as dg

    from eval_pipeline.defs.automation.sensors import QRELS_RESCORE
    from eval_pipeline.defs.domains import all_assets
    from eval_pipeline.defs.partitions import runs_partitions
    from eval_pipeline.defs.resources import EvalConfig, judge_config_from_env
    from eval_pipeline.io.loaders import list_runs
    from eval_pipeline.io.storage import open_location
    from eval_pipeline.quality.remote import warm_up_in_background
    from eval_pipeline.runner import (
        IN_PROCESS_EXECUTION,
        celery_execution,
        evaluate_run_celery_job,
        evaluate_run_job,
        multiprocess_execution,
        resources_run_config,
    )

    run_id = list_runs(open_location(data))[0]
    config = EvalConfig(
        data_root=str(data), warehouse_root=str(work / "warehouse"), reports_root=str(work / "reports"), deid_demo=True
    )
    job = evaluate_run_job
    if executor == "celery":
        execution, job = celery_execution(), evaluate_run_celery_job
    elif executor == "multiprocess":
        (work / "dagster").mkdir(parents=True, exist_ok=True)
        instance = dg.DagsterInstance.local_temp(str(work / "dagster"))
        execution = multiprocess_execution(instance, max_concurrent)
    else:
        instance, execution = dg.DagsterInstance.ephemeral(), IN_PROCESS_EXECUTION
    # as `eval-pipeline run` executes a run (execute_in_process would keep every step's output in memory)
    options = {
        "run_config": {"execution": execution, **resources_run_config(config, judge_config_from_env())},
        "reconstructable": dg.reconstructable(job),
    }
    instance.add_dynamic_partitions(runs_partitions.name, [run_id])
    traces = sum(
        1
        for name in os.listdir(data / "traces" / run_id)
        if name.endswith(".jsonl")
        for _ in open(data / "traces" / run_id / name, "rb")
    )

    warm_up_in_background(own_process=executor == "in_process")
    memory = MemorySampler()
    full, full_seconds = _execute(instance, run_id, **options)
    dagster_steps = step_windows(instance, full.run_id)
    windows = member_windows(instance, full.run_id)
    peak_after_full = _peak_rss_mib()
    # The judge step again over unchanged inputs: every verdict should come from the store, none from the judge.
    again, again_seconds = _execute(
        instance, run_id, [dg.AssetKey(k) for k in ("claims", "citation_scores", "judge_verdicts")], **options
    )

    labels = data / "labels" / "qrels" / "bench-bump.jsonl"
    cases = next((data / "cases").iterdir())
    first_case = json.loads(next(open(next(cases.glob("*.jsonl")), encoding="utf-8")))
    labels.write_text(
        json.dumps(
            {
                "query_id": first_case["case_id"],
                "doc_id": "bench/extra-doc",
                "grade": 1,
                "source": "human",
                "annotator": "bench",
            }
        )
        + "\n"
    )
    try:
        selection = list(QRELS_RESCORE.resolve(all_assets()))
        rescore, rescore_seconds = _execute(instance, run_id, selection, **options)
    finally:
        labels.unlink()
    memory.stop()
    return {
        "traces": traces,
        "success": full.success and again.success and rescore.success,
        "full_seconds": round(full_seconds, 2),
        "traces_per_second": round(traces / full_seconds, 1),
        "rescore_seconds": round(rescore_seconds, 2),
        "rescore_share": round(rescore_seconds / full_seconds, 3),
        "executor": {"in_process": executor, "celery": f"celery ({max_concurrent} workers, one process each)"}.get(
            executor, f"{executor} ({max_concurrent} at a time)"
        ),
        "workers": celery_placement(instance, [full.run_id]) if executor == "celery" else None,
        "judge_calls": full.judge_calls,
        "judge_calls_again": again.judge_calls,
        "judge_again_seconds": round(again_seconds, 2),
        "peak_rss_mib": round(max(peak_after_full, _peak_rss_mib()), 1),
        "peak_tree_pss_mib": round(memory.peak(), 1),
        # the asset definitions (what was a step before issue 37), then the Dagster steps that computed them
        "steps": {
            k: round(end - start, 2) for k, (start, end) in sorted(windows.items(), key=lambda kv: kv[1][0] - kv[1][1])
        },
        # what the re-score after the qrels bump computed, and for how long
        "rescore_steps": {
            k: round(end - start, 2)
            for k, (start, end) in sorted(
                member_windows(instance, rescore.run_id).items(), key=lambda kv: kv[1][0] - kv[1][1]
            )
        },
        "dagster_steps": {
            k: round(end - start, 2)
            for k, (start, end) in sorted(dagster_steps.items(), key=lambda kv: kv[1][0] - kv[1][1])
        },
        "step_peak_pss_mib": {k: round(memory.peak_between(*window) or 0, 1) for k, window in windows.items()},
    }


def decode_floor(files: list[Path]) -> float:
    """Seconds to read every line of the trace files and decode it with `orjson.loads`, on one core: the floor a
    pipeline run is compared with (it must at least read and decode every trace)."""
    import orjson

    started = time.perf_counter()
    for path in files:
        with path.open("rb") as handle:
            for line in handle:
                orjson.loads(line)
    return time.perf_counter() - started


def _child(args: argparse.Namespace) -> int:
    if args.executor == "in_process":
        # where `eval-pipeline run` starts it: first, so Great Expectations imports while this process imports Dagster
        # and makes its instance, not beside the run's first steps
        from eval_pipeline.quality.remote import warm_up_in_background

        warm_up_in_background()
    print(json.dumps(measure(Path(args.data), Path(args.work), args.executor, args.max_concurrent)))
    return 0


def _generate(out: Path, n: int, seed: int) -> float:
    from eval_pipeline_harness.sample_data.synthetic import write_synthetic

    if (out / "traces").is_dir():
        return 0.0
    return write_synthetic(out, n, seed=seed, progress=sys.stderr).seconds


def bench(
    sizes: list[int], out: Path, seed: int = 7, executor: str = "in_process", max_concurrent: int = 2
) -> list[dict]:
    """One fresh process per size (so peak memory is that size's alone); results as dicts."""
    results = []
    for n in sizes:
        data, work = out / f"n{n}" / "data", out / f"n{n}" / "work"
        generated = _generate(data, n, seed)
        if work.exists():
            subprocess.run(["rm", "-rf", str(work)], check=True)
        work.mkdir(parents=True)
        print(f"bench: {n} traces (generated in {generated:.1f}s) ...", file=sys.stderr)
        # The batch just written is still in the page cache, dirty: without this the kernel writes it back while the
        # run reads it, and the first run after a generation paid for the generator's writes (raw_traces 1.45 ->
        # 4.5 s at 100k).
        os.sync()
        child = subprocess.run(
            [
                sys.executable,
                "-m",
                "eval_pipeline_harness.bench",
                "_child",
                "--data",
                str(data),
                "--work",
                str(work),
                "--executor",
                executor,
                "--max-concurrent",
                str(max_concurrent),
            ],
            capture_output=True,
            text=True,
        )
        if child.returncode != 0:
            raise RuntimeError(f"bench child for {n} traces failed:\n{child.stderr[-3000:]}")
        result = json.loads(child.stdout.strip().splitlines()[-1])
        # measured in the same invocation as the run, best of two (the first may read the files from disk)
        files = sorted((data / "traces").glob("*/*.jsonl"))
        floor = round(min(decode_floor(files) for _ in range(2)), 4)
        result["floor_seconds"] = floor
        result["over_floor"] = round(result["full_seconds"] / floor, 1)
        results.append(result)
        print(format_row(result), file=sys.stderr)
    return results


def format_row(r: dict) -> str:
    return (
        f"{r['traces']:>9} traces  {r['full_seconds']:>8.1f} s  {r['traces_per_second']:>9.0f} traces/s  "
        f"{r['over_floor']:>5.1f}x floor  re-score {r['rescore_seconds']:>6.1f} s ({r['rescore_share']:.0%})  "
        f"judge calls {r['judge_calls']} then "
        f"{r['judge_calls_again']}  peak {r['peak_tree_pss_mib'] / 1024:.2f} GiB"
        f"  {'ok' if r['success'] else 'FAILED'}"
    )


def markdown(results: list[dict]) -> str:
    """The results as the README's table, plus the slowest steps of the largest size."""
    lines = [
        "| traces | wall s | traces/s | orjson floor s | wall / floor | re-score after qrels bump s (share) | "
        "judge calls, first run | judge calls, unchanged rerun (s) | peak memory GiB |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        # a failed run has no claims step, so no judge count: shown as such, not as zero
        calls, again = (
            f"{n:,}" if n is not None else "none (failed)" for n in (r["judge_calls"], r["judge_calls_again"])
        )
        lines.append(
            f"| {r['traces']:,} | {r['full_seconds']:.1f} | {r['traces_per_second']:,.0f} | "
            f"{r['floor_seconds']:.2f} | {r['over_floor']:.1f}× | "
            f"{r['rescore_seconds']:.1f} ({r['rescore_share']:.0%}) | {calls} | "
            f"{again} ({r['judge_again_seconds']:.1f}) | {r['peak_tree_pss_mib'] / 1024:.2f} |"
        )
    sizes = [f"{r['traces']:,}" for r in results]
    lines += [
        "",
        "Seconds per asset definition (each was a step of its own before issue 37), then traces/s and peak memory "
        "while it ran (RSS of the bench process + PSS of its children) at the largest size, slowest first:",
        "",
        "| step | " + " | ".join(f"s at {n}" for n in sizes) + " | traces/s | peak memory GiB |",
        "|---|" + "---:|" * (len(results) + 2),
    ]
    largest = results[-1]
    for step, seconds in largest["steps"].items():
        cells = " | ".join(f"{r['steps'][step]:.2f}" if step in r["steps"] else "" for r in results)
        peak = largest.get("step_peak_pss_mib", {}).get(step, 0) / 1024
        lines.append(f"| {step} | {cells} | {largest['traces'] / seconds if seconds else 0:,.0f} | {peak:.2f} |")
    if largest.get("dagster_steps"):
        lines += [
            "",
            f"Dagster steps at {largest['traces']:,} traces (each computes several of the above): "
            + ", ".join(f"`{step}` {seconds:.2f} s" for step, seconds in largest["dagster_steps"].items()),
        ]
    if largest.get("workers"):
        lines += [
            "",
            f"Steps of the full run per Celery worker at {largest['traces']:,} traces:",
            "",
            "| worker | steps | step seconds |",
            "|---|---:|---:|",
        ]
        lines += [
            f"| {name} | {share['steps']} | {share['step_seconds']:.1f} |"
            for name, share in sorted(largest["workers"].items())
        ]
    return "\n".join(lines)


def register(sub) -> None:
    """Add the `bench` subcommand."""
    parser = sub.add_parser(
        "bench",
        help="benchmark the whole pipeline on synthetic batches (wall time, traces/s per step, peak memory)",
        description="Generate mixed synthetic batches (RAG and agent, 3 attempts per agent case; kept under --out for "
        "reuse), run the whole graph with the local judge once per size in a fresh process, then re-score after a "
        "qrels bump and run the judge step again over unchanged inputs. Prints wall time, traces/s, the ratio to "
        "the floor "
        "(reading and orjson-decoding every trace line on one core, measured after the run in the same invocation), "
        "re-score share, "
        "judge calls of the first run and of the rerun, peak memory (RSS of the bench process plus PSS of every "
        "process it started, sampled) and the seconds and peak memory of every step. "
        "Results also go to OUT/bench-results.json.",
    )
    parser.add_argument(
        "--traces",
        type=int,
        action="append",
        required=True,
        metavar="N",
        help="batch size (repeatable: --traces 10000 --traces 100000)",
    )
    parser.add_argument("--out", default=".bench", help="folder for generated batches and warehouses (default .bench)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--executor",
        choices=("in_process", "multiprocess", "celery"),
        default="in_process",
        help="Dagster executor: in_process (one process, default); multiprocess (a process per step, "
        "--max-concurrent at a time: each step's memory is returned when it ends); celery (every step a "
        "task for --max-concurrent Celery workers of one process each, with a PostgreSQL instance and a "
        "Redis broker the bench starts on loopback: needs initdb/pg_ctl and redis-server, see "
        "scripts/services.sh, and pip install 'eval-pipeline[celery]')",
    )
    parser.add_argument(
        "--max-concurrent",
        type=int,
        default=2,
        metavar="N",
        help="steps run at once by the multiprocess executor, or Celery workers (default 2; 1 gives the "
        "lowest peak memory)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the raw results as JSON (they are also written to OUT/bench-results.json)",
    )
    parser.set_defaults(handler=_cmd_bench)


def _cmd_bench(args: argparse.Namespace) -> int:
    results = bench(sorted(args.traces), Path(args.out), args.seed, args.executor, args.max_concurrent)
    (Path(args.out) / "bench-results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2) if args.json else markdown(results))
    return 0 if all(r["success"] for r in results) else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m eval_pipeline_harness.bench")
    sub = parser.add_subparsers(dest="command", required=True)
    child = sub.add_parser("_child")
    child.add_argument("--data", required=True)
    child.add_argument("--work", required=True)
    child.add_argument("--executor", default="in_process")
    child.add_argument("--max-concurrent", type=int, default=2)
    child.set_defaults(handler=_child)
    register(sub)
    parsed = parser.parse_args()
    sys.exit(parsed.handler(parsed))
