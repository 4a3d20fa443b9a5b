"""The `eval-pipeline import FORMAT SOURCE... --run RUN_ID` command: another tool's traces as an evaluation run."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from eval_pipeline.contracts.identifiers import identifier_arg
from eval_pipeline.importers import IMPORTERS, TRACE_IMPORTERS, ImporterError, ImportRun, Matching
from eval_pipeline.importers.bfcl_schema import MAX_EXPANSION as BFCL_MAX_EXPANSION
from eval_pipeline.importers.common import DEFAULT_CORPUS_VERSION, REJECTS_FILE
from eval_pipeline.importers.doc_ids import DOC_ID_KEYS
from eval_pipeline.io.storage import InputError

DESCRIPTION = """\
Import traces recorded by another tool as one evaluation run under the data root, so that
`eval-pipeline run` scores them like any other run. Writes cases/<dataset_version>/<case_id>.yaml,
tools/<environment_version>/tools.yaml (unless it exists), corpus/<corpus_version>/docs.jsonl (empty, unless
the version exists; for otlp, langfuse, ragas and deepeval a new version with the source's texts, below),
traces/<RUN_ID>/run.yaml and traces/<RUN_ID>/<source>.jsonl (<format>.jsonl for the trace importers). \
A source is read by its
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

  otlp             OpenTelemetry traces as OTLP/JSON: one ExportTraceServiceRequest a line (the Collector's
                   file exporter), one JSON document, or a directory of such files; several SOURCEs allowed.
                   Spans in the OpenInference form (Phoenix, openinference-instrumentation-*: RETRIEVER,
                   RERANKER, LLM, TOOL spans) or the OpenTelemetry GenAI conventions (gen_ai.* attributes, and
                   the older gen_ai.* events; give the logs files beside the spans where they came as OTLP log
                   records). One OTel trace is one attempt: retrieval rounds from retriever spans, the answer
                   from the last model output, tool calls with their tool spans' results.
  langfuse         Langfuse observations (JSONL, CSV or Parquet, as its export and API write them), grouped
                   by trace: RETRIEVER outputs become retrieval rounds (--doc-path names the documents' field
                   when the output has another shape), GENERATIONs the answer and tool calls, TOOLs results.
  ragas            a Ragas EvaluationDataset (JSONL, a JSON array, or CSV): single-turn rows (user_input,
                   retrieved_contexts, response, reference, reference_contexts ...) and multi-turn rows
                   (messages with tool_calls, reference_tool_calls). Rows carry their own gold.
  deepeval         DeepEval test cases (JSON, JSONL or CSV as EvaluationDataset.save_as writes them): input,
                   actual_output, expected_output, context, retrieval_context, tools_called,
                   expected_tools. Rows carry their own gold.

For otlp, langfuse, ragas and deepeval:
  documents get ids in this order: the source's document id, a metadata key (--doc-id-key, default
  {keys}), the corpus document with exactly the same text (--corpus-version), else doc-<content
  digest> (the same text, the same id in every run). Texts the corpus version lacks are written to a
  new corpus version, <corpus version>-<RUN_ID> (or <RUN_ID>-docs without --corpus-version); no version
  is overwritten. A metadata value naming chunks with different texts (a file name) is not an id: those
  documents get their ids from their text.
  when DATA/cases/<dataset version> exists, each trace meets its golden case by --case-key (default
  case_id: OpenInference metadata, the span attribute case_id or eval.case_id, Langfuse metadata, a row
  field) or else by its exact input text; a trace that meets none is rejected with its reason and no
  case is written. Without golden cases the cases are written from the source's own gold (Ragas and
  DeepEval references); a RAG trace without any is rejected up front (nothing to score retrieval
  against), unless another attempt of its case states the case. Repeated attempts of one case are numbered
  in start-time order.

