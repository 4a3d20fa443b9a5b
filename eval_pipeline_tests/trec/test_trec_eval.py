"""Our trec_eval measures against trec_eval 10.0's own printed output on its test files, and the trec-eval command."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.cli import trec as cli
from eval_pipeline.trec import trec_eval
from eval_pipeline.trec.formats import read_trec_qrels, read_trec_run
from eval_pipeline.trec.measure_args import parse_measures
from eval_pipeline.trec.measures import MEASURES
from eval_pipeline.trec.printing import format_results
from eval_pipeline.trec.trec_eval import evaluate


def parse_lines(lines: list[str]) -> dict[tuple[str, str], str]:
    """trec_eval-format lines as {(measure, query): printed value}."""
    out = {}
    for line in lines:
        measure, query, value = line.split("\t")
        out[(measure.strip(), query)] = value
    return out


def expected_lines(path: Path) -> dict[tuple[str, str], str]:
    """trec_eval's output file as {(measure, query): printed value}."""
    return parse_lines(path.read_text().splitlines())


@pytest.mark.parametrize(
    ("qrels_name", "expected_name", "level"), [("qrels.test", "out.test.aq", 1), ("qrels.rel_level", "out.test.aql", 2)]
)
def test_every_supported_measure_matches_trec_eval_per_query_and_all(
    trec_eval_dir: Path, qrels_name: str, expected_name: str, level: int
):
    expected = expected_lines(trec_eval_dir / expected_name)
    measures = ["all_trec", "relstring.20"] if level == 2 else ["all_trec"]
    evaluation = evaluate(
        read_trec_qrels(trec_eval_dir / qrels_name),
        read_trec_run(trec_eval_dir / "results.test"),
        level=level,
        measures=measures,
    )
    ours = parse_lines(format_results(evaluation, per_query=True))
    # Every line trec_eval prints, we print identically, and no other.
    mismatched = {key: (ours.get(key), value) for key, value in expected.items() if ours.get(key) != value}
    assert mismatched == {}
    # 96 values per query (relstring included), plus runid, num_q, gm_map and gm_bpref in `all` (no relstring there):
    # 3 x 96 + 99 = 387 lines.
    assert len(ours) == len(expected) == 387
    assert sum(1 for (_, q) in ours if q == "all") == 99 and sum(1 for (_, q) in ours if q == "301") == 96


def test_values_match_to_four_decimals_when_parsed(trec_eval_dir: Path):
    expected = expected_lines(trec_eval_dir / "out.test.aql")
    evaluation = evaluate(
        read_trec_qrels(trec_eval_dir / "qrels.rel_level"),
        read_trec_run(trec_eval_dir / "results.test"),
        level=2,
        measures=["all_trec"],
    )
    values = evaluation.per_query.filter(pl.col("query_id") == "302").row(0, named=True)
    # ndcg_cut_10 of 302 at level 2 is 0.7530 in trec_eval's output; map 0.4175; P_5 0.8000.
    assert round(values["ndcg_cut_10"], 4) == float(expected[("ndcg_cut_10", "302")]) == 0.7530
    assert round(values["map"], 4) == float(expected[("map", "302")]) == 0.4175
    assert round(values["P_5"], 4) == 0.8


def test_default_output_is_trec_evals_official_measures(trec_eval_dir: Path, capsys: pytest.CaptureFixture[str]):
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["trec-eval", str(trec_eval_dir / "qrels.test"), str(trec_eval_dir / "results.test")])
    assert args.handler(args) == 0
    assert capsys.readouterr().out.splitlines() == (trec_eval_dir / "out.test").read_text().splitlines()


