"""`eval-pipeline trec-eval`: a drop-in for trec_eval 10.0 over TREC qrels and run files.

It prints trec_eval's own format.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import polars as pl

from eval_pipeline.trec.formats import read_trec_qrels, read_trec_run, read_trec_zscores
from eval_pipeline.trec.measure_args import parse_measures
from eval_pipeline.trec.measures import NICKNAMES, TABLE, Measure
from eval_pipeline.trec.printing import format_results
from eval_pipeline.trec.trec_eval import evaluate

VERSION = "10.0"

DESCRIPTION = """\
Evaluate a TREC run file against TREC relevance judgments the way trec_eval 10.0 does, and print the
results in trec_eval 10.0's format (measure, query id or 'all', value; tab separated; %6.4f values,
exact halves rounded as C's printf rounds the double). The options are trec_eval 10.0's, short and long.

Conventions (as trec_eval 10.0): documents are ranked by score descending (scores compare as doubles),
ties broken by docno descending, and the rank column of the run is ignored; fields after the run tag
are ignored; lines starting with '#' are comments; queries of the run that have no judgment are
dropped, and queries of the qrels with no result are skipped (trec_eval 10.0 stops with exit 4 there;
use -c to count them); a document is relevant when its grade is >= LEVEL; a negative grade means
'pooled but not judged' ('.' in relstring), a document absent from the qrels is outside the pool ('-');
gains are the grades themselves unless given as measure parameters (see --gain for the nDCG default).
"""

PARAMETERS = """\
measure parameters (-m NAME.PARAMS, as trec_eval 10.0):
  cutoffs      P.5,10  recall.  ndcg_cut.  map_cut.  relative_P.  success.  unj.   (printed P_5, P_10)
  levels       iprec_at_recall.0.25,0.75   Rprec_mult.0.5,2                     (printed ..._0.25)
  values       utility.2,-1,0,0 (4 coefficients)  set_F.0.5 (beta)  11pt_avg.0.2,0.5,0.8 (recall levels)
               relstring.20 (length)                                           (printed utility_2,-1,0,0)
  gains        ndcg.1=0,2=3  ndcg_rel.  Rndcg.  G.  dcg.  ideal_dcg.  (grade=gain; other grades keep
               their own value)   rbp.p=0.95,2=3  rbp_resid.p=0.95   (printed ndcg_1=0,2=3)
  Cutoffs given for a measure replace its defaults; P_5 is shorthand for P.5; values and gains measures
  take the first parameter list given.
