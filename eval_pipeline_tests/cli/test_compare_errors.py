"""`eval-pipeline compare` with a mistyped table or column says what does not exist and what is close (exit 2)."""

from eval_pipeline.cli import main


def _compare(scored, table, metric):
    return main(
        [
            "compare",
            table,
            metric,
            "--run",
            "cand-42",
            "--data",
            str(scored["data"]),
            "--warehouse",
            scored["warehouse"].root,
        ]
    )


def test_a_mistyped_column_is_named_with_the_close_ones(scored, capsys):
    assert _compare(scored, "retrieval_scores", "recal_at_10") == 2
    err = capsys.readouterr().err
    assert "column recal_at_10 does not exist in retrieval_scores" in err and "did you mean recall_at_10" in err
    assert "single write" not in err


def test_a_mistyped_table_lists_the_tables(scored, capsys):
    assert _compare(scored, "retrieval_score", "recall_at_10") == 2
    err = capsys.readouterr().err
    assert "table retrieval_score does not exist" in err and "did you mean retrieval_scores" in err
    assert "tables: " in err and "context_scores" in err and "_restricted" not in err


def test_a_column_far_from_any_lists_the_columns(scored, capsys):
    assert _compare(scored, "context_scores", "zzz") == 2
    assert "columns: run_id, trace_id" in capsys.readouterr().err
