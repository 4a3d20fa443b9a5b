"""Subcommands beyond `run`: gate, compare; and the warehouse helper other command modules share."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import polars as pl

from eval_pipeline.contracts.identifiers import LATEST_PASSING, identifier_arg
from eval_pipeline.io.storage import InputError, is_url, open_location, storage_options_from_env


def _warehouse(args: argparse.Namespace):
    from eval_pipeline.io.warehouse import Warehouse

    root = args.warehouse or f"{args.data.rstrip('/')}/warehouse"
    return Warehouse.at(root if is_url(root) else str(Path(root).resolve()), storage_options_from_env(os.environ))


def _cmd_gate(args: argparse.Namespace) -> int:
    from eval_pipeline.gating import compare
    from eval_pipeline.gating.facts import run_facts
    from eval_pipeline.io.policy import load_gate_policy, parse_gate_policy
    from eval_pipeline.reporting.gate_report import exit_meaning, gate_json, gate_junit, gate_text_table
    from eval_pipeline.scoring.gate_facts import baseline_of
    from eval_pipeline.scoring.gate_table import exit_code

    try:
        policy = (
            parse_gate_policy(Path(args.policy).read_text(), args.policy)
            if args.policy
            else load_gate_policy(open_location(args.data if is_url(args.data) else str(Path(args.data).resolve())))
        )
    except (InputError, OSError) as exc:
        print(f"eval-pipeline gate: error: {exc}", file=sys.stderr)
        return 2
    warehouse = _warehouse(args)
    candidate = run_facts(warehouse, args.candidate)
    if candidate is None or candidate.outcomes is None:
        print(
            f"eval-pipeline gate: error: run {args.candidate!r} has not been scored in {warehouse.root} "
            f"(run `eval-pipeline run --run {args.candidate}` first)",
            file=sys.stderr,
        )
        return 2
    # With --json, stdout holds the JSON document only.
    notes = sys.stderr if args.json else sys.stdout
    baseline = args.baseline or baseline_of(candidate.manifest, policy)
    if baseline == LATEST_PASSING:
        from eval_pipeline.gating.baseline import latest_passing_baseline

        baseline = latest_passing_baseline(warehouse, args.candidate, policy.baseline_run_id)
        why = " (the policy's baseline, accepted)" if baseline and baseline == policy.baseline_run_id else ""
        print(f"baseline: latest passing run = {baseline or 'no run has passed its gates'}{why}", file=notes)
    results = compare(policy, candidate, baseline, warehouse)
    itself = baseline == args.candidate
    if itself:
        baseline = None  # a run is never gated against itself (compare said so in every row's reason)
    code = exit_code(results)
    if args.junit:
        Path(args.junit).write_text(gate_junit(results, args.candidate, baseline), encoding="utf-8")
        print(f"JUnit XML: {args.junit}", file=notes)
    if args.json:
        print(gate_json(results, args.candidate, baseline, policy.version))
        return code
    against = f"baseline {baseline}" if baseline else ("itself: not gated" if itself else "no baseline")
    print(f"gates: candidate {args.candidate} vs {against} (policy {policy.version})\n")
    print(gate_text_table(results))
    print(f"\nexit {code}: {exit_meaning(results)}")
    return code


def _cmd_compare(args: argparse.Namespace) -> int:
    from eval_pipeline.gating.versions import metric_versions

    try:
        table, old_version, new_version = metric_versions(
            _warehouse(args), args.table, args.metric, args.run, args.from_version, args.to_version
        )
    except (LookupError, ValueError) as exc:
        print(f"eval-pipeline compare: error: {exc}", file=sys.stderr)
        return 2
    print(f"{args.table}.{args.metric} for run {args.run}: version {old_version} → {new_version}")
    changed = table.filter(pl.col("changed"))
    print(f"{table.height} rows, {changed.height} changed\n")
    key = [
        c
        for c in table.columns
        if c not in {"metric", "old", "new", "delta", "changed"} and not c.startswith(("old_", "new_"))
    ][-1]
    shown = pl.concat([changed, table.filter(~pl.col("changed"))]).head(args.limit)
    print(f"{key:<40} {'old':>12} {'new':>12} {'delta':>10}  changed")

    def cell(value):
        return "null" if value is None else (f"{value:.4f}" if isinstance(value, float) else str(value))

    for row in shown.iter_rows(named=True):
        changed = "yes" if row["changed"] else ""
        print(f"{row[key]:<40} {cell(row['old']):>12} {cell(row['new']):>12} {cell(row['delta']):>10}  {changed}")
    return 0


def _register_gate(sub) -> None:
    gate = sub.add_parser(
        "gate",
        help="compare a candidate run with a baseline run under policy/gates.yaml",
        description="Evaluate each release gate of DATA/policy/gates.yaml for a scored candidate run against a scored "
        "baseline run (or the latest run whose gates passed). Prints the gate table with the blocking cases and owner. "
        "Exit status: 0 release allowed, every gate passed; 1 release blocked, a gate failed; 2 undecided, a gate is "
        "incomplete, incomparable or insufficient (a segmented gate's slice has fewer than min_cases cases), the run "
        "is not gated (no baseline, or it is its own baseline), or bad input.",
    )
    gate.add_argument(
        "--candidate", required=True, metavar="RUN", type=identifier_arg("run id"), help="the run under test"
    )
    gate.add_argument(
        "--baseline",
        metavar="RUN",
        type=identifier_arg("run id"),
        help=f"baseline run, or '{LATEST_PASSING}' (default: baseline_run_id of the candidate's run.yaml, "
        "else of the policy)",
    )
    gate.add_argument("--data", default="data", help="input root holding policy/gates.yaml (default: data)")
    gate.add_argument("--warehouse", help="Delta warehouse root (default: DATA/warehouse)")
    gate.add_argument("--policy", help="a gate policy file instead of DATA/policy/gates.yaml")
    gate.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object instead of the table: verdict, exit_code and a `gates` list, each with "
        "gate, status, unit, baseline_value, candidate_value, delta, threshold, blocking_cases, owner "
        "(schema: docs/gate_json.md); the exit status is the same",
    )
    gate.add_argument(
        "--junit", metavar="FILE", help="also write JUnit XML to FILE, one test case per gate, for CI test reports"
    )
    gate.set_defaults(handler=_cmd_gate)


def _register_compare(sub) -> None:
    compare = sub.add_parser(
        "compare",
        help="show a metric's values in two versions of a table side by side (Delta time travel)",
        description="Read two versions of a warehouse table and show one metric per trace side by side, e.g. "
        "retrieval_scores.recall_at_10 before and after a qrels bump. Default versions: the run's two latest writes.",
    )
    compare.add_argument("table", help="warehouse table, e.g. retrieval_scores")
    compare.add_argument("metric", help="column, e.g. recall_at_10")
    compare.add_argument("--run", required=True, type=identifier_arg("run id"), help="run id")
    compare.add_argument("--from-version", type=int, help="older table version (default: the run's previous write)")
    compare.add_argument("--to-version", type=int, help="newer table version (default: the run's latest write)")
    compare.add_argument("--data", default="data")
    compare.add_argument("--warehouse", help="Delta warehouse root (default: DATA/warehouse)")
    compare.add_argument("--limit", type=int, default=40, help="rows to print (default 40)")
    compare.set_defaults(handler=_cmd_compare)


REGISTRATIONS: list = [_register_gate, _register_compare]
