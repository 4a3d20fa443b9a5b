"""Report rendering: inline Markdown in HTML, trace text kept inert, bullets as lists, the verdict banner, links,
status cells and tables that scroll instead of widening the page."""

import json
import re

import polars as pl
import pytest

from eval_pipeline.reporting.render import Section, Verdict, render_html, render_markdown

SCRIPT = "<script>alert(1)</script>"


def _body(html: str) -> str:
    return html.split("<body>", 1)[1]


def test_bold_and_code_render_in_html_and_stay_markdown_in_markdown():
    sections = [Section("Gates", ["- release **fail** for `cand-42`", "a _plain_ paragraph"])]
    html = render_html("Run", sections)
    assert "<li>release <strong>fail</strong> for <code>cand-42</code></li>" in html
    assert "<p>a <em>plain</em> paragraph</p>" in html
    assert "**" not in _body(html) and "`" not in _body(html)
    markdown = render_markdown("Run", sections)
    assert "- release **fail** for `cand-42`\n\na _plain_ paragraph\n" in markdown


def test_script_in_a_line_stays_escaped_in_both_renderings():
    sections = [Section("Answer", [f"- answer {SCRIPT} & `<b>x</b>` [a](javascript:alert(1)) ![i](http://x/i.png)"])]
    html = render_html(f"Run {SCRIPT}", sections)
    body = _body(html)
    assert "<script" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; <code>&lt;b&gt;x&lt;/b&gt;</code>" in body
    # markdown-it refuses the javascript: link (left as text); an image is at most a link, never fetched
    assert 'href="javascript' not in html and "[a](javascript:alert(1))" in body and "<img" not in html
    markdown = render_markdown(f"Run {SCRIPT}", sections)
    assert markdown.startswith("# Run &lt;script&gt;alert(1)&lt;/script&gt;\n")
    assert "- answer &lt;script&gt;alert(1)&lt;/script&gt; &amp; `&lt;b&gt;x&lt;/b&gt;`" in markdown


def test_an_entity_in_trace_text_is_shown_as_written():
    html = render_html("Run", [Section("Answer", ["- the answer said &lt;b&gt;"])])
    # shown as the characters "&lt;b&gt;", as the Markdown rendering shows it, never decoded to a tag
    assert "<li>the answer said &amp;lt;b&amp;gt;</li>" in html


def test_consecutive_bullets_become_one_list():
    html = render_html("Run", [Section("S", ["- a", "- b", "between", "- c"])])
    assert "<ul><li>a</li><li>b</li></ul>\n<p>between</p>\n<ul><li>c</li></ul>" in html
    assert html.count("<ul>") == 2
    assert render_markdown("Run", [Section("S", ["- a", "- b", "between", "- c"])]) == (
        "# Run\n\n## S\n\n- a\n- b\n\nbetween\n\n- c\n"
    )


LABELS = {
    "pass": "Release passes",
    "fail": "Release blocked",
    "undecided": "Release undecided",
    "not_gated": "Not gated",
}


@pytest.mark.parametrize("status", ["pass", "fail", "undecided", "not_gated"])
def test_verdict_banner_for_each_status(status):
    verdict = Verdict(
        status,
        f"{LABELS[status]}: 5 of 6 gates — `cand-42`",
        ["- retrieval_recall_at_10: 97.78 → 86.67 (limit −2 points)", "- **agent_pass_at_1** fail"],
    )
    sections = [Section("Gates", ["- first"])]
    html = render_html("Release gates", sections, verdict)
    banner = f'<div class="verdict verdict-{status}" role="status">'
    assert html.count(banner) == 1
    # right under the title, before the first section
    assert html.index("</h1>") < html.index(banner) < html.index("<h2>Gates</h2>")
    assert (
        f'{banner}<p class="verdict-headline"><strong>{LABELS[status]}</strong> — 5 of 6 gates — <code>cand-42</code>'
        "</p><ul><li>retrieval_recall_at_10: 97.78 → 86.67 (limit −2 points)</li>"
        "<li><strong>agent_pass_at_1</strong> fail</li></ul></div>"
    ) in html
    assert f".verdict-{status}{{background:" in html
    markdown = render_markdown("Release gates", sections, verdict)
    assert markdown.startswith(
        f"# Release gates\n\n> **{LABELS[status]}** — 5 of 6 gates — `cand-42`\n>\n"
        "> - retrieval_recall_at_10: 97.78 → 86.67 (limit −2 points)\n> - **agent_pass_at_1** fail\n\n## Gates\n"
    )


def test_verdict_headline_without_the_label_and_without_details():
    verdict = Verdict("fail", f"three gates failed {SCRIPT}")
    markdown = render_markdown("R", [], verdict)
    assert markdown == "# R\n\n> **Release blocked** — three gates failed &lt;script&gt;alert(1)&lt;/script&gt;\n"
    html = render_html("R", [], verdict)
    assert (
        "<strong>Release blocked</strong> — three gates failed &lt;script&gt;alert(1)&lt;/script&gt;</p></div>" in html
    )


