"""`eval-pipeline export`: a warehouse table out as CSV, JSON lines or Parquet, or per-trace results to Langfuse or OTLP."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from eval_pipeline.contracts.identifiers import identifier_arg
from eval_pipeline.exports import langfuse, otel
from eval_pipeline.exports.tables import FILE_FORMATS, ExportError, check_table, exportable_tables, runs_to_export, write_table

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
RESULT_FORMATS = ("langfuse", "otlp")
FORMATS = (*FILE_FORMATS, *RESULT_FORMATS)
STDOUT = "-"

DESCRIPTION = """\
Write one warehouse table (every run, or --run RUN) to a file or standard output, or send per-trace results to
Langfuse or an OpenTelemetry collector.

  csv      one line per row; list and struct columns as compact JSON text, so nothing is lost
  jsonl    one JSON object per row, nested columns as JSON arrays and objects
  parquet  the Arrow schema the table is stored with (needs --output)
  langfuse Langfuse score objects (POST /api/public/scores bodies), one a line; with --endpoint URL sent as
           score-create events to URL/api/public/ingestion (batches of 100, basic auth from LANGFUSE_PUBLIC_KEY
           and LANGFUSE_SECRET_KEY). TABLE is stage_results (CATEGORICAL eval.<lane>.<stage> = status, reason as
           comment), retrieval_scores, grounding_scores, citation_scores, answer_scores, tool_scores,
           outcome_scores (NUMERIC / BOOLEAN eval.<lane>.<metric>), or `scores` for all of them. Score ids are
           UUIDs of (run, trace, name): sending again overwrites. A value that could not be computed is never
           sent as a number: null metrics are left out and incomplete stages are the category `incomplete`.
  otlp     OTLP/JSON ExportTraceServiceRequest objects (at most 512 spans each), one a line; with --endpoint URL
           POSTed to URL/v1/traces (extra headers from OTEL_EXPORTER_OTLP_HEADERS). One span per evaluated
           (trace, lane), each evaluation a gen_ai.evaluation.result event; same TABLE choices as langfuse.

The restricted tables (raw lines, validated traces and cases: personal data) are never exported.
Exit status: 0 done, 1 the receiver refused something (named) or could not be reached, 2 bad usage, unknown or
restricted table, unknown run.
"""

EPILOG = """\
examples:
  eval-pipeline export claims --run base-41 --format jsonl --output verdicts.jsonl
  eval-pipeline calibrate --verdicts verdicts.jsonl --labels data/labels/grounding/baseline-claims.jsonl
    (claims lines carry trace_id, claim, verdict, score, judge_version, status: calibrate's verdict format;
    labels match by trace id, so verdicts and labels must come from the same run)
  eval-pipeline export retrieval_scores --format csv | head
  eval-pipeline export scores --run cand-42 --format langfuse --endpoint https://cloud.langfuse.com
  eval-pipeline export scores --format otlp --endpoint http://localhost:4318