exit status: 0 imported (rejects, if any, are listed), 1 no record could be imported, 2 the import could not run
(a missing file, a run or corpus version that exists without --force, an unknown option).
""".format(rejects=REJECTS_FILE, keys=", ".join(DOC_ID_KEYS))


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `import` command to the eval-pipeline command line."""
    parser = subparsers.add_parser(
        "import",
        help="import OTLP (OpenInference, OTel GenAI), Langfuse, Ragas, DeepEval, τ-bench, OpenAI chat-message or BFCL "
        "traces as an evaluation run",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "format",
        choices=sorted([*IMPORTERS, *TRACE_IMPORTERS]),
        metavar="FORMAT",
        help=" | ".join([*TRACE_IMPORTERS, *IMPORTERS]),
    )
    parser.add_argument(
        "source",
        metavar="SOURCE",
        nargs="*",
        help="the file to import; for otlp, files or directories; for bfcl, the question file (or --questions)",
    )
    parser.add_argument(
        "--run",
        dest="run_id",
        required=True,
        metavar="RUN_ID",
        type=identifier_arg("run id"),
        help="run id of the imported run; trace ids are prefixed with it",
    )
    parser.add_argument("--data", default="data", metavar="DIR", help="data root to write into (default: data)")
    parser.add_argument(
        "--dataset-version",
        metavar="VERSION",
        type=identifier_arg("dataset version"),
        help="dataset version of the cases (default: <format>-<source file stem>)",
    )
    parser.add_argument(
        "--environment-version",
        metavar="VERSION",
        type=identifier_arg("environment version"),
        help="environment version of the tool registry (default: the dataset version)",
    )
    parser.add_argument(
        "--corpus-version",
        metavar="VERSION",
        type=identifier_arg("corpus version"),
        help="corpus version named in run.yaml; for otlp, langfuse, ragas and deepeval also the corpus whose "
        "texts give retrieved documents their ids (default: the documents the source holds, as "
        f"<RUN_ID>-docs; for the other formats {DEFAULT_CORPUS_VERSION}, written empty if absent)",
    )
    parser.add_argument(
        "--tools",
        metavar="TOOLS_YAML",
        help="a tools.yaml registry to use when the environment version has none yet "
        "(default: the source's tool definitions, else inferred from the calls)",
    )
    parser.add_argument(
        "--tool-match",
        choices=("strict_order", "unordered", "goal_only"),
        help="tool_match of the written cases (tau-bench default: unordered; openai-messages default: "
        "unordered with reference calls, goal_only without)",
    )
    parser.add_argument("--candidate", help="candidate named in run.yaml (default: the source file name)")
    parser.add_argument("--model", help="model named in run.yaml")
    parser.add_argument(
        "--mode",
        choices=("gate", "exploratory"),
        default=None,
        help="run mode in run.yaml (default: exploratory, never gated, unless --baseline names a baseline)",
    )
    parser.add_argument(
        "--baseline",
        metavar="RUN",
        type=identifier_arg("run id"),
        help="gate the run against RUN, a run of the same dataset under DATA/traces "
        "(run.yaml gets mode: gate and baseline_run_id: RUN)",
    )
    parser.add_argument(
        "--force", action="store_true", help="replace the run if traces/<RUN_ID>/run.yaml already exists"
    )
    traces = parser.add_argument_group("otlp, langfuse, ragas, deepeval")
    traces.add_argument(
        "--case-key",
        default="case_id",
        metavar="KEY",
        help="the metadata key, attribute or field that names a trace's golden case (default: case_id)",
    )
    traces.add_argument(
        "--doc-id-key",
        action="append",
        metavar="KEY",
        help=f"a document metadata key that holds its id, tried in the order given (default: {', '.join(DOC_ID_KEYS)})",
    )
    traces.add_argument(
        "--doc-path",
        metavar="PATH",
        help="langfuse: the dotted path of the documents list in a RETRIEVER observation's output "
        "(default: the output itself when it is a list, else documents)",
    )
    bfcl = parser.add_argument_group("bfcl")
    bfcl.add_argument("--questions", metavar="FILE", help="BFCL question file (default: SOURCE)")
    bfcl.add_argument(
        "--answers", metavar="FILE", help="its possible-answer file (default: possible_answer/<same name> beside it)"
    )
    results = bfcl.add_mutually_exclusive_group()
    results.add_argument(
        "--results", metavar="FILE", help="BFCL model result file (JSONL of {id, result}) to import as traces"
    )
    results.add_argument(
        "--self-check", action="store_true", help="write one trace per item from its first accepted answer"
    )
    bfcl.add_argument(
        "--collisions",
        choices=("qualify", "error"),
        default="qualify",
        help="a function name defined differently by two items: register each as <name>@<first item> "
        "(default) or refuse the file",
    )
    bfcl.add_argument(
        "--underscore-to-dot",
        action="store_true",
        help="a called name that is an offered name with '.' written '_' is that function",
    )
    bfcl.add_argument(
        "--max-expansion",
        type=int,
        default=BFCL_MAX_EXPANSION,
        metavar="N",
        help="most concrete accepted values of one parameter after expanding nested answers "
        f"(default: {BFCL_MAX_EXPANSION})",
    )
    parser.set_defaults(handler=run_import)
    return parser


