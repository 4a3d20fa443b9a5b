"""The index across runs: runs in creation order, each with its verdict, failed gates and report links, and the gated
rates over runs with the baseline run's point taken from the run compared against it."""

import re
import xml.etree.ElementTree as ET

import polars as pl
import pytest

from eval_pipeline.reporting.index import index_html, index_markdown, run_verdict, trend_series

GATE_SCHEMA = {
    "run_id": pl.String,
    "gate": pl.String,
    "metric": pl.String,
    "baseline_run_id": pl.String,
    "baseline_value": pl.Float64,
    "candidate_value": pl.Float64,
    "status": pl.String,
}


def _runs() -> pl.DataFrame:
    # listed newest first: the index orders by created_at
    return pl.DataFrame(
        {
            "run_id": ["r-cand", "r-base"],
            "candidate": ["assistant@2", "assistant@1"],
            "model": ["m", "m"],
            "dataset_version": ["golden-1", "golden-1"],
            "mode": ["gate", "gate"],
            "created_at": ["2026-03-02T02:10:00Z", "2026-03-01T02:10:00Z"],
        }
    )


def _gates() -> pl.DataFrame:
    rows = [
        ("r-cand", "retrieval_recall_at_10", "recall_at_10", "r-base", 0.9, 0.8, "fail"),
        ("r-cand", "grounding_rate", "grounding_rate", "r-base", 0.7, 0.75, "pass"),
        ("r-cand", "policy_violations", "policy_violations", "r-base", 0.0, 3.0, "fail"),
        ("r-base", "retrieval_recall_at_10", "recall_at_10", "r-base", None, None, "not_applicable"),
        ("r-base", "grounding_rate", "grounding_rate", "r-base", None, None, "not_applicable"),
        ("r-base", "policy_violations", "policy_violations", "r-base", None, None, "not_applicable"),
    ]
    return pl.DataFrame(rows, schema=GATE_SCHEMA, orient="row")


FILES = {
    "r-base": ["gate.html", "gate.md", "rag.html", "rag.md"],
    "r-cand": ["agent.html", "gate.html", "notes.txt", "rag.html", "rag.md"],
}


def _row(html: str, run_id: str) -> str:
    return re.search(rf"<tr><td>{run_id}</td>.*?</tr>", html).group(0)


def _points(html: str) -> dict[str, tuple[float, float]]:
    svg = ET.fromstring(re.search(r"<svg.*?</svg>", html, re.S).group(0))
    ns = "{http://www.w3.org/2000/svg}"
    return {c.find(f"{ns}title").text: (float(c.get("cx")), float(c.get("cy"))) for c in svg.iter(f"{ns}circle")}


def test_index_html_lists_runs_in_order_with_verdicts_links_and_trend():
    html = index_html(_runs(), _gates(), FILES)
    assert html.index("<td>r-base</td>") < html.index("<td>r-cand</td>")
    base, cand = _row(html, "r-base"), _row(html, "r-cand")
    assert (
        '<td class="status status-not_gated">not_gated</td><td>0</td><td>3</td><td>–</td>'
        '<td><a href="r-base/gate.html">gate</a>, <a href="r-base/rag.html">rag</a></td>'
    ) in base
    assert (
        '<td class="status status-fail">fail</td><td>2</td><td>3</td><td>r-base</td>'
        '<td><a href="r-cand/gate.html">gate</a>, <a href="r-cand/rag.html">rag</a>, '
        '<a href="r-cand/agent.html">agent</a></td>'
    ) in cand
    assert "<td>assistant@2</td><td>m</td><td>golden-1</td><td>gate</td>" in cand
    assert "notes" not in html
    # the banner is the latest run's verdict
    assert (
        '<div class="verdict verdict-fail" role="status"><p class="verdict-headline"><strong>Release blocked</strong>'
        " — latest run <code>r-cand</code>: 2 of 3 gates failed</p>"
    ) in html
    points = _points(html)
    # r-base has no candidate value of its own: its points are the baseline values r-cand recorded against it
    assert set(points) == {
        "grounding_rate, r-base: 0.7000",
        "grounding_rate, r-cand: 0.7500",
        "retrieval_recall_at_10, r-base: 0.9000",
        "retrieval_recall_at_10, r-cand: 0.8000",
    }
    assert points["retrieval_recall_at_10, r-base: 0.9000"][0] < points["retrieval_recall_at_10, r-cand: 0.8000"][0]
    assert points["retrieval_recall_at_10, r-base: 0.9000"][1] < points["retrieval_recall_at_10, r-cand: 0.8000"][1]
    chart_end = html.index("</svg>")
    assert (
        html.index(
            '<p class="caption">Each line is one gate\'s candidate value per run; a run with no candidate value of '
            "its own that served as another run's baseline shows the baseline value"
        )
        > chart_end
    )
    assert "<td>r-base</td><td>0.7000</td><td>0.9000</td>" in html  # the values table under the chart


