"""`eval-pipeline trec-eval` as a drop-in for trec_eval 10.0: whole outputs byte for byte against trec_eval's own
files, and every measure, parameter and option on tiny hand-computed inputs (values checked against a trec_eval 10.0
build; the arithmetic is in the comments)."""

from __future__ import annotations

import argparse
import io
import math
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.cli import trec as cli
from eval_pipeline.trec.formats import read_trec_qrels, read_trec_run, read_trec_zscores
from eval_pipeline.trec.measure_args import parse_measures
from eval_pipeline.trec.measures import MEASURE_BY_NAME, TABLE
from eval_pipeline.trec.printing import format_results
from eval_pipeline.trec.trec_eval import evaluate


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `eval-pipeline trec-eval ARGV`."""
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    cli.register(parser.add_subparsers())
    args = parser.parse_args(["trec-eval", *argv])
    status = args.handler(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# ---------------------------------------------------------------- whole outputs, byte for byte


@pytest.mark.parametrize(
    ("expected", "options", "qrels"),
    [
        ("out.test", [], "qrels.test"),
        ("out.test.a", ["-m", "all_trec"], "qrels.test"),
        ("out.test.aq", ["-m", "all_trec", "-q"], "qrels.test"),
        ("out.test.aql", ["-m", "all_trec", "-mrelstring.20", "-q", "-l2"], "qrels.rel_level"),
    ],
)
def test_output_is_trec_evals_byte_for_byte(
    trec_eval_dir: Path, capsys: pytest.CaptureFixture[str], expected: str, options: list[str], qrels: str
):
    status, out, err = run_cli([*options, str(trec_eval_dir / qrels), str(trec_eval_dir / "results.test")], capsys)
    assert status == 0, err
    assert out.encode() == (trec_eval_dir / expected).read_bytes()


def test_measure_parameters_match_trec_evals_test_file(trec_eval_dir: Path, capsys: pytest.CaptureFixture[str]):
    # trec_eval's test/out.test.meas_params (the command of its Makefile's quicktest), lines for query 301 and all.
    options = [
        "-q", "-miprec_at_recall..10,.20,.25,.75,.50", "-m", "P.5,7,3", "-m", "recall.20,2000",
        "-m", "Rprec_mult.5.0,0.2,0.35", "-mutility.2,-1,0,0", "-m", "11pt_avg..25,.5,.75",
        "-mndcg.1=3,2=9,4=4.5", "-mndcg_cut.10,20,23.4", "-msuccess.2,5,20",
    ]  # fmt: skip
    status, out, err = run_cli(
        [*options, str(trec_eval_dir / "qrels.test"), str(trec_eval_dir / "results.test")], capsys
    )
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 88
    assert lines[:3] == [
        "iprec_at_recall_0.10  \t301\t0.2098",
        "iprec_at_recall_0.20  \t301\t0.0000",
        "iprec_at_recall_0.25  \t301\t0.0000",
    ]
    for line in [
        "utility_2,-1,0,0      \t301\t-287.0000",
        "11pt_avg_.25,.5,.75   \t302\t0.4444",
        "ndcg_1=3,2=9,4=4.5    \t303\t0.3862",
        "ndcg_cut_23           \t301\t0.1814",
        "Rprec_mult_5.00       \tall\t0.0849",
        "utility_2,-1,0,0      \tall\t-369.0000",
        "success_20            \tall\t1.0000",
    ]:
        assert line in lines


# ---------------------------------------------------------------- the new measures, by hand

# Query q1: a (grade 2), x (not judged), c (1), b (0), d (-1: pooled, unjudged) in that order; e (3) not retrieved.
QRELS = "q1 0 a 2\nq1 0 b 0\nq1 0 c 1\nq1 0 d -1\nq1 0 e 3\n"
RUN = "q1 Q0 a 1 0.9 t\nq1 Q0 x 2 0.8 t\nq1 Q0 c 3 0.7 t\nq1 Q0 b 4 0.6 t\nq1 Q0 d 5 0.5 t\n"


def one(measure: str, **options) -> object:
    """The value of one printed measure for q1."""
    evaluation = evaluate(read_trec_qrels(QRELS), read_trec_run(RUN), measures=[measure], **options)
    return evaluation.per_query.drop("query_id").row(0)[0]


def printed(measure: str, **options) -> str:
    evaluation = evaluate(read_trec_qrels(QRELS), read_trec_run(RUN), measures=[measure], **options)
    return format_results(evaluation, per_query=True)[0]


def test_relstring_marks_grades_unjudged_and_pooled_docs():
    # a=2, x outside the qrels '-', c=1, b=0, d graded -1 (pooled but unjudged) '.'.
    assert printed("relstring") == "relstring             \tq1\t'2-10.'"
    assert printed("relstring.3") == "relstring_3           \tq1\t'2-1'"
    # Per query only: no 'all' line.
    evaluation = evaluate(read_trec_qrels(QRELS), read_trec_run(RUN), measures=["relstring"])
    assert format_results(evaluation) == []


def test_infap_and_bing():
    # infAP: a at index 0 adds 1; c at index 2 (rel so far 2, no judged non-relevant or pooled-unjudged above):
    # 1/3 + 2/3 * (1/2) * (1 + 1e-5)/(1 + 2e-5) = 0.666663; x outside the pool is skipped. Sum / R (a, c, e) = 0.5556.
    assert one("infAP") == pytest.approx((1 + 1 / 3 + (2 / 3) * 0.5 * (1.00001 / 1.00002)) / 3)
    # binG: 1/log2(2 + non-relevant above) per relevant doc: a 1/log2(2), c 1/log2(3); / R = 3.
    assert one("binG") == pytest.approx((1 + 1 / math.log2(3)) / 3)
    assert printed("binG").endswith("0.5436")


def test_g_gain_measure():
    # Ideal gains 3 (e), 2 (a), 1 (c). a at rank 1: 2 / log2(2 + cost 3 - gain so far 2) = 2/log2(3);
    # c at rank 3: cost 3 + 2 + 1 = 6, gain so far 3: 1/log2(5). Sum / (3 + 2 + 1).
    assert one("G") == pytest.approx((2 / math.log2(3) + 1 / math.log2(5)) / 6)


def test_ndcg_family_and_gain_parameters():
    ideal = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    # DCG: a 2/log2(2) + c 1/log2(4) = 2.5.
    assert one("ndcg") == pytest.approx(2.5 / ideal)
    # ndcg.1=0,2=3: grade 1 gains 0, grade 2 gains 3 (grade 3 keeps 3): DCG 3; ideal 3 + 3/log2(3).
    assert one("ndcg.1=0,2=3") == pytest.approx(3 / (3 + 3 / math.log2(3)))
    assert printed("ndcg.1=0,2=3") == "ndcg_1=0,2=3          \tq1\t0.6131"
    # ndcg_rel: at a, 2 / ideal@1 (3); at c, 2.5 / ideal@3; e not retrieved adds 2.5 / ideal. / 3.
    assert one("ndcg_rel") == pytest.approx((2 / 3 + 2.5 / ideal + 2.5 / ideal) / 3)
    # Rndcg: nDCG where the ideal gain changes (after ideal positions 1, 2, 3) and at the end of the 5 retrieved.
    at2 = 2 / (3 + 2 / math.log2(3))
    assert one("Rndcg") == pytest.approx((2 / 3 + at2 + 2.5 / ideal + 2.5 / ideal) / 4)
    # dcg and ideal_dcg (not in all_trec) print the two parts.
    assert one("dcg") == pytest.approx(2.5) and one("ideal_dcg") == pytest.approx(ideal)


def test_rbp_and_its_residual():
    # Gains 0..3 rescaled by the largest, 3: a 2/3 at rank 1, c 1/3 at rank 3 (0.9^2); times 1 - 0.9.
    assert one("rbp") == pytest.approx(0.1 * (2 / 3 + 0.81 / 3))
    assert printed("rbp") == "rbp                   \tq1\t0.0937"
    # rbp_resid: unjudged x (rank 2) and d (rank 5): 0.9^5 + 0.1 * (0.9 + 0.9^4).
    assert one("rbp_resid") == pytest.approx(0.9**5 + 0.1 * (0.9 + 0.9**4))
    # p=0.5: 0.5^5 + 0.5 * (0.5 + 0.5^4) = 0.3125.
    assert one("rbp_resid.p=0.5") == 0.3125
    assert printed("rbp.p=0.5").startswith("rbp_p=0.5             \tq1\t")


def test_set_f_beta_utility_coefficients_and_11pt_levels():
    # P = 2/5, R = 2/3: (1.5 * P * R) / (0.5 * P + R).
    assert printed("set_F.0.5") == "set_F_0.5             \tq1\t0.4615"
    # 2 * 2 relevant retrieved - 1 * 3 non-relevant retrieved.
    assert printed("utility.2,-1,0,0") == "utility_2,-1,0,0      \tq1\t1.0000"
    # p4 * (N + rel_ret - ret - rel) = 100 + 2 - 5 - 3 = 94 with -N 100.
    assert one("utility.0,0,0,1", num_docs=100) == 94.0
    # Levels 0.5 and 1 of R = 3: counts 2 and 3; only 2 relevant retrieved, so level 1 adds 0 and level 0.5 the
    # precision at c (2/3): (2/3 + 0) / 2.
    assert one("11pt_avg.0.5,1") == pytest.approx(1 / 3)
    assert printed("11pt_avg.0.5,1").startswith("11pt_avg_0.5,1")
    with pytest.raises(ValueError, match="utility takes 4 coefficients"):
        parse_measures(["utility.1,2"])


def test_gain_pairs_and_cutoffs_parse_like_trec_eval():
    [ndcg] = parse_measures(["ndcg.1=0,2=3"])
    assert ndcg.params == (("1", 0.0), ("2", 3.0)) and ndcg.columns() == ["ndcg_1=0,2=3"]
    # Explicit cutoffs replace the defaults (all_trec's P_5..P_1000 become P_5 alone); atol truncates 23.4.
    [p] = [s for s in parse_measures(["all_trec", "P.5"]) if s.measure.name == "P"]
    assert p.columns() == ["P_5"]
    assert parse_measures(["ndcg_cut.10,23.4"])[0].columns() == ["ndcg_cut_10", "ndcg_cut_23"]
    assert parse_measures(["iprec_at_recall..25,.5"])[0].columns() == ["iprec_at_recall_0.25", "iprec_at_recall_0.50"]
    with pytest.raises(ValueError, match="name=value"):
        parse_measures(["ndcg.1,2"])
    with pytest.raises(ValueError, match="duplicate cutoffs"):
        parse_measures(["P.5,5"])
    with pytest.raises(ValueError, match="preference"):
        parse_measures(["all_prefs"])


# ---------------------------------------------------------------- options


def test_max_docs_and_judged_only():
    # -M 3: a, x, c only.
    assert one("num_ret", max_docs=3) == 3 and one("relstring", max_docs=3) == "2-1"
    # -J: x (outside the qrels) and d (graded -1) are removed, so a, c, b rank 1, 2, 3: P_2 = 2/2.
    assert one("P.2", judged_only=True) == 1.0 and one("P.2") == 0.5
    assert one("relstring", judged_only=True) == "210" and one("num_ret", judged_only=True) == 3


def test_complete_counts_missing_queries_on_trec_evals_stand_in_ranking():
    qrels = read_trec_qrels(QRELS + "q2 0 z 1\n")
    measures = ["num_ret", "relstring", "utility.2,-1,0,0", "rbp_resid", "rbp_resid.p=0.5", "unj.5", "P.5"]
    evaluation = evaluate(
        qrels, read_trec_run(RUN), measures=measures[:1] + measures[2:4] + measures[5:], complete=True
    )
    q2 = evaluation.per_query.filter(pl.col("query_id") == "q2").row(0, named=True)
    # trec_eval ranks one outside doc for q2, then zeroes num_ret, unj and rbp_resid by name; utility with parameters
    # keeps 2*0 - 1*1 = -1.
    assert q2 == {"query_id": "q2", "num_ret": 0, "utility_2,-1,0,0": -1.0, "rbp_resid": 0.0, "unj_5": 0.0, "P_5": 0.0}
    named = evaluate(qrels, read_trec_run(RUN), measures=["relstring.3", "utility", "rbp_resid.p=0.5"], complete=True)
    q2 = named.per_query.filter(pl.col("query_id") == "q2").row(0, named=True)
    assert q2 == {"query_id": "q2", "relstring_3": "-", "utility": 0.0, "rbp_resid_p=0.5": 1.0}
    # all: (0.3125 + 1.0) / 2 = 0.65625 exactly, printed half to even as printf does.
    assert format_results(named)[-1] == "rbp_resid_p=0.5       \tall\t0.6562"
    assert evaluation.summary["num_ret"] == 5


def test_exact_halves_round_as_printf_rounds_the_double():
    # 17 relevant in the top 160: 17/160 = 0.10625, whose double lies just below the half: 0.1062.
    qrels = read_trec_qrels("".join(f"s 0 d{d} 1\n" for d in range(17)))
    run = read_trec_run("".join(f"s Q0 d{d} {d + 1} {1 - d / 100} t\n" for d in range(17)))
    assert format_results(evaluate(qrels, run, measures=["P.160"])) == ["P_160                 \tall\t0.1062"]
    # P_1000 of 9, 2, 9, 3 relevant: 0.009 + 0.002 + 0.009 + 0.003 added query by query is 0.022999999999999996,
    # / 4 = 0.005749999999999999: 0.0057 (a division by 1000 done as * 0.001 would make each 0.009000000000000001
    # and print 0.0058).
    lines_q = "".join(f"q{i} 0 d{d} 1\n" for i, k in enumerate([9, 2, 9, 3]) for d in range(k))
    lines_r = "".join(f"q{i} Q0 d{d} {d + 1} {1 - d / 100} t\n" for i, k in enumerate([9, 2, 9, 3]) for d in range(k))
    evaluation = evaluate(read_trec_qrels(lines_q), read_trec_run(lines_r), measures=["P.1000"])
    assert evaluation.per_query.get_column("P_1000").to_list() == [9 / 1000, 2 / 1000, 9 / 1000, 3 / 1000]
    assert format_results(evaluation)[-1] == "P_1000                \tall\t0.0057"


def test_zscores_convert_every_value():
    zscores = read_trec_zscores("q1 P_2 0.25 0.5\nq1 map 0.5556 0\n")
    evaluation = evaluate(
        read_trec_qrels(QRELS), read_trec_run(RUN), measures=["num_q", "P.2", "map", "recip_rank"], zscores=zscores
    )
    lines = format_results(evaluation, per_query=True)
    # P_2 = 0.5: (0.5 - 0.25) / 0.5; map has std_dev 0 and another mean: -1000000; recip_rank has no entry.
    # trec_eval prints "Z%-22s": the name padded to 22 after the Z.
    assert lines[:3] == [
        f"Z{'map':<22}\tq1\t-1000000.0000",
        f"Z{'recip_rank':<22}\tq1\t-1000000.0000",
        f"Z{'P_2':<22}\tq1\t0.5000",
    ]
    assert lines[3] == f"Z{'num_q':<22}\tall\t1.0000"


def test_judgment_groups_average_over_groups():
    # Group g1 judges a relevant (rank 1: AP 1, P_1 1, P_3 1/3), g2 judges c relevant and a not (rank 3: AP 1/3,
    # P_1 0, P_3 1/3); each measure is the mean over the two groups.
    qrels = read_trec_qrels("q1 g1 a 1\nq1 g2 c 1\nq1 g2 a 0\n", groups=True)
    evaluation = evaluate(qrels, read_trec_run(RUN), measures=["map_avgjg", "P_avgjg.1,3"])
    values = evaluation.per_query.row(0, named=True)
    assert values["query_id"] == "q1"
    assert (values["map_avgjg"], values["P_avgjg_1"], values["P_avgjg_3"]) == pytest.approx((2 / 3, 0.5, 1 / 3))
    with pytest.raises(ValueError, match="qrels_jg"):
        evaluate(qrels, read_trec_run(RUN), measures=["map"])


def test_command_line_options(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "q").write_text("# a comment line\n" + QRELS)
    # Fields after the tag are ignored, and so are comment lines.
    (tmp_path / "r").write_text(RUN.replace("0.9 t", "0.9 t trailing words") + "# done\n")
    q, r = str(tmp_path / "q"), str(tmp_path / "r")
    status, out, _ = run_cli(["-q", "-n", "-M3", "-m", "num_ret", q, r], capsys)
    assert (status, out) == (0, "num_ret               \tq1\t3\n")
    status, out, _ = run_cli(["-J", "-m", "P.2", q, r], capsys)
    assert out == "P_2                   \tall\t1.0000\n"
    status, out, _ = run_cli(["-N", "100", "-m", "utility.0,0,0,1", q, r], capsys)
    assert out == "utility_0,0,0,1       \tall\t94.0000\n"
    (tmp_path / "z").write_text("q1 P_2 0.25 0.5\n")
    status, out, _ = run_cli(["-Z", str(tmp_path / "z"), "-m", "P.2", q, r], capsys)
    assert out == f"Z{'P_2':<22}\tall\t0.5000\n"
    # Long option names, -D level.qid (that query alone), the run on standard input.
    monkeypatch.setattr("sys.stdin", io.StringIO(RUN + "q2 Q0 z 1 1.0 t\n"))
    status, out, _ = run_cli(["--Debug_level", "0.q1", "--measure", "num_q", "--level_for_rel", "2", q, "-"], capsys)
    assert (status, out) == (0, "num_q                 \tall\t1\n")
    (tmp_path / "jg").write_text("q1 g1 a 1\nq1 g2 c 1\n")
    status, out, _ = run_cli(["-R", "qrels_jg", "-m", "map_avgjg", str(tmp_path / "jg"), r], capsys)
    assert out == "map_avgjg             \tall\t0.6667\n"


def test_unsupported_formats_and_empty_overlap_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "q").write_text(QRELS)
    (tmp_path / "r").write_text(RUN)
    q, r = str(tmp_path / "q"), str(tmp_path / "r")
    for options, message in [
        (["-R", "prefs"], "preference judgments"),
        (["-R", "qrels_prefs"], "preference judgments"),
        (["-R", "other"], "unknown relevance format"),
        (["-T", "other"], "unknown results format"),
        (["-m", "prefs_simp"], "preference"),
    ]:
        status, _, err = run_cli([*options, q, r], capsys)
        assert status == 1 and message in err
    (tmp_path / "r2").write_text("q9 Q0 a 1 1 t\n")
    status, _, err = run_cli([q, str(tmp_path / "r2")], capsys)
    assert status == 1 and "no queries with both results and relevance info" in err


def test_queries_without_results_are_skipped_with_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "q").write_text(QRELS + "q2 0 z 1\n")
    (tmp_path / "r").write_text(RUN)
    status, out, err = run_cli(["-m", "num_q", str(tmp_path / "q"), str(tmp_path / "r")], capsys)
    assert (status, out) == (0, "num_q                 \tall\t1\n")
    assert "1 queries of the qrels have no results (e.g. q2)" in err
    status, out, _ = run_cli(["-c", "-m", "num_q", str(tmp_path / "q"), str(tmp_path / "r")], capsys)
    assert out == "num_q                 \tall\t2\n"


def test_help_lists_every_option_and_measure():
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    text = cli.register(parser.add_subparsers()).format_help()
    assert "trec_eval 10.0" in text
    for option in ["-q", "-m", "-c", "-l", "-n", "-M", "-J", "-N", "-R", "-T", "-Z", "-D", "-o", "-v", "--gain"]:
        assert f"  {option}" in text, option
    for measure in TABLE:
        assert f"  {measure.name} " in text, measure.name
    for words in [
        "qrels_jg",
        "all_trec",
        "official",
        "ndcg.1=0,2=3",
        "utility.2,-1,0,0",
        "set_F.0.5",
        "11pt_avg",
        "rbp.p=0.95",
    ]:
        assert words in text
    assert MEASURE_BY_NAME["relstring"].aggregate == "none"


def test_duplicate_docs_are_refused_when_evaluating_like_trec_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    twice = "q1 Q0 a 1 0.9 t\nq1 Q0 a 2 0.5 t\n"
    # The command reads without the reader's check and lets the evaluation, which hashes every pair anyway, refuse.
    run = read_trec_run(twice, ranks=False, refuse_duplicates=False)
    assert run.columns == ["query_id", "doc_id", "score", "tag"]
    with pytest.raises(ValueError, match="run: duplicate docs q1 a"):
        evaluate(read_trec_qrels(QRELS), run, refuse_duplicates=True)
    (tmp_path / "q").write_text(QRELS)
    (tmp_path / "r").write_text(twice)
    status, _, err = run_cli([str(tmp_path / "q"), str(tmp_path / "r")], capsys)
    assert status == 1 and "duplicate docs q1 a" in err


def test_reading_follows_trec_evals_readers(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    (tmp_path / "q").write_text(QRELS)
    # trec_eval keeps the run id of the last line; the rank field is never parsed (any token will do).
    (tmp_path / "r").write_text("q1 Q0 a x 0.9 first\nq1 Q0 c - 0.7 second\n# a comment\n")
    status, out, _ = run_cli(["-m", "runid", "-m", "num_ret", str(tmp_path / "q"), str(tmp_path / "r")], capsys)
    assert (status, out) == (0, "runid                 \tall\tsecond\nnum_ret               \tall\t2\n")
    # A qrels line takes exactly four fields.
    (tmp_path / "q5").write_text("q1 0 a 1 extra\n")
    status, _, err = run_cli([str(tmp_path / "q5"), str(tmp_path / "r")], capsys)
    assert status == 1 and "malformed qrels line 1" in err
    # A run line needs its six fields.
    (tmp_path / "r5").write_text("q1 Q0 a 1 0.9\n")
    status, _, err = run_cli([str(tmp_path / "q"), str(tmp_path / "r5")], capsys)
    assert status == 1 and "malformed run line" in err