def _import_run(args: argparse.Namespace) -> ImportRun:
    """The run the arguments name: its id, data root, versions and manifest fields."""
    return ImportRun(
        run_id=args.run_id,
        data_root=args.data,
        dataset_version=args.dataset_version,
        environment_version=args.environment_version,
        corpus_version=args.corpus_version,
        tools=args.tools,
        candidate=args.candidate,
        model=args.model,
        mode=args.mode,
        baseline_run_id=args.baseline,
        overwrite=args.force,
    )


def _trace_import(args: argparse.Namespace):
    """Run an importer of RAG and agent traces (otlp, langfuse, ragas, deepeval) on the arguments."""
    if not args.source:
        raise ImporterError(f"{args.format} needs a SOURCE file")
    if len(args.source) > 1 and args.format != "otlp":
        raise ImporterError(f"{args.format} reads one SOURCE file, got {len(args.source)}")
    run = _import_run(args)
    matching = Matching(case_key=args.case_key, doc_id_keys=tuple(args.doc_id_key or DOC_ID_KEYS))
    extra = {"doc_path": args.doc_path} if args.format == "langfuse" else {}
    if args.doc_path and args.format != "langfuse":
        raise ImporterError(f"--doc-path is an option of langfuse, not of {args.format}")
    sources = args.source if args.format == "otlp" else args.source[0]
    return TRACE_IMPORTERS[args.format](sources, run, matching, **extra)


def run_import(args: argparse.Namespace) -> int:
    """Run the importer the arguments name, print its summary, and return the exit status."""
    if args.format in TRACE_IMPORTERS:
        trace_only = [
            flag
            for flag, value in (
                ("--questions", args.questions),
                ("--results", args.results),
                ("--self-check", args.self_check),
                ("--tool-match", args.tool_match),
            )
            if value
        ]
        if trace_only:
            print(f"eval-pipeline import: options not read by {args.format}: {', '.join(trace_only)}", file=sys.stderr)
            return 2
        try:
            summary = _trace_import(args)
        except (ImporterError, InputError) as exc:
            print(f"eval-pipeline import: {exc}", file=sys.stderr)
            return 2
        return _report(summary, args)
    if len(args.source) > 1:
        print(f"eval-pipeline import: {args.format} reads one SOURCE file, got {len(args.source)}", file=sys.stderr)
        return 2
    args.source = args.source[0] if args.source else None
    options: dict[str, Any] = {}  # the format's own options; the run's are its ImportRun
    if args.tool_match:
        options["tool_match"] = args.tool_match
    source = args.source
    bfcl_given = [
        flag
        for flag, value in (
            ("--questions", args.questions),
            ("--answers", args.answers),
            ("--results", args.results),
            ("--self-check", args.self_check),
            ("--underscore-to-dot", args.underscore_to_dot),
        )
        if value
    ]
    if args.format == "bfcl":
        if args.source and args.questions and args.source != args.questions:
            print("eval-pipeline import: give the question file once, as SOURCE or --questions", file=sys.stderr)
            return 2
        source = args.questions or args.source
        options.update(
            answers=args.answers,
            results=args.results,
            self_check=args.self_check,
            collisions=args.collisions,
            underscore_to_dot=args.underscore_to_dot,
            max_expansion=args.max_expansion,
        )
    elif bfcl_given:
        print(f"eval-pipeline import: bfcl options given to {args.format}: {', '.join(bfcl_given)}", file=sys.stderr)
        return 2
    trace_given = [
        flag
        for flag, value in (
            ("--case-key", args.case_key != "case_id"),
            ("--doc-id-key", args.doc_id_key),
            ("--doc-path", args.doc_path),
        )
        if value
    ]
    if trace_given:
        print(
            f"eval-pipeline import: options of otlp, langfuse, ragas and deepeval given to {args.format}: "
            f"{', '.join(trace_given)}",
            file=sys.stderr,
        )
        return 2
    if not source:
        print(f"eval-pipeline import: {args.format} needs a SOURCE file", file=sys.stderr)
        return 2
    try:
        summary = IMPORTERS[args.format](source, _import_run(args), **options)
    except (ImporterError, InputError) as exc:
        print(f"eval-pipeline import: {exc}", file=sys.stderr)
        return 2
    return _report(summary, args)


def _report(summary, args: argparse.Namespace) -> int:
    print("\n".join(summary.lines()))
    if summary.mode == "exploratory":
        print(
            "  mode: exploratory, not gated; to gate this run, import it again with --baseline RUN "
            "(a run of the same dataset)"
        )
    elif args.baseline:
        print(f"  mode: gate, against baseline run {args.baseline}")
    return 0 if summary.traces else 1
