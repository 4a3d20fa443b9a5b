"""CSV export: a text cell a spreadsheet would evaluate is written with a leading quote; numbers and the jsonl and
parquet exports are unchanged."""

from __future__ import annotations

import argparse
import csv
import io
import json

import polars as pl
import pyarrow.parquet as pq
import pytest

from eval_pipeline.cli.exports import register
from eval_pipeline.io.warehouse import Warehouse

CELLS = ['=HYPERLINK("http://x","y")', "  +1+2", "-2+3", "@SUM(A1:A2)", "\tcmd", "\rcmd", "plain", "a=b", "x-y", None]
QUOTED = [
    '\'=HYPERLINK("http://x","y")',
    "'  +1+2",
    "'-2+3",
    "'@SUM(A1:A2)",
    "'\tcmd",
    "'\rcmd",
    "plain",
    "a=b",
    "x-y",
    "",
]
SCORES = [-1.5, -0.25, 0.0, 1.0, 2.5, -3.0, 0.5, 1.5, -7.0, None]


@pytest.fixture()
def export(tmp_path, monkeypatch):
    """`export answer_scores ARGS…` against a warehouse with one run of the cells above; (exit code, warehouse)."""
    warehouse = Warehouse.at(tmp_path / "wh")
    frame = pl.DataFrame(
        {
            "run_id": ["r-1"] * len(CELLS),
            "trace_id": [f"t-{i}" for i in range(len(CELLS))],
            "reason": CELLS,
            "token_f1": SCORES,
            "tags": [[c] if c else [] for c in CELLS],
        }
    )
    warehouse.write_partition("answer_scores", frame, "r-1")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    (tmp_path / "dagster").mkdir()

    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        register(parser.add_subparsers())
        args = parser.parse_args(["export", "answer_scores", *argv, "--warehouse", str(warehouse.root)])
        return args.handler(args)

    return run


def test_formula_cells_are_quoted_and_numbers_stay_numbers(export, tmp_path):
    out = tmp_path / "scores.csv"
    assert export("--format", "csv", "--output", str(out)) == 0
    rows = list(csv.DictReader(io.StringIO(out.read_bytes().decode(), newline="")))
    assert [row["reason"] for row in rows] == QUOTED
    # a negative number in a numeric column is a number, not a text cell: no quote
    assert [row["token_f1"] for row in rows] == ["-1.5", "-0.25", "0.0", "1.0", "2.5", "-3.0", "0.5", "1.5", "-7.0", ""]
    # nested columns are JSON text, which starts with [ and is left as it is
    assert rows[0]["tags"] == json.dumps([CELLS[0]], separators=(",", ":")) and rows[9]["tags"] == "[]"


def test_jsonl_and_parquet_write_the_stored_values(export, tmp_path):
    out = tmp_path / "scores.jsonl"
    assert export("--format", "jsonl", "--output", str(out)) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["reason"] for line in lines] == CELLS and [line["token_f1"] for line in lines] == SCORES
    parquet = tmp_path / "scores.parquet"
    assert export("--format", "parquet", "--output", str(parquet)) == 0
    table = pq.read_table(parquet)
    assert table.column("reason").to_pylist() == CELLS and table.column("token_f1").to_pylist() == SCORES