def test_command_line_prints_trec_evals_lines_for_q_l_and_m(trec_eval_dir: Path):
    measures = ["-m", "num_q", "-m", "map", "-m", "P.5,10", "-m", "ndcg_cut.10", "-m", "success", "-m", "recip_rank"]
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "eval_pipeline.cli.trec",
            "-q",
            "-l",
            "2",
            *measures,
            str(trec_eval_dir / "qrels.rel_level"),
            str(trec_eval_dir / "results.test"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    expected = expected_lines(trec_eval_dir / "out.test.aql")
    lines = result.stdout.splitlines()
    # per query: map, recip_rank, P_5, P_10, ndcg_cut_10, success_1/5/10 = 8 lines x 3 queries; all: the same 8 + num_q.
    assert len(lines) == 8 * 3 + 9
    assert lines[0] == f"{'map':<22}\t301\t{expected[('map', '301')]}"
    assert lines[-9] == f"{'num_q':<22}\tall\t3"
    for line in lines:
        measure, query, value = line.split("\t")
        assert expected[(measure.strip(), query)] == value


def test_unknown_measure_and_missing_file_exit_1(trec_eval_dir: Path, capsys: pytest.CaptureFixture[str]):
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    args = parser.parse_args(
        ["trec-eval", "-m", "bogus", str(trec_eval_dir / "qrels.test"), str(trec_eval_dir / "results.test")]
    )
    assert args.handler(args) == 1
    assert "unknown measure 'bogus'" in capsys.readouterr().err
    args = parser.parse_args(["trec-eval", str(trec_eval_dir / "nope.qrels"), str(trec_eval_dir / "results.test")])
    assert args.handler(args) == 1
    assert "nope.qrels" in capsys.readouterr().err


def test_help_names_the_conventions_and_measures():
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    sub = cli.register(parser.add_subparsers())
    text = sub.format_help()
    assert "ties broken by docno" in text and "-l LEVEL" in text and "ndcg_cut" in text and "all_trec" in text


def test_measure_parsing():
    # P.5,10 keeps the given cutoffs; P_20 is shorthand for P.20;
    # all_trec lists every supported measure in trec_eval order.
    assert [(s.measure.name, s.params) for s in parse_measures(["P.10,5", "P_20"])] == [("P", (5.0, 10.0, 20.0))]
    assert [s.measure.name for s in parse_measures(["all_trec"])] == [m.name for m in MEASURES]
    assert parse_measures(["ndcg_cut.3"])[0].columns() == ["ndcg_cut_3"]
    with pytest.raises(ValueError, match="takes no parameters"):
        parse_measures(["map.5"])


def test_row_order_and_rank_column_do_not_matter(trec_eval_dir: Path):
    qrels = read_trec_qrels(trec_eval_dir / "qrels.rel_level")
    run = read_trec_run(trec_eval_dir / "results.test")
    reference = format_results(evaluate(qrels, run, level=2, measures=["all_trec"]), per_query=True)
    # Ranked blocks (the fast path), shuffled rows (not grouped by query) and nonsense rank columns: same output.
    ranked = run.sort(["query_id", "score", "doc_id"], descending=[False, True, True])
    shuffled = run.sample(fraction=1.0, shuffle=True, seed=3).with_columns(rank=pl.lit(1))
    for variant in (ranked, shuffled):
        assert format_results(evaluate(qrels, variant, level=2, measures=["all_trec"]), per_query=True) == reference


def test_sliced_matching_gives_the_same_values(trec_eval_dir: Path, monkeypatch: pytest.MonkeyPatch):
    qrels = read_trec_qrels(trec_eval_dir / "qrels.rel_level")
    run = read_trec_run(trec_eval_dir / "results.test")
    reference = format_results(evaluate(qrels, run, level=2, measures=["all_trec"]), per_query=True)
    # 1,500 run rows in slices of about 100: each query block is cut into slices of whole blocks, and qrels listed
    # in another query order than the run, or not grouped at all, are matched to the right blocks.
    monkeypatch.setattr(trec_eval, "SLICE_ROWS", 100)
    ranked = run.sort(["query_id", "score", "doc_id"], descending=[False, True, True])
    for judged in (qrels, qrels.sort("query_id", descending=True), qrels.sample(fraction=1.0, shuffle=True, seed=9)):
        for variant in (run, ranked):
            assert (
                format_results(evaluate(judged, variant, level=2, measures=["all_trec"]), per_query=True) == reference
            )


def test_hash_collisions_never_pair_the_wrong_docs(trec_eval_dir: Path, monkeypatch: pytest.MonkeyPatch):
    qrels = read_trec_qrels(trec_eval_dir / "qrels.test")
    run = read_trec_run(trec_eval_dir / "results.test")
    reference = format_results(evaluate(qrels, run, measures=["all_trec"]), per_query=True)
    # A join key that collides all the time (the doc id's length): the checks on the ids must still pair exactly.
    monkeypatch.setattr(
        trec_eval,
        "pair_key",
        lambda query_id="query_id", doc_id="doc_id": pl.col(doc_id).str.len_bytes().cast(pl.UInt64),
    )
    shuffled = run.sample(fraction=1.0, shuffle=True, seed=4)
    for variant in (run, shuffled):  # sliced join over query blocks, and the single join
        assert format_results(evaluate(qrels, variant, measures=["all_trec"]), per_query=True) == reference


def test_ties_broken_by_docno_descending_and_unjudged_queries_dropped():
    qrels = read_trec_qrels("q1 0 a 1\nq1 0 b 0\nq1 0 c 0\nq2 0 z 1\n")
    # a and c tie at 0.5 after b: trec_eval orders ties by docno descending, so c (rank 2) precedes a (rank 3).
    run = read_trec_run("q1 Q0 b 1 0.9 t\nq1 Q0 a 2 0.5 t\nq1 Q0 c 3 0.5 t\nq9 Q0 x 1 1.0 t\n")
    evaluation = evaluate(qrels, run, measures=["num_q", "recip_rank", "P.2"])
    # q9 has no judgment: dropped; q2 has judgments but no results: left out unless -c.
    assert evaluation.per_query.to_dicts() == [{"query_id": "q1", "recip_rank": 1 / 3, "P_2": 0.0}]
    assert evaluation.summary["num_q"] == 1
    complete = evaluate(qrels, run, measures=["num_q", "recip_rank", "P.2"], complete=True)
    # q2 counts with zeros: mean recip_rank (1/3 + 0) / 2.
    assert complete.summary == {"num_q": 2, "recip_rank": pytest.approx(1 / 6), "P_2": 0.0}


def test_scores_compare_as_doubles_like_trec_eval_10():
    qrels = read_trec_qrels("q 0 a 1\n")
    # trec_eval 10.0 keeps scores as doubles (9.x kept C floats, where these two tied): 0.691560000001 ranks first.
    run = read_trec_run("q Q0 a 1 0.691560000001 t\nq Q0 b 2 0.69156 t\n")
    assert evaluate(qrels, run, measures=["recip_rank"]).summary["recip_rank"] == 1.0
    # Equal doubles tie, and the docno decides, descending: b before a.
    tied = read_trec_run("q Q0 a 1 0.69156 t\nq Q0 b 2 0.69156 t\n")
    assert evaluate(qrels, tied, measures=["recip_rank"]).summary["recip_rank"] == 0.5


def test_no_relevant_doc_retrieved_gives_zero_recip_rank_not_infinity():
    qrels = read_trec_qrels("q1 0 a 1\nq1 0 b 0\n")
    run = read_trec_run("q1 Q0 b 1 0.9 t\nq1 Q0 x 2 0.5 t\n")
    evaluation = evaluate(qrels, run, measures=["recip_rank", "map", "ndcg_cut.5", "num_rel_ret"])
    assert evaluation.per_query.row(0, named=True) == {
        "query_id": "q1",
        "num_rel_ret": 0,
        "map": 0.0,
        "recip_rank": 0.0,
        "ndcg_cut_5": 0.0,
    }


def test_gain_option_for_ndcg_cut():
    qrels = read_trec_qrels("q 0 a 2\nq 0 b 0\nq 0 c 1\n")
    run = read_trec_run("q Q0 a 1 3 t\nq Q0 b 2 2 t\nq Q0 c 3 1 t\n")
    # grades by rank 2, 0, 1. linear: DCG 2 + 1/2 = 2.5, IDCG 2 + 1/log2(3) = 2.6309 -> 0.9502.
    linear = evaluate(qrels, run, measures=["ndcg_cut.3"]).summary["ndcg_cut_3"]
    # exponential (SPEC §5's worked example): DCG 3 + 1/2 = 3.5, IDCG 3 + 1/log2(3) = 3.6309 -> 0.9639.
    exponential = evaluate(qrels, run, measures=["ndcg_cut.3"], gain="exponential").summary["ndcg_cut_3"]
    assert round(linear, 4) == 0.9502 and round(exponential, 4) == 0.9639


def test_duplicate_docs_are_refused_like_trec_eval():
    with pytest.raises(ValueError, match="duplicate docs q1 a"):
        read_trec_run("q1 Q0 a 1 0.9 t\nq1 Q0 a 2 0.5 t\n")
    with pytest.raises(ValueError, match="duplicate docs q1 a"):
        read_trec_qrels("q1 0 a 1\nq1 0 a 0\n")