def test_an_unknown_verdict_status_is_refused():
    with pytest.raises(ValueError, match="blocked"):
        Verdict("blocked", "x")


def test_no_verdict_keeps_the_report_as_before():
    sections = [Section("S", ["- a"], pl.DataFrame({"x": [1]}))]
    assert render_markdown("T", sections) == "# T\n\n## S\n\n- a\n\n| x |\n|---|\n| 1 |\n"
    assert "verdict verdict-" not in _body(render_html("T", sections))


def _linked() -> Section:
    table = pl.DataFrame(
        {
            "case_id": ["rag 001#2", None, "a]b)|c"],
            "cases": [["c1", "c 2"], [], None],
            "run_id": ["r1", "r2", None],
            "report": ["rag", "gate", "agent"],
        }
    )
    return Section(
        "Cases",
        [],
        table,
        links={"case_id": "cases/{value}.html", "cases": "cases/{value}.html", "report": "{run_id}/{value}.html"},
    )


def test_links_in_html_quote_the_value_and_skip_nulls():
    html = render_html("R", [_linked()])
    assert '<td><a href="cases/rag%20001%232.html">rag 001#2</a></td>' in html
    assert '<td><a href="cases/a%5Db%29%7Cc.html">a]b)|c</a></td>' in html
    assert '<td><a href="cases/c1.html">c1</a>, <a href="cases/c%202.html">c 2</a></td>' in html
    assert html.count("<td>–</td>") == 4  # the null case id, the empty and the null list, the null run id
    assert '<td><a href="r1/rag.html">rag</a></td>' in html and '<td><a href="r2/gate.html">gate</a></td>' in html
    # another cell of the row is null: no link rather than a broken one
    assert "<td>agent</td>" in html


def test_links_in_markdown_escape_brackets_and_pipes():
    markdown = render_markdown("R", [_linked()])
    rows = markdown.split("\n")
    assert (
        "| [rag 001#2](cases/rag%20001%232.html) | [c1](cases/c1.html), [c 2](cases/c%202.html) | r1 "
        "| [rag](r1/rag.html) |"
    ) in rows
    assert "| – | – | r2 | [gate](r2/gate.html) |" in rows
    assert "| [a\\]b)\\|c](cases/a%5Db%29%7Cc.html) | – | – | agent |" in rows


def test_status_cells_are_classed():
    table = pl.DataFrame(
        {
            "status": ["pass", "fail", "incomplete", "not_applicable"],
            "verdict": ["SUPPORTED", "CONTRADICTED", "NOT_FOUND", "fail because"],
            "n": [1, 2, 3, 4],
        }
    )
    html = render_html("R", [Section("S", [], table)])
    for word in ("pass", "fail", "incomplete", "not_applicable"):
        assert f'<td class="status status-{word}">{word}</td>' in html
    for word in ("SUPPORTED", "CONTRADICTED", "NOT_FOUND"):
        assert f'<td class="status status-{word.lower()}">{word}</td>' in html
    assert "<td>fail because</td>" in html and "<td>4</td>" in html
    assert re.search(r"td\.status-fail[,{][^}]*background:", html)


def test_equal_values_of_other_types_render_apart():
    # plain cells are rendered once per value and type: 1 is not True, nor 1.0, and -0.0 is not 0.0
    table = pl.DataFrame({"i": [1, 0], "b": [True, False], "f": [1.0, -0.0], "z": [0.0, 0.0]})
    html = render_html("R", [Section("S", [], table)])
    assert "<tr><td>1</td><td>yes</td><td>1.0000</td><td>0.0000</td></tr>" in html
    assert "<tr><td>0</td><td>no</td><td>-0.0000</td><td>0.0000</td></tr>" in html


def test_tables_scroll_in_a_wrapper_and_long_tokens_may_break():
    long_token = "x" * 80
    html = render_html("R", [Section("S", [], pl.DataFrame({"a": [long_token], "b": ["short words only"]}))])
    assert (
        '<div class="table-wrap"><table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>'
        f'<tr><td class="long">{long_token}</td><td>short words only</td></tr></tbody></table></div>'
    ) in html
    assert ".table-wrap{overflow-x:auto" in html and "td.long{overflow-wrap:anywhere" in html
    assert "max-width:1320px" in html and "td{max-width:28rem" in html


def test_the_page_is_self_contained():
    html = render_html(
        "R",
        [
            Section(
                "S",
                ["- [docs](https://example.org/x)"],
                pl.DataFrame({"a": [1]}),
                chart='<svg xmlns="http://www.w3.org/2000/svg"></svg>',
            )
        ],
    )
    assert "<script" not in html and "<link" not in html and " src=" not in html and "@import" not in html
    # a link in text stays a link, nothing is fetched
    assert '<a href="https://example.org/x">docs</a>' in html


