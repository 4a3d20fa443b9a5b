"""`eval-pipeline trec-eval`: a drop-in for trec_eval over TREC qrels and run files, printing trec_eval's own format."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from eval_pipeline.trec.formats import read_trec_qrels, read_trec_run
from eval_pipeline.trec.trec_eval import MEASURES, OFFICIAL, evaluate, format_results, parse_measures

DESCRIPTION = """\
Evaluate a TREC run file against a TREC qrels file, the way trec_eval does, and print the
results in trec_eval's format (measure, query id or 'all', value; tab separated).

Conventions (as trec_eval 10): documents are ranked by score descending, ties broken by docno
descending, and the rank column of the run is ignored; queries of the run that have no
judgment are dropped; a document is relevant when its grade is >= LEVEL; a negative grade
means 'not judged'; ndcg and ndcg_cut use the grade itself as the gain (see --gain).
"""

EPILOG = (
    "measures supported (-m NAME, -m NAME.p1,p2 for cutoffs, or -m all_trec / -m official):\n  "
    + ", ".join(m.name for m in MEASURES)
    + "\n  official (the default) = "
    + ", ".join(OFFICIAL)
    + "\n\nexamples:\n"
    "  eval-pipeline trec-eval qrels.test results.test\n"
    "  eval-pipeline trec-eval -q -m all_trec qrels.test results.test\n"
    "  eval-pipeline trec-eval -l 2 -m ndcg_cut.5,10 -m P.5 qrels.graded run.txt\n"
)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `trec-eval` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "trec-eval",
        help="trec_eval-compatible evaluation of a TREC run file against TREC qrels",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(handler=run_trec_eval)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("qrels", metavar="QRELS", help="TREC qrels file: 'query_id iteration docno grade' per line")
    parser.add_argument("run", metavar="RUN", help="TREC run file: 'query_id Q0 docno rank score tag' per line")
    parser.add_argument("-q", dest="per_query", action="store_true", help="print every query's values before the 'all' summary")
    parser.add_argument("-l", dest="level", type=int, default=1, metavar="LEVEL", help="lowest grade that counts as relevant (default 1)")
    parser.add_argument(
        "-m",
        dest="measures",
        action="append",
        metavar="MEASURE",
        help="measure to print; repeatable: NAME, NAME.p1,p2 (e.g. P.5,10), all_trec, official (default)",
    )
    parser.add_argument(
        "-c",
        dest="complete",
        action="store_true",
        help="average over every query of the qrels; a query with no results counts with zeros",
    )
    parser.add_argument(
        "--gain",
        choices=("linear", "exponential"),
        default="linear",
        help="nDCG gain: linear = the grade (trec_eval's, default), exponential = 2^grade - 1 (the pipeline's ndcg_at_k)",
    )


def run_trec_eval(args: argparse.Namespace) -> int:
    """Evaluate and print; exit 0 on success, 1 on unreadable or invalid input (the message goes to stderr)."""
    try:
        selected = parse_measures(args.measures)
        evaluation = evaluate(
            read_trec_qrels(args.qrels),
            read_trec_run(args.run),
            level=args.level,
            measures=selected,
            gain=args.gain,
            complete=args.complete,
        )
    except (OSError, ValueError) as exc:
        print(f"trec-eval: {exc}", file=sys.stderr)
        return 1
    for line in format_results(evaluation, per_query=args.per_query):
        print(line)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eval_pipeline.cli.trec QRELS RUN ...`: the same command without the eval-pipeline wrapper."""
    parser = argparse.ArgumentParser(
        prog="trec-eval", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return run_trec_eval(args)


if __name__ == "__main__":
    sys.exit(main())
