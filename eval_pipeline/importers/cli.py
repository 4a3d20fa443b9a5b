"""`eval-pipeline import FORMAT SOURCE --run RUN_ID [--data DIR]`: write another tool's trajectories as a SPEC §2 run."""

from __future__ import annotations

import argparse
import sys

from eval_pipeline.importers import IMPORTERS, ImporterError
from eval_pipeline.importers.common import DEFAULT_CORPUS_VERSION, REJECTS_FILE
from eval_pipeline.io.storage import InputError

DESCRIPTION = """\
Import trajectories recorded by another tool as one evaluation run under the data root, so that
`eval-pipeline run` scores them like any other run. Writes cases/<dataset_version>/<case_id>.yaml,
tools/<environment_version>/tools.yaml (unless it exists), corpus/<corpus_version>/docs.jsonl (empty, unless
the version exists), traces/<RUN_ID>/run.yaml and traces/<RUN_ID>/<source>.jsonl. Records that cannot be read
are listed in traces/<RUN_ID>/{rejects}; records with defective messages (a tool message with no matching
call, arguments that are not a JSON object, a tool missing from the registry) become traces with harness
status `error`, which the pipeline counts as incomplete.

formats:
  tau-bench        a τ-bench results file (JSON array of {{task_id, trial, reward, info, traj}}): tasks become
                   cases whose reference calls are the task's actions, trials become attempts, the reward
                   becomes the outcome through the milestone tau_bench_reward (reward >= 0.999999).
  openai-messages  JSONL of {{messages, case_id?, attempt?, tools?, final_state?, success?, usage?, ...case
                   fields}}: chat-completions messages with tool_calls and tool messages.

exit status: 0 imported (rejects, if any, are listed), 1 no record could be imported, 2 the import could not run.
""".format(rejects=REJECTS_FILE)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `import` command to the eval-pipeline command line."""
    parser = subparsers.add_parser(
        "import",
        help="import τ-bench or OpenAI chat-message trajectories as an evaluation run",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("format", choices=sorted(IMPORTERS), metavar="FORMAT", help="tau-bench | openai-messages")
    parser.add_argument("source", metavar="SOURCE", help="the file to import (JSON array or JSONL)")
    parser.add_argument("--run", dest="run_id", required=True, metavar="RUN_ID",
                        help="run id of the imported run; trace ids are prefixed with it")
    parser.add_argument("--data", default="data", metavar="DIR", help="data root to write into (default: data)")
    parser.add_argument("--dataset-version", metavar="VERSION",
                        help="dataset version of the cases (default: <format>-<source file stem>)")
    parser.add_argument("--environment-version", metavar="VERSION",
                        help="environment version of the tool registry (default: the dataset version)")
    parser.add_argument("--corpus-version", default=DEFAULT_CORPUS_VERSION, metavar="VERSION",
                        help=f"corpus version named in run.yaml (default: {DEFAULT_CORPUS_VERSION}, written empty if absent)")
    parser.add_argument("--tools", metavar="TOOLS_YAML",
                        help="a tools.yaml registry to use when the environment version has none yet "
                             "(default: the source's tool definitions, else inferred from the calls)")
    parser.add_argument("--tool-match", choices=("strict_order", "unordered", "goal_only"),
                        help="tool_match of the written cases (tau-bench default: unordered; openai-messages default: "
                             "unordered with reference calls, goal_only without)")
    parser.add_argument("--candidate", help="candidate named in run.yaml (default: the source file name)")
    parser.add_argument("--model", help="model named in run.yaml")
    parser.add_argument("--mode", choices=("gate", "exploratory"), default="gate", help="run mode in run.yaml (default: gate)")
    parser.add_argument("--force", action="store_true", help="replace the run if traces/<RUN_ID>/run.yaml already exists")
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
        "overwrite": args.force,
    }
    if args.tool_match:
        options["tool_match"] = args.tool_match
    try:
        summary = IMPORTERS[args.format](args.source, args.run_id, args.data, **options)
    except (ImporterError, InputError) as exc:
        print(f"eval-pipeline import: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary.lines()))
    return 0 if summary.traces else 1
