"""One whole run of a bench batch in process, with its CPU time: for A/B comparisons of settings (not a test).

`eval-pipeline bench` runs the full graph, the judge again and a re-score, and its wall time moves by ±10 % from one
run to the next on a shared 2-core machine. Comparing settings (allocator options, steps) needs many whole runs,
alternating, and a figure that moves less than wall time: this prints the wall time, and the user and system CPU
time of the process (every thread), of one full run, then wall and CPU seconds of each Dagster step.

    python bench/bench_full_run.py --data .bench/n100000/data          # a batch `eval-pipeline bench` generated
    /usr/bin/time -f "maxrss_kb %M" python bench/bench_full_run.py --data ...   # with the peak resident set
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

import dagster as dg

from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.resources import EvalConfig, judge_config_from_env
from eval_pipeline.io.loaders import list_runs
from eval_pipeline.io.storage import open_location
from eval_pipeline.quality.remote import warm_up_in_background
from eval_pipeline.runner import IN_PROCESS_EXECUTION, evaluate_run_job, resources_run_config
from eval_pipeline_harness.bench import step_windows


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="a data root with one run (a bench batch)")
    parser.add_argument("--work", type=Path, help="where the warehouse and reports go (default: a temporary folder)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="full-run-"))
    run_id = list_runs(open_location(args.data))[0]
    config = EvalConfig(
        data_root=str(args.data),
        warehouse_root=str(work / "warehouse"),
        reports_root=str(work / "reports"),
        deid_demo=True,
    )
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(runs_partitions.name, [run_id])
    samples: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            samples.append((time.time(), _cpu_seconds()))

    threading.Thread(target=sample, daemon=True).start()
    warm_up_in_background(own_process=True)
    before, started = os.times(), time.perf_counter()
    with dg.execute_job(
        dg.reconstructable(evaluate_run_job),
        instance=instance,
        run_config={"execution": IN_PROCESS_EXECUTION, **resources_run_config(config, judge_config_from_env())},
        tags={"dagster/partition": run_id},
        raise_on_error=False,
    ) as result:
        wall, after = time.perf_counter() - started, os.times()
        stop.set()
        print(
            f"success {result.success}  wall {wall:.1f} s  user {after.user - before.user:.2f} s  "
            f"sys {after.system - before.system:.2f} s  (this process; work in {work})"
        )
        for step, (start, end) in sorted(step_windows(instance, result.run_id).items(), key=lambda kv: kv[1][0]):
            inside = [cpu for at, cpu in samples if start <= at <= end]
            cpu = inside[-1] - inside[0] if len(inside) > 1 else 0.0
            print(f"  {step:14s} wall {end - start:6.2f} s  cpu {cpu:6.2f} s")


if __name__ == "__main__":
    main()