"""


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `export` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "export",
        help="a warehouse table as csv, jsonl or parquet, or per-trace results to Langfuse or OpenTelemetry",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(handler=run_export)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="TABLE", help="warehouse table, e.g. claims; for langfuse/otlp also `scores`")
    parser.add_argument("--run", metavar="RUN", type=identifier_arg("run id"), help="only this run (default: every run)")
    parser.add_argument("--format", required=True, choices=FORMATS, help="output format")
    parser.add_argument("--output", metavar="FILE", help="file to write (default: standard output; parquet needs one)")
    parser.add_argument("--endpoint", metavar="URL", help="langfuse/otlp: send to this server instead of writing")
    parser.add_argument("--data", default="data", metavar="DIR", help="input root (default: data)")
    parser.add_argument("--warehouse", metavar="DIR", help="Delta warehouse root (default: DATA/warehouse)")
    parser.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS", help="seconds per HTTP request with --endpoint (default 30)")


def _error(message: str, code: int = EXIT_USAGE) -> int:
    print(f"eval-pipeline export: error: {message}", file=sys.stderr)
    return code


def _usage_problem(args: argparse.Namespace) -> str | None:
    """Why the flags do not go together, or None."""
    if args.endpoint and args.format not in RESULT_FORMATS:
        return f"--endpoint goes with --format langfuse or otlp, not {args.format}"
    if args.endpoint and args.output:
        return "--endpoint sends, --output writes: give one of them"
    if args.format == "parquet" and (not args.output or args.output == STDOUT):
        return "--format parquet needs --output FILE (Parquet is not written to standard output)"
    if args.timeout <= 0:
        return "--timeout must be positive"
    return None


@contextlib.contextmanager
def _sink(output: str | None) -> Iterator[BinaryIO]:
    """The binary stream the export goes to: the --output file, else standard output."""
    if not output or output == STDOUT:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with open(output, "wb") as stream:
        yield stream


def _where(args: argparse.Namespace) -> str:
    return args.endpoint or (args.output if args.output and args.output != STDOUT else "standard output")


def _scope(args: argparse.Namespace) -> str:
    return f"run {args.run}" if args.run else "every run"


def run_export(args: argparse.Namespace) -> int:
    """Handler of `export`."""
    from eval_pipeline.cli.commands import _warehouse

    problem = _usage_problem(args)
    if problem:
        return _error(problem)
    warehouse = _warehouse(args)
    exportable = exportable_tables(warehouse)
    if not exportable:
        return _error(f"no tables in {warehouse.root} (run `eval-pipeline run` first, or pass --warehouse)")
    try:
        if args.format in FILE_FORMATS:
            tables = [check_table(warehouse, args.table)]
        else:
            choices = [langfuse.ALL_SCORES, *langfuse.SCORE_TABLES]
            if args.table not in choices:
                check_table(warehouse, args.table)  # a restricted or unknown table is refused as such first
                raise ExportError(f"table {args.table!r} holds no per-trace scores for --format {args.format}; "
                                  f"choose one of: {', '.join(choices)}")
            tables = [t for t in langfuse.tables_of(args.table) if t in exportable]
            if args.table != langfuse.ALL_SCORES and not tables:
                raise ExportError(f"table {args.table!r} is not in {warehouse.root}; score tables there: "
                                  f"{', '.join(t for t in langfuse.SCORE_TABLES if t in exportable) or 'none'}")
        runs = runs_to_export(warehouse, tables, args.run)
    except ExportError as exc:
        return _error(str(exc))
    try:
        if args.format in FILE_FORMATS:
            return _export_file(args, warehouse, tables[0], runs)
        if args.format == "langfuse":
            return _export_langfuse(args, warehouse, tables, runs)
        return _export_otlp(args, warehouse, tables, runs)
    except BrokenPipeError:
        raise
    except OSError as exc:
        if args.endpoint:
            raise
        return _error(f"cannot write {_where(args)}: {exc.strerror or exc}")


def _export_file(args: argparse.Namespace, warehouse, table: str, runs: list[str]) -> int:
    if args.format == "parquet":
        rows = write_table(warehouse, table, runs, "parquet", args.output)
    else:
        with _sink(args.output) as out:
            rows = write_table(warehouse, table, runs, args.format, out)
    print(f"exported {rows:,} rows of {table} ({_scope(args)}) to {_where(args)}", file=sys.stderr)
    return EXIT_OK


def _export_langfuse(args: argparse.Namespace, warehouse, tables: list[str], runs: list[str]) -> int:
    rows = langfuse.score_rows(warehouse, tables, runs)
    scores = langfuse.score_objects(rows)
    if not args.endpoint:
        with _sink(args.output) as out:
            count = langfuse.write_scores(scores, out)
        print(f"exported {count:,} Langfuse scores of {args.table} ({_scope(args)}) to {_where(args)}", file=sys.stderr)
        return EXIT_OK
    public_key, secret_key = os.environ.get("LANGFUSE_PUBLIC_KEY"), os.environ.get("LANGFUSE_SECRET_KEY")
    if not public_key or not secret_key:
        return _error("sending to Langfuse needs LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY in the environment")
    result = langfuse.send_scores(scores, args.endpoint, public_key, secret_key, timeout=args.timeout)
    code = EXIT_OK
    if result.failures:
        shown = result.failures[:20]
        for failure in shown:
            print(f"eval-pipeline export: refused: score {failure.score_id} (trace {failure.trace_id}, {failure.name}): "
                  f"{failure.status} {failure.message}", file=sys.stderr)
        if len(result.failures) > len(shown):
            print(f"eval-pipeline export: … and {len(result.failures) - len(shown)} more refused", file=sys.stderr)
        code = EXIT_FAILED
    if result.stopped:
        print(f"eval-pipeline export: error: {result.stopped}; stopped after {result.accepted:,} accepted scores",
              file=sys.stderr)
        code = EXIT_FAILED
    refused = f", {len(result.failures):,} refused" if result.failures else ""
    print(f"sent {result.accepted:,} of {rows.height:,} Langfuse scores of {args.table} ({_scope(args)}) to "
          f"{args.endpoint}{refused}", file=sys.stderr)
    return code


def _export_otlp(args: argparse.Namespace, warehouse, tables: list[str], runs: list[str]) -> int:
    requests = otel.trace_requests(otel.evaluation_spans(warehouse, tables, runs))
    if not args.endpoint:
        with _sink(args.output) as out:
            spans, events = otel.write_requests(requests, out)
        print(f"exported {spans:,} spans ({events:,} evaluation events) of {args.table} ({_scope(args)}) to "
              f"{_where(args)}", file=sys.stderr)
        return EXIT_OK
    result = otel.send_requests(requests, args.endpoint, timeout=args.timeout)
    if result.stopped:
        print(f"eval-pipeline export: error: {result.stopped}; stopped after {result.accepted:,} accepted spans",
              file=sys.stderr)
        return EXIT_FAILED
    print(f"sent {result.accepted:,} spans ({result.events:,} evaluation events) of {args.table} ({_scope(args)}) to "
          f"{args.endpoint.rstrip('/')}{otel.TRACES_PATH}", file=sys.stderr)
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eval_pipeline.cli.exports TABLE ...`: the same command without the eval-pipeline wrapper."""
    parser = argparse.ArgumentParser(prog="eval-pipeline export", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    # as `eval-pipeline`'s main: an export cut off by a reader that went away (`… | head`) stops quietly with 1
    code = EXIT_FAILED
    try:
        code = run_export(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # what is still buffered goes to devnull, so the interpreter's final flush does not complain
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return code


if __name__ == "__main__":
    sys.exit(main())