def test_index_markdown_links_the_markdown_reports():
    markdown = index_markdown(_runs(), _gates(), FILES)
    assert markdown.startswith(
        "# Evaluation runs\n\n> **Release blocked** — latest run `r-cand`: 2 of 3 gates failed\n"
    )
    rows = [line for line in markdown.splitlines() if line.startswith("| r-") and "assistant@" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| r-base", "| r-cand"]
    assert rows[0].endswith("| not_gated | 0 | 3 | – | [gate](r-base/gate.md), [rag](r-base/rag.md) |")
    assert rows[1].endswith("| fail | 2 | 3 | r-base | [rag](r-cand/rag.md) |")
    assert "| r-base | 0.7000 | 0.9000 |" in markdown and "| r-cand | 0.7500 | 0.8000 |" in markdown


def test_a_unit_column_selects_the_rate_gates_when_present():
    plain = trend_series(_runs().sort("created_at"), _gates().with_columns(pl.lit(None, dtype=pl.String).alias("unit")))
    units = _gates().with_columns(
        pl.when(pl.col("metric") == "policy_violations")
        .then(pl.lit("cases"))
        .otherwise(pl.lit("fraction"))
        .alias("unit")
    )
    assert (
        trend_series(_runs().sort("created_at"), units)
        == plain
        == {"grounding_rate": [0.7, 0.75], "retrieval_recall_at_10": [0.9, 0.8]}
    )
    assert _points(index_html(_runs(), units, FILES)) == _points(index_html(_runs(), _gates(), FILES))


def test_the_baseline_point_comes_from_the_first_run_compared_against_it():
    runs = pl.DataFrame({"run_id": ["base", "c1", "c2"], "created_at": ["2026-01-01", "2026-01-02", "2026-01-03"]})
    gates = pl.DataFrame(
        [
            ("c2", "g", "pass_at_1", "base", 0.95, 0.5, "fail"),
            ("c1", "g", "pass_at_1", "base", 0.9, None, "incomplete"),
            ("base", "g", "pass_at_1", None, None, None, "not_applicable"),
        ],
        schema=GATE_SCHEMA,
        orient="row",
    )
    assert trend_series(runs, gates) == {"g": [0.9, None, 0.5]}
    html = index_html(runs, gates, {})
    assert '<td class="status status-undecided">undecided</td>' in _row(html, "c1")
    assert set(_points(html)) == {"g, base: 0.9000", "g, c2: 0.5000"}


@pytest.mark.parametrize(
    ("statuses", "verdict"),
    [
        (["fail", "pass", "incomplete"], "fail"),
        (["pass", "incomplete"], "undecided"),
        (["incomparable"], "undecided"),
        (["not_applicable"] * 3, "not_gated"),
        ([], "not_gated"),
        (["pass", "not_gating"], "pass"),
        (["pass", "not_applicable"], "pass"),
    ],
)
def test_run_verdict(statuses, verdict):
    assert run_verdict(statuses) == verdict


def test_runs_without_manifest_or_gates_still_list():
    runs = pl.DataFrame({"run_id": ["r1"]})
    gates = pl.DataFrame(
        [("r2", "g", "recall_at_10", None, None, None, "incomplete")], schema=GATE_SCHEMA, orient="row"
    )
    html = index_html(runs, gates, {"r1": ["rag.html"]})
    assert html.index("<td>r1</td>") < html.index("<td>r2</td>")
    assert '<td class="status status-not_gated">not_gated</td>' in _row(html, "r1")
    assert '<a href="r1/rag.html">rag</a>' in _row(html, "r1")
    assert "no gated rate metric has a value yet" in html and "<svg" not in html
    empty = index_markdown(
        pl.DataFrame({"run_id": []}, schema={"run_id": pl.String}), pl.DataFrame(schema=GATE_SCHEMA), {}
    )
    assert "## Runs (0)\n" in empty and "> **" not in empty
