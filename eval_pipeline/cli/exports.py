"""`eval-pipeline export`: a warehouse table out as CSV, JSON lines or Parquet, or per-trace results to Langfuse or
OTLP."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import BinaryIO

from eval_pipeline.contracts.identifiers import identifier_arg
from eval_pipeline.exports import langfuse, otel
from eval_pipeline.exports.tables import (
    FILE_FORMATS,
    ExportError,
    check_table,
    exportable_tables,
    runs_to_export,
    write_table,
)

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

The restricted tables (raw lines, validated traces and cases: personal data) are never exported, and neither is a
table partition (a run's rows) whose last materialization in this warehouse failed a blocking check (a privacy scan,
the table contract), as the Dagster instance (DAGSTER_HOME) recorded it: the failed checks are named.

With --endpoint, credentials never follow a redirect: a redirect to another origin (scheme, host, port) is refused
and its target named; one to the same origin is followed only when it keeps the method and body (307, 308), never
a 301, 302 or 303 (they would resend the POST as a GET without its body). A score or span counts as sent only when
the receiver confirmed it. What the receiver answers is shown cut to 200 characters and scrubbed of anything that
looks like a credential (Authorization, Bearer and Basic values, the keys given, pk-/sk- keys, JWTs).

CSV cells that start with =, +, -, @ (after leading whitespace), a tab or a carriage return are written with a
leading ' so that spreadsheets read them as text, not formulas; numeric columns stay numbers, and the jsonl and
parquet exports write every value as it is stored.

Exit status: 0 done, 1 the receiver refused something (named), redirected or could not be reached, 2 bad usage,
unknown or restricted table, unknown run, a partition whose blocking checks failed.
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
    parser.add_argument(
        "--run", metavar="RUN", type=identifier_arg("run id"), help="only this run (default: every run)"
    )
    parser.add_argument("--format", required=True, choices=FORMATS, help="output format")
    parser.add_argument("--output", metavar="FILE", help="file to write (default: standard output; parquet needs one)")
    parser.add_argument("--endpoint", metavar="URL", help="langfuse/otlp: send to this server instead of writing")
    parser.add_argument("--data", default="data", metavar="DIR", help="input root (default: data)")
    parser.add_argument("--warehouse", metavar="DIR", help="Delta warehouse root (default: DATA/warehouse)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds per HTTP request with --endpoint (default 30)",
    )


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
                raise ExportError(
                    f"table {args.table!r} holds no per-trace scores for --format {args.format}; "
                    f"choose one of: {', '.join(choices)}"
                )
            tables = [t for t in langfuse.tables_of(args.table) if t in exportable]
            if args.table != langfuse.ALL_SCORES and not tables:
                raise ExportError(
                    f"table {args.table!r} is not in {warehouse.root}; score tables there: "
                    f"{', '.join(t for t in langfuse.SCORE_TABLES if t in exportable) or 'none'}"
                )
        runs = runs_to_export(warehouse, tables, args.run)
        refuse_failed_partitions(warehouse, tables, runs)
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


def failed_checks(warehouse, tables: list[str], runs: list[str]) -> dict[tuple[str, str], list[str]]:
    """(table, run) -> `asset.check` names of the blocking checks that failed on the partition's last materialization
    into this warehouse, as the Dagster instance recorded them; partitions the instance has no record of are absent."""
    import dagster as dg

    from eval_pipeline.defs.resources import LANE_PREFIXES, lane_key
    from eval_pipeline.instance import ensure_dagster_home

    ensure_dagster_home()
    failed: dict[tuple[str, str], list[str]] = {}
    evaluations: dict[str, list] = {}
    with dg.DagsterInstance.get() as instance:
        for table in tables:
            uri = warehouse.uri(table)
            for key in (dg.AssetKey(table), *(lane_key(lane, table) for lane in LANE_PREFIXES)):
                for run_id in runs:
                    # the newest materialization written into this warehouse: the instance may also know other
                    # warehouses' runs of the same name
                    records = instance.fetch_materializations(
                        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[run_id]), limit=50
                    ).records
                    mine = [r for r in records if _delta_table(r) == uri]
                    if not mine:
                        continue
                    dagster_run = mine[0].run_id
                    if dagster_run not in evaluations:
                        evaluations[dagster_run] = [
                            e.dagster_event.event_specific_data
                            for e in instance.all_logs(dagster_run, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
                        ]
                    names = [
                        f"{e.asset_key.to_user_string()}.{e.check_name}"
                        for e in evaluations[dagster_run]
                        if e.asset_key == key and not e.passed and e.blocking
                    ]
                    if names:
                        failed.setdefault((table, run_id), []).extend(sorted(set(names)))
    return failed


def _delta_table(record) -> str | None:
    """The Delta table URI the warehouse IO manager recorded on a materialization."""
    value = record.asset_materialization.metadata.get("delta_table") if record.asset_materialization else None
    return getattr(value, "value", value)


def refuse_failed_partitions(warehouse, tables: list[str], runs: list[str]) -> None:
    """ExportError naming every (table, run) whose blocking checks failed, and the checks."""
    failed = failed_checks(warehouse, tables, runs)
    if failed:
        parts = [f"{table} of run {run_id} ({', '.join(names)})" for (table, run_id), names in sorted(failed.items())]
        raise ExportError(
            f"blocking checks failed, not exported: {'; '.join(parts)}; fix the input and run `eval-pipeline run` again"
        )


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
            print(
                f"eval-pipeline export: refused: score {failure.score_id} (trace {failure.trace_id}, {failure.name}): "
                f"{failure.status} {failure.message}",
                file=sys.stderr,
            )
        if len(result.failures) > len(shown):
            print(f"eval-pipeline export: … and {len(result.failures) - len(shown)} more refused", file=sys.stderr)
        code = EXIT_FAILED
    if result.stopped:
        print(
            f"eval-pipeline export: error: {result.stopped}; stopped after {result.accepted:,} accepted scores",
            file=sys.stderr,
        )
        code = EXIT_FAILED
    refused = f", {len(result.failures):,} refused" if result.failures else ""
    print(
        f"sent {result.accepted:,} of {rows.height:,} Langfuse scores of {args.table} ({_scope(args)}) to "
        f"{args.endpoint}{refused}",
        file=sys.stderr,
    )
    return code


def _export_otlp(args: argparse.Namespace, warehouse, tables: list[str], runs: list[str]) -> int:
    requests = otel.trace_requests(otel.evaluation_spans(warehouse, tables, runs))
    if not args.endpoint:
        with _sink(args.output) as out:
            spans, events = otel.write_requests(requests, out)
        print(
            f"exported {spans:,} spans ({events:,} evaluation events) of {args.table} ({_scope(args)}) to "
            f"{_where(args)}",
            file=sys.stderr,
        )
        return EXIT_OK
    result = otel.send_requests(
        requests, args.endpoint, headers=otel.headers_from_env(os.environ), timeout=args.timeout
    )
    if result.stopped:
        print(
            f"eval-pipeline export: error: {result.stopped}; stopped after {result.accepted:,} accepted spans",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(
        f"sent {result.accepted:,} spans ({result.events:,} evaluation events) of {args.table} ({_scope(args)}) to "
        f"{args.endpoint.rstrip('/')}{otel.TRACES_PATH}",
        file=sys.stderr,
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eval_pipeline.cli.exports TABLE ...`: the same command without the eval-pipeline wrapper."""
    parser = argparse.ArgumentParser(
        prog="eval-pipeline export",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
