"""The `eval-pipeline` command line."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from eval_pipeline.contracts.identifiers import identifier_arg
from eval_pipeline.instance import ensure_dagster_home
from eval_pipeline.io.storage import OutsideRootError

EXIT_OK, EXIT_FAILED, EXIT_INPUT = 0, 1, 2


def _fail(message: str, code: int = EXIT_INPUT) -> int:
    print(f"eval-pipeline: error: {message}", file=sys.stderr)
    return code


def _cmd_run(args: argparse.Namespace) -> int:
    if args.executor == "in_process":
        # Great Expectations takes its validator process about two seconds of a core to import: started first, it
        # imports while this one imports Dagster and makes the instance and the job, not beside the run's first steps
        from eval_pipeline.quality.remote import warm_up_in_background

        warm_up_in_background()
    from eval_pipeline.runner import RunnerError, run_pipeline

    try:
        return run_pipeline(
            data=args.data,
            run_ids=args.run,
            warehouse=args.warehouse,
            reports=args.reports,
            deid_demo=args.deid_demo,
            quiet=args.quiet,
            executor=args.executor,
            max_concurrent=args.max_concurrent,
        )
    except RunnerError as exc:
        return _fail(str(exc))


def _cmd_ui(args: argparse.Namespace) -> int:
    home = ensure_dagster_home()
    os.environ.setdefault("EVAL_PIPELINE_DATA", args.data)
    if args.deid_demo:
        os.environ["EVAL_PIPELINE_DEID_DEMO"] = "1"
    # the same resolution as `run`: the project's workspace.yaml wherever below it the UI is started; outside a
    # project the code location is the installed package itself
    code = (
        ["-w", str(home.project / "workspace.yaml")]
        if home.project is not None
        else ["-m", "eval_pipeline.definitions"]
    )
    command = [sys.executable, "-m", "dagster", "dev", *code, "-h", args.host, "-p", str(args.port)]
    print(f"{home.announcement().splitlines()[0]}\n$ {' '.join(command)}", file=sys.stderr)
    os.execv(sys.executable, command)
    return EXIT_OK


def _cmd_schemas(args: argparse.Namespace) -> int:
    from eval_pipeline.contracts.schemas import write_schemas

    for path in write_schemas(Path(args.out)):
        print(path)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="eval-pipeline",
        description="Stage-wise batch evaluation of RAG assistants and tool-using agents on Dagster: "
        "score every trace stage by stage, attribute each failure to its first failing stage, gate releases.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser(
        "run",
        help="materialize the whole graph for one or all trace batches and print a summary",
        description="Materialize every asset of one run (or every run under DATA/traces) against the persistent "
        "Dagster instance, so `eval-pipeline ui` shows the same runs and lineage. "
        "The instance is DAGSTER_HOME when set, "
        "else the .dagster folder of the project folder (the nearest folder from here upwards holding dagster.yaml and "
        "workspace.yaml), else ~/.eval_pipeline/dagster; the command prints which and why. Prints one line per step, "
        "a summary per lane and the report paths. Exit status: 0 the evaluation completed, whatever the release "
        "decision (a blocked release is printed in the summary; `eval-pipeline gate` exits 1 for it); 1 a step or a "
        "blocking data check failed, so the evaluation is incomplete; 2 bad input or configuration, nothing ran.",
    )
    run.add_argument("--data", default="data", help="input root: local folder or object-store URL (default: data)")
    run.add_argument(
        "--run",
        action="append",
        metavar="RUN_ID",
        type=identifier_arg("run id"),
        help="run to evaluate (repeatable; default: every run)",
    )
    run.add_argument("--warehouse", default=None, help="Delta warehouse root (default: DATA/warehouse)")
    run.add_argument("--reports", default=None, help="report folder (default: DATA/reports)")
    run.add_argument(
        "--deid-demo",
        action="store_true",
        help="use the fixed demo de-identification key when EVAL_PIPELINE_DEID_KEY is not set (local demos only)",
    )
    run.add_argument("--quiet", action="store_true", help="no per-step progress lines")
    run.add_argument(
        "--executor",
        choices=["in_process", "multiprocess", "celery"],
        default="in_process",
        help="in_process (default); multiprocess: independent assets of a run in parallel subprocesses; "
        "celery: every step a task for Celery workers (dagster-celery worker start -A dagster_celery.app "
        "-y deploy/celery/celery.yaml) on the broker in DAGSTER_CELERY_BROKER_URL, results in "
        "DAGSTER_CELERY_BACKEND_URL; needs an instance every worker reaches (deploy/README.md)",
    )
    run.add_argument(
        "--max-concurrent", type=int, default=2, help="subprocesses for --executor multiprocess (default 2)"
    )
    run.set_defaults(handler=_cmd_run)

    ui = sub.add_parser(
        "ui",
        help="open the Dagster UI on the same instance as `run`",
        description="Run `dagster dev` on the instance `run` uses (DAGSTER_HOME when set, else the "
        "project folder's .dagster, else ~/.eval_pipeline/dagster) with the project's workspace.yaml "
        "(outside a project: the installed eval_pipeline.definitions).",
    )
    ui.add_argument("--data", default="data", help="input root the sensors watch (default: data)")
    ui.add_argument("--host", default="127.0.0.1")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--deid-demo", action="store_true", help="allow the demo de-identification key")
    ui.set_defaults(handler=_cmd_ui)

    schemas = sub.add_parser(
        "schemas",
        help="write the JSON Schema files of the input contracts",
        description="Write one JSON Schema file per input contract (docs/inputs.md) for validating your own exports.",
    )
    schemas.add_argument(
        "--out", default="eval_pipeline/schemas", help="output folder (default: eval_pipeline/schemas)"
    )
    schemas.set_defaults(handler=_cmd_schemas)

    for register in all_registrations():
        register(sub)
    return parser


ENTRY_POINT_GROUP = "eval_pipeline.commands"


def _entry_point_registrations() -> list:
    """The `register(subparsers)` functions of other installed distributions (group `eval_pipeline.commands`)."""
    from importlib.metadata import entry_points

    registrations = []
    for entry in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            registrations.append(_guarded(entry.name, entry.value, entry.load()))
        except (ImportError, AttributeError) as exc:
            # A stale install of another distribution must not take the product's own commands down with it.
            print(f"eval-pipeline: warning: command {entry.name!r} ({entry.value}) not loaded: {exc}", file=sys.stderr)
    return registrations


def _guarded(name: str, value: str, register):
    """An extension's registration that cannot break the command line: a name the product uses, or any error while
    registering, leaves that command out with a warning."""

    def guarded(sub) -> None:
        if name in sub.choices:
            print(f"eval-pipeline: warning: command {name!r} ({value}) not loaded: the name is taken", file=sys.stderr)
            return
        try:
            register(sub)
        except Exception as exc:  # noqa: BLE001 - any failure of foreign code
            sub.choices.pop(name, None)
            print(f"eval-pipeline: warning: command {name!r} ({value}) not loaded: {exc}", file=sys.stderr)

    return guarded


def all_registrations() -> list:
    """Every subcommand registration beyond run, ui and schemas.

    The product's own, then installed extensions' (`bench`).
    """
    # Here and not in cli.commands, which the command modules import for its shared helpers: no cycle among them.
    from eval_pipeline.cli.commands import REGISTRATIONS
    from eval_pipeline.cli.exports import register as register_export
    from eval_pipeline.cli.importers import register as register_import
    from eval_pipeline.cli.judge import register as register_judge
    from eval_pipeline.cli.show import register as register_show
    from eval_pipeline.cli.trec import register as register_trec

    return [
        *REGISTRATIONS,
        register_show,
        register_export,
        register_trec,
        register_import,
        register_judge,
        *_entry_point_registrations(),
    ]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `eval-pipeline` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # A command cut off while writing has no result of its own; 1 is what Python exits with on a broken pipe.
    code = EXIT_FAILED
    try:
        code = int(args.handler(args) or 0)
        # Flushed here, not at interpreter exit: a reader that went away (`… | head -1`) then fails this flush, inside
        # the try, instead of printing "Exception ignored … BrokenPipeError" at exit and exiting 120.
        sys.stdout.flush()
    except OutsideRootError as exc:
        # a link out of the data root, found by any command (show, export, import …): bad input, like bad configuration
        code = _fail(str(exc))
    except BrokenPipeError:
        # As Python's documentation recommends: what is still buffered goes to devnull, so the flush at exit succeeds.
        # The exit status stays the command's own when it had finished (a failed gate still exits 1).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return code


__all__ = ["ENTRY_POINT_GROUP", "all_registrations", "build_parser", "main"]
