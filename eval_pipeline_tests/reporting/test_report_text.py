"""What a new user reads in the bundled sample's outputs (every report and case page, `eval-pipeline gate` and `show`):
no Python placeholder (None, nan, a baseline called `none`), no raw Markdown or raw JSON in an HTML table, the key
columns of wide tables first, and pass@1 explained where it stands beside failed process stages."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from eval_pipeline.cli import main
from eval_pipeline.cli.show import register

PLACEHOLDERS = re.compile(r"\bNone\b|`none`|\bnan\b|\bNaN\b")


def _html_text(html: str) -> str:
    """The text a reader sees: charts, styles and tags dropped (an HTML attribute or SVG may say fill="none")."""
    html = re.sub(r"<svg\b.*?</svg>|<style>.*?</style>", "", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


@pytest.fixture(scope="module")
def pages(scored) -> dict[Path, str]:
    reports: Path = scored["reports"]
    found = {
        path: path.read_text(encoding="utf-8") for path in sorted(reports.rglob("*")) if path.suffix in (".md", ".html")
    }
    assert len([p for p in found if p.parent.name == "cases"]) >= 5 and reports / "cand-42" / "gate.md" in found
    return found


def test_no_report_or_case_page_shows_a_python_placeholder(pages):
    leaks = {
        str(path.name): sorted(set(PLACEHOLDERS.findall(_html_text(text) if path.suffix == ".html" else text)))
        for path, text in pages.items()
    }
    assert {name: found for name, found in leaks.items() if found} == {}


def test_no_html_table_shows_raw_markdown_or_raw_json(pages):
    for path, text in pages.items():
        if path.suffix != ".html":
            continue
        assert "`" not in _html_text(text), f"{path.name}: a backtick in the page text"
        cells = re.findall(r"<td[^>]*>(.*?)</td>", text, flags=re.S)
        raw = [c for c in cells if c.startswith("{&quot;") or c.startswith('{"')]
        assert raw == [], f"{path.name}: raw JSON object text in a cell: {raw[:2]}"


def test_a_run_without_a_baseline_says_no_baseline(pages, scored):
    base = pages[scored["reports"] / "base-41" / "gate.md"]
    assert "- candidate `base-41` not gated (this run is the baseline: not gated against itself): exit code 2" in base


def _header(markdown: str, title: str) -> list[str]:
    at = markdown.index(title)
    line = next(line for line in markdown[at:].splitlines() if line.startswith("| "))
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_wide_tables_put_their_key_columns_first(pages, scored):
    gate = pages[scored["reports"] / "cand-42" / "gate.md"]
    assert _header(gate, "## Gates")[:4] == ["gate", "status", "owner", "reason"]
    assert _header(gate, "## Blocking cases")[:2] == ["case_id", "owners"]
    assert _header(gate, "## Evidence use")[:3] == ["case_id", "evidence_use", "reason"]
    rag = pages[scored["reports"] / "base-41" / "rag.md"]
    assert _header(rag, "### Judge calibration")[:3] == ["level", "judge_version", "may_gate"]
    html = pages[scored["reports"] / "base-41" / "rag.html"]
    calibration = html[html.index("<h3>Judge calibration</h3>") :]
    calibration = calibration[: calibration.index("</table></div>")]
    assert calibration.count('<td class="json"><table class="nested">') == calibration.count("<tr><td>")


def test_reliability_counts_the_attempts_that_failed_a_process_stage(pages, scored):
    agent = pages[scored["reports"] / "cand-42" / "agent.md"]
    header = _header(agent, "## Reliability over repeated attempts")
    assert header[:6] == ["case_id", "n_attempts", "n_incomplete", "n_success", "failed_process_stage", "pass_at_1"]
    row = next(line for line in agent.splitlines() if line.startswith("| agent-001 |") and "1.0000" in line)
    cells = dict(zip(header, (c.strip() for c in row.strip("|").split("|")), strict=True))
    # agent-001 fails tool_order in every attempt and reaches the right world state every time
    assert (cells["n_success"], cells["failed_process_stage"], cells["pass_at_1"]) == ("3", "3", "1.0000")
    assert "- pass@1 and pass^k count an attempt a success when its verified outcome (the world state) passed" in agent
    assert (
        "- pass_rate counts a trace passed only when every stage passed; pass_at_1 counts an attempt a success" in agent
    )


def _show(scored, capsys, *argv) -> str:
    parser = argparse.ArgumentParser(prog="eval-pipeline")
    register(parser.add_subparsers())
    args = parser.parse_args(["show", *argv, "--data", str(scored["data"]), "--warehouse", scored["warehouse"].root])
    assert args.handler(args) == 0
    return capsys.readouterr().out


def test_show_explains_pass_at_1_and_prints_no_placeholder(scored, capsys):
    text = _show(scored, capsys, "agent-001", "--run", "cand-42")
    assert (
        "  pass@1 and pass^k count an attempt a success when its verified outcome passed, not every stage: 3 of 3 "
        "attempt(s) failed a process stage (tool_order)"
    ) in text.splitlines()
    for case in ("agent-019", "rag-010", "both-001", "agent-016-cf"):
        assert not PLACEHOLDERS.findall(_show(scored, capsys, case, "--run", "cand-42")), case


def _gate_lines(scored, capsys, candidate: str, baseline: str) -> list[str]:
    main(
        [
            "gate",
            "--candidate",
            candidate,
            "--baseline",
            baseline,
            "--data",
            str(scored["data"]),
            "--warehouse",
            scored["warehouse"].root,
        ]
    )
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize(("candidate", "baseline"), [("cand-42", "base-41"), ("base-41", "base-41")])
def test_gate_text_table_rows_line_up_with_the_header(scored, capsys, candidate, baseline):
    lines = _gate_lines(scored, capsys, candidate, baseline)
    assert not PLACEHOLDERS.findall("\n".join(lines))
    header_at = next(i for i, line in enumerate(lines) if line.startswith("gate "))
    header = lines[header_at]
    rows = lines[header_at + 2 : lines.index("", header_at)]
    assert len(rows) == 10 and any(r.startswith("agent_pass_at_1_high_criticality ") for r in rows)
    for title in ("status", "unit", "limit", "owner", "reason"):
        at = header.index(title)
        for row in rows:
            # a cell starts under its header: a space before it, text at it (a gate name never runs into the status)
            if title == "reason" and len(row) <= at:
                continue  # a passed gate without a reason
            assert row[at - 2 : at] == "  " and row[at] != " ", (title, row)
