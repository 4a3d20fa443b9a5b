"""`export TABLE --format csv|jsonl|parquet`: every format reads back as the table.

Restricted and unknown tables or runs are refused.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys

import polars as pl
import pyarrow.parquet as pq
import pytest

from eval_pipeline.cli.exports import register
from eval_pipeline.exports.tables import exportable_tables, flat, stored_schema

# claims: lists of strings; outcome_scores: a list of structs; retrieval_scores: lists of strings and floats
TABLES = ["claims", "outcome_scores", "retrieval_scores", "stage_results"]


def _nested(schema) -> list[str]:
    return [name for name, dtype in schema.items() if isinstance(dtype, (pl.List, pl.Struct, pl.Array))]


def _expected(warehouse, table: str, run: str | None) -> pl.DataFrame:
    """The table's rows as the export writes them: run by run, in run order."""
    runs = [run] if run else warehouse.runs(table)
    return pl.concat([warehouse.read(table, r) for r in runs])


def _assert_csv_equals(text: bytes, table: pl.DataFrame) -> None:
    nested = _nested(table.schema)
    back = pl.read_csv(io.BytesIO(text), schema={k: pl.String if k in nested else v for k, v in table.schema.items()})
    assert back.height == table.height and back.columns == table.columns
    scalar = [c for c in table.columns if c not in nested]
    assert back.select(scalar).equals(table.select(scalar))
    for column in nested:
        decoded = [None if v is None else json.loads(v) for v in back[column].to_list()]
        assert decoded == table[column].to_list(), column


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("run", [None, "cand-42"])
def test_csv_reads_back(export, sample, tmp_path, table, run):
    out = tmp_path / "t.csv"
    assert export(table, "--format", "csv", "--output", str(out), *(["--run", run] if run else [])) == 0
    expected = _expected(sample["warehouse"], table, run)
    assert expected.height > 0
    _assert_csv_equals(out.read_bytes(), expected)


def test_csv_writes_nested_columns_as_json_text(export, sample, tmp_path):
    out = tmp_path / "o.csv"
    assert export("outcome_scores", "--run", "cand-42", "--format", "csv", "--output", str(out)) == 0
    text = pl.read_csv(out, infer_schema=False)["milestones"].drop_nulls()[0]
    first = json.loads(text)[0]
    assert set(first) == {"name", "path", "op", "passed"} and isinstance(first["passed"], bool)


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.parametrize("run", [None, "base-41"])
def test_jsonl_reads_back(export, sample, tmp_path, table, run):
    out = tmp_path / "t.jsonl"
    assert export(table, "--format", "jsonl", "--output", str(out), *(["--run", run] if run else [])) == 0
    expected = _expected(sample["warehouse"], table, run)
    lines = out.read_text().splitlines()
    assert len(lines) == expected.height
    # native nesting: a list column is a JSON array, not a string holding one
    first = json.loads(lines[0])
    assert list(first) == expected.columns
    for column in _nested(expected.schema):
        assert first[column] is None or isinstance(first[column], (list, dict))
    assert pl.read_ndjson(out, schema=expected.schema).equals(expected)


@pytest.mark.parametrize("table", TABLES)
def test_parquet_keeps_the_stored_schema(export, sample, tmp_path, table):
    out = tmp_path / "t.parquet"
    assert export(table, "--format", "parquet", "--output", str(out)) == 0
    assert pq.read_schema(out).equals(stored_schema(sample["warehouse"], table))
    assert pl.read_parquet(out).equals(_expected(sample["warehouse"], table, None))


def test_every_exportable_table_reads_back_as_csv_and_jsonl(export, sample, tmp_path):
    warehouse = sample["warehouse"]
    for table in exportable_tables(warehouse):
        expected = _expected(warehouse, table, None) if warehouse.runs(table) else warehouse.read(table)
        assert export(table, "--format", "csv", "--output", str(tmp_path / "t.csv")) == 0
        _assert_csv_equals((tmp_path / "t.csv").read_bytes(), expected)
        assert export(table, "--format", "jsonl", "--output", str(tmp_path / "t.jsonl")) == 0
        if expected.height:
            assert pl.read_ndjson(tmp_path / "t.jsonl", schema=expected.schema).equals(expected), table


