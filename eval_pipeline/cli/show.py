"""`eval-pipeline show`: one case, or one attempt, of a scored run end to end, against its baseline."""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from pathlib import Path

from eval_pipeline.contracts.identifiers import LATEST_PASSING, identifier_arg

EXIT_OK, EXIT_INPUT = 0, 2

DESCRIPTION = (
    "Follow one case of a scored run end to end, from de-identified tables only: the case (input, lanes, criticality, "
    "expected answer parts, required docs, reference calls), then every attempt: each stage's status and reason in "
    "stage order, the first failing stage and its owner; for RAG the retrieved documents in rank order against the "
    "qrels, recall@k and the other retrieval metrics, the context chunks, every claim with its verdict, score and "
    "evidence quote, the citations and the answer checks; for agents the tool calls against the reference with every "
    "wrong argument as expected and actual value, milestones, outcome and faults; then the case's reliability "
    "(pass@1, pass^k, flaky), the gates it blocks, and the same case in the baseline side by side. A trace id shows "
    "that attempt in full and lists the others. Exit status: 0 shown, 2 unknown run, case or trace (or bad input)."
)
EPILOG = """examples:
  eval-pipeline show agent-009 --run cand-42
  eval-pipeline show rag-031 --run cand-42 --baseline base-41 --html rag-031.html
  eval-pipeline show cand-42:agent-009#2 --run cand-42"""


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `show` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "show",
        help="one case (or one attempt) end to end: stages, documents, claims, tool calls, gates, baseline",
        description=textwrap.fill(DESCRIPTION, 100),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "target", metavar="CASE_OR_TRACE", help="a case id (agent-009) or a trace id (cand-42:agent-009#2)"
    )
    parser.add_argument("--run", required=True, metavar="RUN", type=identifier_arg("run id"), help="the scored run")
    parser.add_argument(
        "--baseline",
        metavar="RUN",
        type=identifier_arg("run id"),
        help=f"baseline run, or '{LATEST_PASSING}' (default: as `gate` and the reports choose it, the run's "
        "baseline_run_id in its run.yaml, else the policy's, when it is another scored run)",
    )
    parser.add_argument("--data", default="data", help="input root holding policy/gates.yaml (default: data)")
    parser.add_argument("--warehouse", help="Delta warehouse root (default: DATA/warehouse)")
    parser.add_argument("--html", metavar="FILE", help="also write the story as a self-contained HTML page")
    parser.set_defaults(handler=run_show)
    return parser


def _fail(message: str) -> int:
    print(f"eval-pipeline show: error: {message}", file=sys.stderr)
    return EXIT_INPUT


def _scored(warehouse) -> list[str]:
    from eval_pipeline.gating.facts import scored_runs

    return scored_runs(warehouse)["run_id"].to_list()


def _suggest(target: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(target, choices, n=5, cutoff=0.6)
    return f"; did you mean {', '.join(close)}?" if close else ""


def _resolve(warehouse, run_id: str, target: str) -> tuple[str, str | None] | str:
    """(case id, trace id or None) of the target in the run, or the error message."""
    import polars as pl

    traces = warehouse.read("deid_traces", run_id, columns=["trace_id", "case_id"])
    cases = warehouse.read("deid_cases", run_id, columns=["case_id"])
    trace_ids = traces["trace_id"].to_list() if traces is not None else []
    case_ids = sorted(
        set(cases["case_id"].to_list() if cases is not None else [])
        | set(traces["case_id"].to_list() if traces is not None else [])
    )
    # `agent-009#2` is shorthand for the run's trace `cand-42:agent-009#2`; ids are matched exactly, then case-blind
    for candidate in (target, f"{run_id}:{target}" if ":" not in target else None):
        if candidate and traces is not None and candidate in trace_ids:
            return traces.filter(pl.col("trace_id") == candidate)["case_id"][0], candidate
    if target in case_ids:
        return target, None
    folded = {case.lower(): case for case in case_ids}
    if target.lower() in folded:
        return folded[target.lower()], None
    looks_like_trace = "#" in target or ":" in target
    kind = "trace" if looks_like_trace else "case"
    choices = trace_ids + case_ids if looks_like_trace else case_ids + trace_ids
    return f"{kind} {target!r} is not in run {run_id!r}{_suggest(target, choices)}"


def _baseline(
    requested: str | None, default: str | None, warehouse, run_id: str, accepted: str | None = None
) -> str | None:
    """The baseline asked for, else the run's default one (`latest-passing` resolved as `gate` resolves it, the
    policy's baseline `accepted`); None when it is this run."""
    if requested == LATEST_PASSING or (requested is None and default == LATEST_PASSING):
        from eval_pipeline.gating.baseline import latest_passing_baseline

        requested = latest_passing_baseline(warehouse, run_id, None if requested is None else accepted)
    baseline = requested or default
    return None if not baseline or baseline == run_id or baseline == LATEST_PASSING else baseline


def run_show(args: argparse.Namespace) -> int:
    """Print the story of a case (and write its HTML page); 2 for an unknown run, case or trace."""
    from eval_pipeline.cli.commands import _warehouse
    from eval_pipeline.gating.facts import manifest_from_warehouse
    from eval_pipeline.io.policy import load_gate_policy
    from eval_pipeline.io.storage import InputError, is_url, open_location
    from eval_pipeline.reporting.case_pages import read_case_tables
    from eval_pipeline.reporting.case_story import build_story, case_page_html, case_story_text
    from eval_pipeline.scoring.gate_facts import baseline_of
    from eval_pipeline.settings import ScoringSettings

    try:
        policy = load_gate_policy(open_location(args.data if is_url(args.data) else str(Path(args.data).resolve())))
    except (InputError, OSError) as exc:
        return _fail(str(exc))
    threshold = ScoringSettings.from_policy(policy).relevance_threshold
    warehouse = _warehouse(args)
    run_id = args.run
    manifest = manifest_from_warehouse(warehouse, run_id)
    if manifest is None:
        return _fail(
            f"run {run_id!r} has not been scored in {warehouse.root} (run `eval-pipeline run --run {run_id}` first)"
            f"{_suggest(run_id, _scored(warehouse))}"
        )
    resolved = _resolve(warehouse, run_id, args.target)
    if isinstance(resolved, str):
        return _fail(resolved)
    case_id, trace_id = resolved
    story = build_story(read_case_tables(warehouse, run_id, [case_id], threshold, manifest), case_id, trace_id)

    baseline = None
    # the baseline `gate` and the reports use: the run's own baseline_run_id, else the policy's
    baseline_id = _baseline(args.baseline, baseline_of(manifest, policy), warehouse, run_id, policy.baseline_run_id)
    if baseline_id is not None:
        base_tables = read_case_tables(warehouse, baseline_id, [case_id], threshold)
        if base_tables is None and args.baseline:
            return _fail(
                f"baseline run {baseline_id!r} has not been scored in {warehouse.root}"
                f"{_suggest(baseline_id, _scored(warehouse))}"
            )
        # the side by side pairs attempts by number, so a focused trace meets the baseline's attempt of that number
        baseline = build_story(base_tables, case_id) if base_tables is not None else None
    print(case_story_text(story, baseline), end="")
    if args.html:
        path = Path(args.html)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(case_page_html(story, baseline), encoding="utf-8")
        print(f"\nwrote {path}")
    return EXIT_OK
