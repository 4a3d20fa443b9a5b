"""`eval-pipeline import FORMAT SOURCE --run RUN_ID [--data DIR]`: write another tool's trajectories as a SPEC §2 run."""

from __future__ import annotations

import argparse
import sys

from eval_pipeline.contracts.identifiers import identifier_arg
from eval_pipeline.importers import IMPORTERS, ImporterError
from eval_pipeline.importers.bfcl import MAX_EXPANSION as BFCL_MAX_EXPANSION
from eval_pipeline.importers.common import DEFAULT_CORPUS_VERSION, REJECTS_FILE
from eval_pipeline.io.storage import InputError

DESCRIPTION = """\
Import trajectories recorded by another tool as one evaluation run under the data root, so that
`eval-pipeline run` scores them like any other run. Writes cases/<dataset_version>/<case_id>.yaml,
tools/<environment_version>/tools.yaml (unless it exists), corpus/<corpus_version>/docs.jsonl (empty, unless
the version exists), traces/<RUN_ID>/run.yaml and traces/<RUN_ID>/<source>.jsonl. A source is read by its
content, whatever its name: a JSON array, one (pretty-printed) JSON object, or JSONL. Records that cannot be
read are listed in traces/<RUN_ID>/{rejects}; records with defective messages (a tool result answering no
open call, arguments that are not a JSON object) become traces with harness status `error`, which the
pipeline counts as incomplete. A call of a tool missing from the registry is imported as a call: the
pipeline fails it at tool_selection (reason unknown_tool).

formats:
  tau-bench        a τ-bench results file (JSON array of {{task_id, trial, reward, info, traj}}) or a τ²-bench
                   results file ({{info, tasks, simulations}}): tasks become cases whose reference calls are the
                   task's agent actions (the simulated user's own calls are not the agent's), trials become
                   attempts, the reward becomes the outcome through the milestone tau_bench_reward
                   (reward >= 0.999999). An inferred registry takes tool roles from the τ-bench / τ²-bench
                   tool table (transfer_to_human_agents read-only, its summary not compared).
  openai-messages  JSONL of {{messages, case_id?, attempt?, tools?, final_state?, success?, usage?, ...case
                   fields}}: messages as OpenAI chat-completions (tool_calls, tool messages), τ²-bench
                   messages, legacy OpenAI function_call / function messages, or Anthropic content blocks
                   (tool_use, tool_result).
  bfcl             Berkeley Function Calling Leaderboard items: `import bfcl --questions FILE [--answers FILE]
                   (--results FILE | --self-check)`. Items become cases (reference calls with every accepted
                   value), functions the registry (value_rules bfcl; a name defined differently by two items
                   is registered as <name>@<first item>), BFCL result lines (prompting or function-calling
                   form) or the first accepted answers (--self-check) the traces.

exit status: 0 imported (rejects, if any, are listed), 1 no record could be imported, 2 the import could not run.
""".format(rejects=REJECTS_FILE)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `import` command to the eval-pipeline command line."""
    parser = subparsers.add_parser(
        "import",
        help="import τ-bench, OpenAI chat-message or BFCL trajectories as an evaluation run",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=sorted(IMPORTERS), metavar="FORMAT", help="tau-bench | openai-messages | bfcl")
    parser.add_argument("source", metavar="SOURCE", nargs="?",
                        help="the file to import (JSON array, JSON object or JSONL); for bfcl, the question file (or --questions)")
    parser.add_argument("--run", dest="run_id", required=True, metavar="RUN_ID", type=identifier_arg("run id"),
                        help="run id of the imported run; trace ids are prefixed with it")
    parser.add_argument("--data", default="data", metavar="DIR", help="data root to write into (default: data)")
    parser.add_argument("--dataset-version", metavar="VERSION", type=identifier_arg("dataset version"),
                        help="dataset version of the cases (default: <format>-<source file stem>)")
    parser.add_argument("--environment-version", metavar="VERSION", type=identifier_arg("environment version"),
                        help="environment version of the tool registry (default: the dataset version)")
    parser.add_argument("--corpus-version", default=DEFAULT_CORPUS_VERSION, metavar="VERSION", type=identifier_arg("corpus version"),
                        help=f"corpus version named in run.yaml (default: {DEFAULT_CORPUS_VERSION}, written empty if absent)")
    parser.add_argument("--tools", metavar="TOOLS_YAML",
                        help="a tools.yaml registry to use when the environment version has none yet "
                             "(default: the source's tool definitions, else inferred from the calls)")
    parser.add_argument("--tool-match", choices=("strict_order", "unordered", "goal_only"),
                        help="tool_match of the written cases (tau-bench default: unordered; openai-messages default: "
                             "unordered with reference calls, goal_only without)")
    parser.add_argument("--candidate", help="candidate named in run.yaml (default: the source file name)")
    parser.add_argument("--model", help="model named in run.yaml")
    parser.add_argument("--mode", choices=("gate", "exploratory"), default=None,
                        help="run mode in run.yaml (default: exploratory, never gated, unless --baseline names a baseline)")
    parser.add_argument("--baseline", metavar="RUN", type=identifier_arg("run id"),
                        help="gate the run against RUN, a run of the same dataset under DATA/traces "
                             "(run.yaml gets mode: gate and baseline_run_id: RUN)")
    parser.add_argument("--force", action="store_true", help="replace the run if traces/<RUN_ID>/run.yaml already exists")
    bfcl = parser.add_argument_group("bfcl")
    bfcl.add_argument("--questions", metavar="FILE", help="BFCL question file (default: SOURCE)")
    bfcl.add_argument("--answers", metavar="FILE", help="its possible-answer file (default: possible_answer/<same name> beside it)")
    traces = bfcl.add_mutually_exclusive_group()
    traces.add_argument("--results", metavar="FILE", help="BFCL model result file (JSONL of {id, result}) to import as traces")
    traces.add_argument("--self-check", action="store_true", help="write one trace per item from its first accepted answer")
    bfcl.add_argument("--collisions", choices=("qualify", "error"), default="qualify",
                      help="a function name defined differently by two items: register each as <name>@<first item> "
                           "(default) or refuse the file")
    bfcl.add_argument("--underscore-to-dot", action="store_true",
                      help="a called name that is an offered name with '.' written '_' is that function")
    bfcl.add_argument("--max-expansion", type=int, default=BFCL_MAX_EXPANSION, metavar="N",
                      help="most concrete accepted values of one parameter after expanding nested answers "
                           f"(default: {BFCL_MAX_EXPANSION})")
    parser.set_defaults(handler=run_import)
    return parser


def run_import(args: argparse.Namespace) -> int:
    """Run the importer the arguments name, print its summary, and return the exit status."""
    options = {
        "dataset_version": args.dataset_version,
        "environment_version": args.environment_version,
        "corpus_version": args.corpus_version,
        "tools": args.tools,
        "candidate": args.candidate,
        "model": args.model,
        "mode": args.mode,
        "baseline_run_id": args.baseline,
        "overwrite": args.force,
    }
    if args.tool_match:
        options["tool_match"] = args.tool_match
    source = args.source
    bfcl_given = [flag for flag, value in (("--questions", args.questions), ("--answers", args.answers), ("--results", args.results),
                                           ("--self-check", args.self_check), ("--underscore-to-dot", args.underscore_to_dot)) if value]
    if args.format == "bfcl":
        if args.source and args.questions and args.source != args.questions:
            print("eval-pipeline import: give the question file once, as SOURCE or --questions", file=sys.stderr)
            return 2
        source = args.questions or args.source
        options.update(answers=args.answers, results=args.results, self_check=args.self_check, collisions=args.collisions,
                       underscore_to_dot=args.underscore_to_dot, max_expansion=args.max_expansion)
    elif bfcl_given:
        print(f"eval-pipeline import: bfcl options given to {args.format}: {', '.join(bfcl_given)}", file=sys.stderr)
        return 2
    if not source:
        print(f"eval-pipeline import: {args.format} needs a SOURCE file", file=sys.stderr)
        return 2
    try:
        summary = IMPORTERS[args.format](source, args.run_id, args.data, **options)
    except (ImporterError, InputError) as exc:
        print(f"eval-pipeline import: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary.lines()))
    if summary.mode == "exploratory":
        print("  mode: exploratory, not gated; to gate this run, import it again with --baseline RUN (a run of the same dataset)")
    elif args.baseline:
        print(f"  mode: gate, against baseline run {args.baseline}")
    return 0 if summary.traces else 1