def test_stdout_and_summary(export, sample, capsysbinary):
    assert export("claims", "--run", "cand-42", "--format", "jsonl") == 0
    captured = capsysbinary.readouterr()
    expected = sample["warehouse"].read("claims", "cand-42")
    assert len(captured.out.splitlines()) == expected.height
    assert (
        captured.err.decode().strip() == f"exported {expected.height:,} rows of claims (run cand-42) to standard output"
    )


def test_summary_names_the_file(export, sample, tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert export("stage_results", "--format", "csv", "--output", str(out)) == 0
    rows = sample["warehouse"].read("stage_results").height
    assert capsys.readouterr().err.strip() == f"exported {rows:,} rows of stage_results (every run) to {out}"


@pytest.mark.parametrize("table", ["traces", "raw_traces", "cases", "_restricted/traces", "_restricted"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "langfuse", "otlp"])
def test_restricted_tables_are_refused(export, capsys, tmp_path, table, fmt):
    out = tmp_path / "never"
    assert export(table, "--format", fmt, "--output", str(out)) == 2
    err = capsys.readouterr().err
    assert "restricted" in err and "exportable tables: " in err and "claims" in err
    assert not out.exists()


def test_unknown_table_lists_the_exportable_ones(export, sample, capsys):
    assert export("no_such_table", "--format", "csv") == 2
    err = capsys.readouterr().err
    assert "unknown table 'no_such_table'" in err
    listed = err.split("exportable tables: ", 1)[1].strip().split(", ")
    assert listed == exportable_tables(sample["warehouse"])
    assert "traces" not in listed and "raw_traces" not in listed


def test_path_like_table_is_refused(export, capsys):
    assert export("../wh/claims", "--format", "csv") == 2
    assert "not a path" in capsys.readouterr().err


def test_unknown_run_is_refused(export, capsys):
    assert export("claims", "--run", "cand-99", "--format", "jsonl") == 2
    err = capsys.readouterr().err
    assert "unknown run 'cand-99'" in err and "base-41, cand-42" in err


def test_bad_run_id_is_a_usage_error(export):
    with pytest.raises(SystemExit) as raised:
        export("claims", "--run", "../x", "--format", "jsonl")
    assert raised.value.code == 2


def test_parquet_needs_output(export, capsys):
    assert export("claims", "--format", "parquet") == 2
    assert "--format parquet needs --output" in capsys.readouterr().err


def test_endpoint_only_with_langfuse_or_otlp(export, capsys):
    assert export("claims", "--format", "csv", "--endpoint", "http://127.0.0.1:9") == 2
    assert "--endpoint goes with --format langfuse or otlp" in capsys.readouterr().err


def test_missing_warehouse(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    args = parser.parse_args(["export", "claims", "--format", "csv", "--warehouse", str(tmp_path / "none")])
    assert args.handler(args) == 2
    assert "no tables in" in capsys.readouterr().err


REAL_MAIN = "import sys; from eval_pipeline.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "langfuse", "otlp"])
@pytest.mark.parametrize("entry", ["eval-pipeline", "module"])
def test_closed_pipe_stops_quietly(sample, fmt, entry):
    # the reader is gone before the first byte is written (`… | head` that has already exited)
    command = (
        [sys.executable, "-c", REAL_MAIN, "export"]
        if entry == "eval-pipeline"
        else [sys.executable, "-m", "eval_pipeline.cli.exports"]
    )
    process = subprocess.Popen(
        [*command, "stage_results", "--format", fmt, "--warehouse", str(sample["root"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    process.stdout.close()
    err = process.stderr.read().decode()
    code = process.wait(timeout=120)
    assert "Traceback" not in err and "Error" not in err and "Exception ignored" not in err, err
    # cut off before its first byte: exit 1 (what Python exits with on a broken pipe), as eval-pipeline's main does
    assert code == 1 if entry == "module" else code in (0, 1)


def test_json_text_of_nested_values_with_any_characters():
    frame = pl.DataFrame(
        {
            "words": [["≥ 0.6", 'é\n"q"'], None, []],
            "pair": [{"b": "ü", "a": 1.5}, None, {"b": None, "a": None}],
            "plain": ["x", None, "z"],
        }
    )
    out = flat(frame)
    assert out.schema == {"words": pl.String, "pair": pl.String, "plain": pl.String}
    assert [None if v is None else json.loads(v) for v in out["words"]] == frame["words"].to_list()
    assert [None if v is None else json.loads(v) for v in out["pair"]] == frame["pair"].to_list()
    assert out["plain"].to_list() == ["x", None, "z"]