"""


def _epilog() -> str:
    width = max(len(m.name) for m in TABLE)
    measures = "\n".join(f"  {m.name:<{width}}  {m.about}{_defaults(m)}" for m in TABLE)
    sets = "\n".join(f"  {name:<{width}}  {', '.join(names)}" for name, names in NICKNAMES.items())
    return (
        f"measures (trec_eval 10.0's, in its print order; -m NAME, NAME.PARAMS or a set below):\n{measures}\n\n"
        f"measure sets:\n{sets}\n  (prefs and all_prefs, trec_eval's preference measures, "
        "need -R prefs/qrels_prefs: not supported)\n\n"
        f"{PARAMETERS}\n"
        "relevance formats (-R): qrels (default: 'qid iter docno rel'), qrels_jg (the second field is a judgment\n"
        "  group; map_avgjg, P_avgjg, Rprec_mult_avgjg average over the groups). trec_eval's prefs and qrels_prefs\n"
        "  (preference judgments) are refused with exit 1.\n"
        "results formats (-T): trec_results ('qid Q0 docno rank sim tag'; RUN '-' reads standard input).\n"
        "z-score file (-Z): lines 'qid measure mean std_dev'; "
        "each value becomes (value - mean) / std_dev, printed with\n"
        "  a Z before the measure name, -1000000 where the file has no mean.\n\n"
        "examples:\n"
        "  eval-pipeline trec-eval qrels.test results.test\n"
        "  eval-pipeline trec-eval -q -m all_trec qrels.test results.test\n"
        "  eval-pipeline trec-eval -q -m all_trec -m relstring.20 -l2 qrels.rel_level results.test\n"
        "  eval-pipeline trec-eval -m ndcg.1=0,2=3 -m set_F.0.5 -m utility.2,-1,0,0 -M100 -J qrels run.txt\n"
        "  eval-pipeline trec-eval -q -m qrels_jg -R qrels_jg qrels.jg run.txt\n"
    )


def _defaults(measure: Measure) -> str:
    """' [default NAME.PARAMS]' for a measure with parameters, spelled as -m takes them."""
    if not measure.defaults:
        return ""
    text = ",".join(format(p, "g") if isinstance(p, float) else str(p) for p in measure.defaults)
    return f" [default {measure.name}.{text}]"


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the `trec-eval` subcommand to an argparse subparsers object."""
    parser = subparsers.add_parser(
        "trec-eval",
        help="trec_eval 10.0 drop-in: evaluate a TREC run file against TREC qrels",
        description=DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    parser.set_defaults(handler=run_trec_eval)
    return parser


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "qrels", metavar="QRELS", help="relevance judgments: 'qid iter docno rel' per line (rel_info_file)"
    )
    parser.add_argument(
        "run", metavar="RUN", help="run file: 'qid Q0 docno rank sim tag' per line, '-' for standard input"
    )
    parser.add_argument(
        "-q",
        "--query_eval_wanted",
        dest="per_query",
        action="store_true",
        help="print every query's values before 'all'",
    )
    parser.add_argument(
        "-m",
        "--measure",
        dest="measures",
        action="append",
        metavar="MEASURE",
        help="measure or set to print; repeatable: NAME, NAME.PARAMS (P.5,10; ndcg.1=0,2=3), all_trec, "
        "official (default)",
    )
    parser.add_argument(
        "-c",
        "--complete_rel_info_wanted",
        dest="complete",
        action="store_true",
        help="average over every query of the qrels; "
        "a query without results is evaluated on trec_eval's stand-in ranking",
    )
    parser.add_argument(
        "-l",
        "--level_for_rel",
        dest="level",
        type=int,
        default=1,
        metavar="LEVEL",
        help="lowest grade that counts as relevant (default 1)",
    )
    parser.add_argument(
        "-n", "--nosummary", dest="summary", action="store_false", help="do not print the 'all' summary"
    )
    parser.add_argument(
        "-M",
        "--Max_retrieved_per_topic",
        dest="max_docs",
        type=int,
        metavar="NUM",
        help="evaluate only each query's top NUM documents",
    )
    parser.add_argument(
        "-J",
        "--Judged_docs_only",
        dest="judged_only",
        action="store_true",
        help="drop documents without a judgment (absent from the qrels or graded < 0) before ranking",
    )
    parser.add_argument(
        "-N", "--Number_docs_in_coll", dest="num_docs", type=int, default=0, metavar="NUM",
        help="number of documents in the collection (utility's fourth coefficient; default 0)",
    )  # fmt: skip
    parser.add_argument(
        "-R",
        "--Rel_info_format",
        dest="rel_format",
        default="qrels",
        metavar="FORMAT",
        help="relevance format: qrels (default) or qrels_jg",
    )
    parser.add_argument(
        "-T",
        "--Results_format",
        dest="results_format",
        default="trec_results",
        metavar="FORMAT",
        help="results format: trec_results",
    )
    parser.add_argument(
        "-Z",
        "--Zscore",
        dest="zscores",
        metavar="FILE",
        help="print z-scores against the 'qid measure mean std_dev' lines of FILE",
    )
    parser.add_argument(
        "-D", "--Debug_level", dest="debug", metavar="LEVEL[.QID]",
        help="with .QID, evaluate only query QID (trec_eval's debug traces themselves are not printed)",
    )  # fmt: skip
    parser.add_argument(
        "-o",
        "--Output_old_results_format",
        dest="old_format",
        action="store_true",
        help="obsolete in trec_eval 10.0; ignored",
    )
    parser.add_argument(
        "-v", "--version", action="version", version=f"trec_eval version {VERSION} (eval-pipeline trec-eval)"
    )
    parser.add_argument(
        "--gain",
        choices=("linear", "exponential"),
        default="linear",
        help="default gain of a grade in ndcg, ndcg_cut, ndcg_rel, Rndcg, dcg: "
        "linear = the grade (trec_eval's), exponential = 2^grade - 1",
    )


