"""The reports of the bundled sample, materialized into a temporary warehouse: write_index reads the real tables, and
in a browser at 1,400 px no page grows wider than the window and no chart text leaves its SVG."""

import concurrent.futures
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.io.storage import open_location
from eval_pipeline.reporting import charts
from eval_pipeline.reporting.index import run_verdict, write_index
from eval_pipeline.reporting.render import Section, Verdict, render_html

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path(os.environ.get("EVAL_PIPELINE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def sample(scored) -> dict:
    """Both sample runs, materialized once for the pipeline tests."""
    return {"warehouse": scored["warehouse"], "reports": scored["reports"], "code": scored["code"]}


def test_write_index_against_the_sample_warehouse(sample):
    reports = sample["reports"]
    for name in ("index.html", "index.md"):
        (reports / name).unlink(missing_ok=True)
    uris = write_index(sample["warehouse"], open_location(reports))
    assert uris == [str(reports / "index.html"), str(reports / "index.md")]
    html, markdown = (reports / "index.html").read_text(), (reports / "index.md").read_text()

    manifest = sample["warehouse"].read("run_manifest").sort("created_at", "run_id")
    gates = sample["warehouse"].read("gate_results")
    order = manifest["run_id"].to_list()
    assert order == ["base-41", "cand-42"]
    # the runs table (after the failed high-criticality cases, which come first)
    runs_html = html.split("Runs (", 1)[1]
    assert [runs_html.index(f"<tr><td>{run}</td>") for run in order] == sorted(
        runs_html.index(f"<tr><td>{run}</td>") for run in order
    )
    for run in order:
        statuses = gates.filter(pl.col("run_id") == run)["status"].to_list()
        row = re.search(rf"<tr><td>{run}</td>.*?</tr>", runs_html).group(0)
        verdict = run_verdict(statuses)
        assert f'<td class="status status-{verdict}">{verdict}</td><td>{statuses.count("fail")}</td>' in row
    assert run_verdict(gates.filter(pl.col("run_id") == "cand-42")["status"].to_list()) == "fail"
    assert run_verdict(gates.filter(pl.col("run_id") == "base-41")["status"].to_list()) == "not_gated"
    assert 'class="verdict verdict-fail"' in html and "> **Release blocked** — latest run `cand-42`" in markdown

    # every report link resolves to a file the pipeline wrote, HTML from the HTML page, Markdown from the Markdown one
    hrefs = re.findall(r'href="([^"]+)"', html)
    assert {"base-41/gate.html", "base-41/rag.html", "base-41/agent.html", "cand-42/gate.html"} <= set(hrefs)
    assert all((reports / h).is_file() and h.endswith(".html") for h in hrefs)
    md_links = re.findall(r"\]\(([^)]+)\)", markdown)
    assert md_links and all((reports / h).is_file() and h.endswith(".md") for h in md_links)

    # the trend: the candidate's values, and base-41's from the baseline values cand-42 recorded against it
    svg = ET.fromstring(re.search(r"<svg.*?</svg>", html, re.S).group(0))
    titles = {c.find("{http://www.w3.org/2000/svg}title").text for c in svg.iter("{http://www.w3.org/2000/svg}circle")}
    rates = gates.filter(
        (pl.col("run_id") == "cand-42")
        & pl.col("metric").is_in(["recall_at_10", "args_valid_rate", "pass_at_1", "grounding_rate"])
    )
    # the suite's four rate gates, and the sample's segmented ones beside them
    assert rates.filter(pl.col("segment").is_null()).height == 4
    expected = set()
    for row in rates.iter_rows(named=True):
        expected |= {
            f"{row['gate']}, cand-42: {row['candidate_value']:.4f}",
            f"{row['gate']}, base-41: {row['baseline_value']:.4f}",
        }
    assert titles == expected


def in_a_thread_of_its_own(work):
    """`work()` run in a thread of its own: the UI tests' session browser keeps Playwright's event loop running in the
    main thread of a test process, and Playwright's sync API refuses to start inside a running loop (under pytest-xdist
    both kinds of test can share one process)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(work).result()


def _layout(paths: list[Path], width: int) -> dict[Path, dict]:
    """Per page: document and viewport widths, and the SVG texts whose rendered box leaves their viewBox."""
    pytest.importorskip("playwright.sync_api", reason="the Python package playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set EVAL_PIPELINE_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    measure = """() => { const outside = [];
      for (const svg of document.querySelectorAll('svg')) { const vb = svg.viewBox.baseVal;
        for (const t of svg.querySelectorAll('text')) { const b = t.getBBox();
          const m = svg.getCTM().inverse().multiply(t.getCTM());
          const pts = [[b.x, b.y], [b.x + b.width, b.y], [b.x, b.y + b.height], [b.x + b.width, b.y + b.height]]
            .map(([x, y]) => [m.a * x + m.c * y + m.e, m.b * x + m.d * y + m.f]);
          const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]);
          if (Math.min(...xs) < -0.5 || Math.max(...xs) > vb.width + 0.5
              || Math.min(...ys) < -0.5 || Math.max(...ys) > vb.height + 0.5)
            outside.push(t.textContent); } }
      return {document: document.documentElement.scrollWidth, \
viewport: document.documentElement.clientWidth, outside}; }"""

    def measure_pages() -> dict[Path, dict]:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000
            )
            try:
                page = browser.new_page(viewport={"width": width, "height": 900})
                result = {}
                for path in paths:
                    page.goto(path.as_uri())
                    result[path] = page.evaluate(measure)
                return result
            finally:
                browser.close()

    return in_a_thread_of_its_own(measure_pages)


@pytest.mark.integration
def test_sample_reports_fit_a_1400_px_window(sample):
    reports = sample["reports"]
    write_index(sample["warehouse"], open_location(reports))
    pages = sorted(reports.glob("*/*.html")) + sorted(reports.glob("*/cases/*.html"))[:6] + [reports / "index.html"]
    assert len(pages) >= 7
    for path, page in _layout(pages, 1400).items():
        name = path.relative_to(reports)
        assert page["document"] <= page["viewport"], (
            f"{name} is {page['document']} px wide in a {page['viewport']} px window"
        )
        assert page["outside"] == [], f"{name}: chart text outside its SVG: {page['outside']}"


@pytest.mark.integration
def test_a_wide_table_and_long_labels_fit_a_narrow_window(tmp_path):
    columns = {f"column_{i}_with_a_long_name": [f"value {i} " * 12, "x" * 120, "fail"] for i in range(16)}
    labels = ["context_assembly", "tool_arguments", "tool_selection", "a_stage_label_long_enough_to_be_cut_short_here"]
    sections = [
        Section(
            "Wide",
            ["- `" + "y" * 300 + "`"],
            pl.DataFrame(columns),
            charts.bar_chart(
                "failures", labels, [5.0, 4.0, 2.0, 1.0], [0.4, 0.7, 0.9, 1.0], baseline=[1.0, 2.0, 3.0, 4.0]
            ),
        ),
        Section(
            "Trend",
            [],
            None,
            charts.trend_chart(
                "rates",
                [f"run-{i}-with-a-long-identifier" for i in range(9)],
                {
                    "recall_at_10": [0.5 + i / 20 for i in range(9)],
                    "pass_at_1": [None, *[0.9 - i / 30 for i in range(8)]],
                },
            ),
        ),
        Section("κ", [], None, charts.interval_chart("κ", 0.45, 0.3, 0.6, 0.6)),
    ]
    page = tmp_path / "wide.html"
    page.write_text(render_html("Wide", sections, Verdict("fail", "Release blocked: " + "z" * 200)))
    for width in (1400, 700):
        result = _layout([page], width)[page]
        assert result["document"] <= result["viewport"], f"{result['document']} px wide in a {width} px window"
        assert result["outside"] == []


def _hidden_columns(page_path: Path, width: int) -> dict[str, list[str]]:
    """Per table (its first four column names): the columns a reader must scroll sideways to see."""
    pytest.importorskip("playwright.sync_api", reason="the Python package playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (set EVAL_PIPELINE_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    measure = """() => { const out = {};
      for (const wrap of document.querySelectorAll('.table-wrap')) { const right = wrap.getBoundingClientRect().right;
        const heads = [...wrap.querySelectorAll(':scope > table > thead th')];
        out[heads.slice(0, 4).map(h => h.textContent).join(',')] =
          heads.filter(h => h.getBoundingClientRect().right > right + 1).map(h => h.textContent); }
      return out; }"""

    def measure_page() -> dict[str, list[str]]:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS, timeout=60_000
            )
            try:
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.goto(page_path.as_uri())
                return page.evaluate(measure)
            finally:
                browser.close()

    return in_a_thread_of_its_own(measure_page)


@pytest.mark.integration
def test_the_columns_a_reader_acts_on_show_without_scrolling_at_1400_px(sample):
    reports = sample["reports"]
    gates = _hidden_columns(reports / "cand-42" / "gate.html", 1400)
    assert not {"gate", "status", "owner", "reason"} & set(gates["gate,status,owner,reason"])
    assert not {"case_id", "owners", "gates", "why"} & set(gates["case_id,owners,gates,why"])
    rag = _hidden_columns(reports / "base-41" / "rag.html", 1400)
    assert rag["level,judge_version,may_gate,n"] == []
