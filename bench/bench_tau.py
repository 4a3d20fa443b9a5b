"""τ-bench agreement of the agent lane (a benchmark, not a test).

    .venv/bin/python bench/bench_tau.py [RESULTS_FILE ...]

Imports τ-bench or τ²-bench results files with `import tau-bench` into a temporary data root, scores the agent lane
as the pipeline does, and prints per file: the outcome stage against τ-bench's reward (success = reward ≥ 1 − 1e-6),
pass^k against τ-bench's own pass^k formula over the same trials, and every trial τ-bench rewards 1 that fails the
lane, with its first failing stage and reason. Default file: the committed gpt-4o airline sample.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from math import comb
from pathlib import Path

import polars as pl

from eval_pipeline.importers import ImportRun, import_tau_bench
from eval_pipeline.io import ingest, inputs, loaders
from eval_pipeline.io.storage import open_location
from eval_pipeline.scoring.outcome import score_outcomes
from eval_pipeline.scoring.reliability import reliability
from eval_pipeline.scoring.tools import score_tools

SAMPLE = (
    Path(__file__).resolve().parents[1]
    / "eval_pipeline_tests"
    / "reference_data"
    / "tau_bench"
    / "gpt-4o-airline.sample.json"
)
PROCESS_STAGES = ("policy", "tool_selection", "tool_arguments", "tool_order", "loop")


def score(data_root: Path, run_id: str) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(tool_scores, outcome_scores, reliability) of an imported run, loaded the way the pipeline loads it."""
    location = open_location(data_root)
    manifest = loaders.load_manifest(location, run_id)
    cases = inputs.load_cases(location, manifest.dataset_version).frame
    tools = inputs.load_tools(location, manifest.environment_version)
    traces = ingest.parse_traces(ingest.read_raw_lines(location, run_id), cases, run_id).traces
    tool_scores, _ = score_tools(traces, cases, tools)
    outcomes = score_outcomes(traces, cases, tool_scores)
    return tool_scores, outcomes, reliability(outcomes.select("run_id", "trace_id", "case_id", "attempt", "success"))


def rewards_of(outcomes: pl.DataFrame, traces_path: Path) -> pl.DataFrame:
    """(trace_id, reward) from the final states the importer wrote."""
    rows = []
    for line in traces_path.read_text().splitlines():
        trace = json.loads(line)
        state = trace.get("final_state") or {}
        rows.append((trace["trace_id"], (state.get("tau_bench") or {}).get("reward")))
    return pl.DataFrame(rows, schema={"trace_id": pl.String, "reward": pl.Float64}, orient="row")


def tau_pass_hat_k(rewards: pl.DataFrame, k: int) -> float | None:
    """τ-bench's pass^k: mean over tasks of C(c, k) / C(n, k), c = trials with reward ≥ 1 − 1e-6."""
    per_task = rewards.group_by("case_id").agg(n=pl.len(), c=(pl.col("reward") >= 1 - 1e-6).sum())
    values = [comb(c, k) / comb(n, k) for n, c in per_task.select("n", "c").iter_rows() if n >= k]
    return sum(values) / len(values) if values else None


def report(path: Path) -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-tau-"))
    summary = import_tau_bench(path, ImportRun(run_id="tau", data_root=work))
    tool_scores, outcomes, rel = score(work, "tau")
    rewards = rewards_of(outcomes, next((work / "traces" / "tau").glob("*.jsonl")))
    frame = tool_scores.join(outcomes.select("trace_id", "outcome_stage", "success"), on="trace_id").join(
        rewards, on="trace_id"
    )
    rewarded = frame.filter(pl.col("reward").is_not_null())
    agree = rewarded.filter((pl.col("outcome_stage") == "pass") == (pl.col("reward") >= 1 - 1e-6)).height
    print(
        f"{path.name}: {summary.records} records, {summary.traces} traces, {len(summary.rejects)} rejected, "
        f"{len(summary.incomplete)} incomplete"
    )
    print(f"  outcome stage vs reward: {agree} of {rewarded.height} agree ({agree / max(rewarded.height, 1):.2%})")
    top_k = int(rel["n_complete"].max() or 0)
    for k in range(1, top_k + 1):
        ours = rel.filter(pl.col("n_complete") >= k)[f"pass_hat_{k}"].mean()
        # τ²-bench leaves simulations that ended in an infrastructure error (incomplete here) out of its metrics
        theirs = tau_pass_hat_k(rewarded.filter(pl.col("status") != "incomplete"), k)
        print(f"  pass^{k}: pipeline {ours:.4f}, τ-bench {theirs:.4f}")
    won = rewarded.filter(pl.col("reward") >= 1 - 1e-6)
    failing = won.filter(pl.any_horizontal(pl.col(f"{s}_stage") == "fail" for s in PROCESS_STAGES))
    print(f"  reward-1 trials: {won.height}; failing a process stage of the agent lane: {failing.height}")
    for row in failing.sort("trace_id").iter_rows(named=True):
        stage = next(s for s in PROCESS_STAGES if row[f"{s}_stage"] == "fail")
        print(f"    {row['trace_id']}: {stage}: {row[f'{stage}_reason'][:160]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        default=[SAMPLE],
        metavar="RESULTS_FILE",
        help="τ-bench / τ²-bench results files (default: the committed airline sample)",
    )
    args = parser.parse_args(argv)
    return max(report(path) for path in args.files)


if __name__ == "__main__":
    sys.exit(main())