def _read_inputs(args: argparse.Namespace) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None]:
    """The qrels, run and z-score frames the options name."""
    if args.rel_format not in ("qrels", "qrels_jg"):
        if args.rel_format in ("prefs", "qrels_prefs"):
            raise ValueError(
                f"relevance format {args.rel_format!r} (preference judgments) is not supported; use qrels or qrels_jg"
            )
        raise ValueError(f"unknown relevance format {args.rel_format!r}; formats: qrels, qrels_jg")
    if args.results_format != "trec_results":
        raise ValueError(f"unknown results format {args.results_format!r}; format: trec_results")
    qrels = read_trec_qrels(args.qrels, groups=args.rel_format == "qrels_jg")
    if args.run == "-":
        text = sys.stdin.read()
        if not text.strip():
            raise ValueError("no run lines on standard input")
        run = read_trec_run(text if "\n" in text else text + "\n", ranks=False, refuse_duplicates=False)
    else:
        run = read_trec_run(args.run, ranks=False, refuse_duplicates=False)
    zscores = read_trec_zscores(args.zscores) if args.zscores else None
    if args.debug and "." in args.debug:
        # trec_eval -D level.qid evaluates that query alone.
        query = args.debug.split(".", 1)[1]
        qrels, run = qrels.filter(pl.col("query_id") == query), run.filter(pl.col("query_id") == query)
    return qrels, run, zscores


def run_trec_eval(args: argparse.Namespace) -> int:
    """Evaluate and print; exit 0 on success, 1 on unreadable or invalid input (the message goes to stderr)."""
    try:
        selected = parse_measures(args.measures)
        qrels, run, zscores = _read_inputs(args)
        evaluation = evaluate(
            qrels,
            run,
            level=args.level,
            measures=selected,
            gain=args.gain,
            complete=args.complete,
            max_docs=args.max_docs,
            judged_only=args.judged_only,
            num_docs=args.num_docs,
            zscores=zscores,
            refuse_duplicates=True,
        )
        if evaluation.per_query.height == 0:
            raise ValueError("no queries with both results and relevance info")
        if not args.complete:
            # Compared with the evaluated queries rather than the run's rows, which would cost a pass over millions.
            queries = qrels.select(pl.col("query_id").unique())
            unanswered = queries.join(evaluation.per_query.select("query_id"), on="query_id", how="anti").sort(
                "query_id"
            )
            if unanswered.height:
                note = (
                    f"{unanswered.height} queries of the qrels have no results (e.g. {unanswered.item(0, 0)}); "
                    "skipped (-c counts them)"
                )
                print(f"trec-eval: {note}", file=sys.stderr)
    except (OSError, ValueError) as exc:
        print(f"trec-eval: {exc}", file=sys.stderr)
        return 1
    lines = format_results(evaluation, per_query=args.per_query, summary=args.summary)
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m eval_pipeline.cli.trec QRELS RUN ...`: the same command without the eval-pipeline wrapper."""
    parser = argparse.ArgumentParser(
        prog="trec-eval",
        description=DESCRIPTION,
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_arguments(parser)
    args = parser.parse_args(argv)
    return run_trec_eval(args)


if __name__ == "__main__":
    sys.exit(main())
