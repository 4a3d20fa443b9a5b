"""Report rendering: trace text never becomes markup, report tables have a total order, incomplete is its own count."""

import polars as pl

from eval_pipeline.reporting.lane_data import LaneData, incomplete_lines
from eval_pipeline.reporting.lane_rag import rag_sections
from eval_pipeline.reporting.render import Section, render_html, render_markdown
from eval_pipeline.scoring import attribution as a

SCRIPT = "<script>alert(1)</script>"


def test_markdown_and_html_escape_html_from_trace_text():
    sections = [
        Section(
            f"Answer {SCRIPT}",
            [f"- reason: {SCRIPT} & more"],
            pl.DataFrame({"trace_id": ["t1"], "answer": [f"{SCRIPT} | <b>bold</b>"]}),
        )
    ]
    markdown = render_markdown(f"Run {SCRIPT}", sections)
    assert markdown == (
        "# Run &lt;script&gt;alert(1)&lt;/script&gt;\n\n"
        "## Answer &lt;script&gt;alert(1)&lt;/script&gt;\n\n"
        "- reason: &lt;script&gt;alert(1)&lt;/script&gt; &amp; more\n\n"
        "| trace_id | answer |\n|---|---|\n"
        "| t1 | &lt;script&gt;alert(1)&lt;/script&gt; \\| &lt;b&gt;bold&lt;/b&gt; |\n"
    )
    html = render_html(f"Run {SCRIPT}", sections)
    assert "<script" not in html and "<b>" not in html
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt; | &lt;b&gt;bold&lt;/b&gt;</td>" in html


def _grounding(stages: dict[str, tuple[str, str | None, float | None]]) -> pl.DataFrame:
    ids = list(stages)
    return pl.DataFrame(
        {
            "run_id": ["r"] * len(ids),
            "trace_id": ids,
            "case_id": [f"c-{t}" for t in ids],
            "attempt": [1] * len(ids),
            "grounding_rate": [stages[t][2] for t in ids],
            "n_claims": [2] * len(ids),
            "n_supported": [1] * len(ids),
            "status": ["incomplete" if stages[t][0] == "incomplete" else "scored" for t in ids],
            "grounding_stage": [stages[t][0] for t in ids],
            "grounding_reason": [stages[t][1] for t in ids],
        }
    )


def test_incomplete_grounding_is_counted_by_reason_and_left_out_of_the_mean():
    grounding = _grounding(
        {
            "t1": ("pass", None, 1.0),
            "t2": ("fail", "grounding_rate 0.0 < threshold 1.0", 0.0),
            "t3": ("incomplete", "no_context_logged", None),
            "t4": ("incomplete", "no_context_logged", None),
            "t5": ("incomplete", "harness status timeout: provider timeout", None),
        }
    )
    assert incomplete_lines(grounding, "grounding") == [
        "- incomplete grounding: 3 of 5 traces, left out of the means "
        "(no_context_logged: 2; harness status timeout: provider timeout: 1)"
    ]
    stages = a.stage_results("rag", [grounding])
    outcomes = a.lane_outcomes(stages)
    data = LaneData(
        lane="rag",
        run_id="r",
        manifest={},
        stage_results=stages,
        outcomes=outcomes,
        rollup=a.rollup(outcomes, "rag"),
        tables={"grounding_scores": grounding},
    )
    grounding_section = next(s for s in rag_sections(data) if s.title == "Grounding")
    # mean over the two scored traces: (1.0 + 0.0) / 2; n_claims is counted over those two as well
    assert grounding_section.lines[:2] == [
        "- grounding rate 0.5000 (supported claims / claims, per trace)",
        "- incomplete grounding: 3 of 5 traces, left out of the means "
        "(no_context_logged: 2; harness status timeout: provider timeout: 1)",
    ]
    assert grounding_section.table.rows() == [("grounding_rate", 0.5, 2), ("n_claims", 2.0, 2), ("n_supported", 1.0, 2)]
    incomplete = next(s for s in rag_sections(data) if s.title.startswith("Incomplete"))
    assert incomplete.table.select("trace_id", "reason").rows() == [
        ("t3", "grounding incomplete: no_context_logged"),
        ("t4", "grounding incomplete: no_context_logged"),
        ("t5", "grounding incomplete: harness status timeout: provider timeout"),
    ]


def test_tied_rows_of_report_tables_come_in_a_total_order():
    retrieval = pl.DataFrame(
        {
            "run_id": ["r"] * 4,
            "trace_id": ["t4", "t3", "t2", "t1"],
            "status": ["scored"] * 4,
            "failure_class": ["keyword_miss", "embedding_miss", "keyword_miss", "embedding_miss"],
        }
    )
    stages = a.stage_results("rag", [])
    data = LaneData(
        lane="rag",
        run_id="r",
        manifest={},
        stage_results=stages,
        outcomes=a.lane_outcomes(stages),
        rollup=a.rollup(a.lane_outcomes(stages), "rag"),
        tables={"retrieval_scores": retrieval},
    )
    for frame in (retrieval, retrieval.reverse()):
        data.tables["retrieval_scores"] = frame
        section = next(s for s in rag_sections(data) if s.title == "Retrieval")
        # two classes tied at two traces each: by name
        assert section.table.rows() == [("embedding_miss", 2), ("keyword_miss", 2)]