def test_inline_code_in_a_table_cell_renders_as_code_and_nothing_else_as_markup():
    reason = "exploratory run: name a baseline (`eval-pipeline import … --baseline RUN`) and set *mode* <b>gate</b>"
    html = render_html("R", [Section("S", [], pl.DataFrame({"reason": [reason], "n": [1]}))])
    assert (
        "exploratory run: name a baseline (<code>eval-pipeline import … --baseline RUN</code>) and set *mode* "
        "&lt;b&gt;gate&lt;/b&gt;</td>"
    ) in html
    assert "`" not in _body(html)
    # Markdown keeps its code span as written
    assert "(`eval-pipeline import … --baseline RUN`)" in render_markdown(
        "R", [Section("S", [], pl.DataFrame({"reason": [reason]}))]
    )


CONFUSION = (
    '{"SUPPORTED": {"SUPPORTED": 51, "NOT_IN_EVIDENCE": 1}, "NOT_IN_EVIDENCE": {"SUPPORTED": 1, "NOT_IN_EVIDENCE": 5}}'
)


def test_a_json_object_cell_is_a_nested_table_in_html_and_key_value_text_in_markdown():
    table = pl.DataFrame(
        {
            "level": ["claim"],
            "confusion": [CONFUSION],
            "args": ['{"amount": 49, "order_id": "88131", "x": null}'],
            "calls": ['[{"a": 1}]'],
            "text": ["{not json}"],
        }
    )
    html = render_html("R", [Section("S", [], table)])
    # an object of flat objects is a matrix: rows the outer keys, columns the inner ones
    assert (
        '<td class="json"><table class="nested"><tr><th></th><th>SUPPORTED</th><th>NOT_IN_EVIDENCE</th></tr>'
        "<tr><th>SUPPORTED</th><td>51</td><td>1</td></tr><tr><th>NOT_IN_EVIDENCE</th><td>1</td><td>5</td></tr></table></td>"
    ) in html
    # any other object: key / value rows, text quoted so "88131" and 49 stay apart, null as –
    assert (
        '<table class="nested"><tr><th>amount</th><td>49</td></tr><tr><th>order_id</th><td>&quot;88131&quot;</td></tr>'
        "<tr><th>x</th><td>–</td></tr></table>"
    ) in html
    # a JSON array and text that only looks like an object stay as written
    assert "<td>[{&quot;a&quot;: 1}]</td>" in html and "<td>{not json}</td>" in html
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html)
    assert not [c for c in cells if c.startswith("{&quot;")], "raw JSON object text in an HTML cell"
    markdown = render_markdown("R", [Section("S", [], table)])
    assert (
        "| claim | SUPPORTED: (SUPPORTED: 51, NOT_IN_EVIDENCE: 1); NOT_IN_EVIDENCE: (SUPPORTED: 1, NOT_IN_EVIDENCE: 5) "
        '| amount: 49; order_id: "88131"; x: – |'
    ) in markdown


def test_a_struct_cell_is_never_python_repr():
    table = pl.DataFrame({"s": [{"a": None, "b": "x"}]})
    html, markdown = render_html("R", [Section("S", [], table)]), render_markdown("R", [Section("S", [], table)])
    assert "None" not in html and "None" not in markdown and "'" not in markdown
    assert (
        '<table class="nested"><tr><th>a</th><td>–</td></tr><tr><th>b</th><td>&quot;x&quot;</td></tr></table>' in html
    )


def test_a_large_json_object_stays_text():
    big = json.dumps({f"k{i}": i for i in range(100)})
    html = render_html("R", [Section("S", [], pl.DataFrame({"state": [big]}))])
    assert 'class="nested"' not in html.split("<body>", 1)[1]


def test_an_empty_table_says_so_in_words():
    empty = pl.DataFrame({"a": []}, schema={"a": pl.String})
    assert "<p><em>no rows</em></p>" in render_html("R", [Section("S", [], empty)])
    assert "_no rows_" in render_markdown("R", [Section("S", [], empty)])
    assert "none" not in render_html("R", [Section("S", [], empty)]).split("<body>", 1)[1]


def test_long_column_names_may_break_after_underscores_and_long_text_keeps_a_readable_width():
    reason = "the answer names a refund window that no retrieved chunk states, so the claim is unsupported"
    html = render_html("R", [Section("S", [], pl.DataFrame({"total_cost_usd": [1.0], "reason": [reason]}))])
    assert "<th>total_<wbr>cost_<wbr>usd</th>" in html
    assert f'<td class="text">{reason}</td>' in html
    assert re.search(r"td\.text\{min-width:[^}]*max-width:[^}]*word-break:break-word", html)
    assert "nowrap" not in html
