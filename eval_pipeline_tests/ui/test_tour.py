"""The README's five-minute tour, walked in a browser after a first run: index → gate report → case page, then the UI's
run page of the blocked release → the asset's plots (the failed release check: test_dagster_ui). Every link resolves;
a blocked release is a result, not a crash."""

import re
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

expect = pytest.importorskip(
    "playwright.sync_api",
    reason="the Python package playwright is not installed (pip install -e '.[test]'); the browser test needs it",
).expect

pytestmark = pytest.mark.integration

# What a Python failure looks like when the UI shows one: none may appear for an expected outcome.
STACK_TRACE_WORDS = ("DagsterAssetCheckFailedError", "Traceback", "execute_plan.py")


def _local_links(page) -> list[str]:
    """The href of every link on a report page that points at another file (not a web page, not an anchor)."""
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    return [href for href in hrefs if href.startswith("file://")]


def _unresolved(page) -> list[str]:
    """Links of the page whose file does not exist."""
    missing = []
    for href in _local_links(page):
        path = Path(unquote(urlparse(href).path))
        if not path.is_file():
            missing.append(str(path))
    return missing


def test_the_tour_through_the_reports_resolves_every_link_on_the_first_run(page, ui_run):
    index = ui_run.reports / "index.html"
    page.goto(index.as_uri())
    assert _unresolved(page) == []
    candidate = ui_run.candidate_run_id
    # every report of both runs is linked from the index after one run (the index is written after the reports)
    for run in (ui_run.run_id, candidate):
        for report in ("gate", "rag", "agent"):
            assert (ui_run.reports / run / f"{report}.html").as_uri() in _local_links(page), (run, report)
    page.locator(f'a[href="{candidate}/gate.html"]').first.click()
    expect(page).to_have_url(re.compile(rf"{candidate}/gate\.html$"))
    expect(page.locator(".verdict").first).to_contain_text("Release blocked")
    assert _unresolved(page) == []
    page.get_by_role("link", name="rag-031", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"cases/rag-031\.html$"))
    assert _unresolved(page) == []
    body = page.locator("body").inner_text()
    assert not re.search(r"\bNone\b", body), "a Python None on the case page"


def test_the_ui_run_page_of_a_blocked_release_shows_a_completed_run_without_a_stack_trace(page, ui_run):
    dagster_run = ui_run.dagster_runs[ui_run.candidate_run_id]
    page.goto(f"{ui_run.url}/runs/{dagster_run}")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    expect(page.get_by_text("gate_report", exact=True).first).to_be_visible()
    for words in STACK_TRACE_WORDS:
        assert page.get_by_text(words).count() == 0, f"{words} on the run page of a blocked release"


def test_the_plots_tab_draws_a_headline_metric_over_the_runs(page, ui_run):
    page.goto(f"{ui_run.url}/assets/retrieval_scores?view=overview")
    expect(page.get_by_text("Plots", exact=True).first).to_be_visible()
    page.get_by_text("Plots", exact=True).first.click()
    expect(page.get_by_text("mean_recall_at_10", exact=True).first).to_be_visible()
    chart = page.locator("canvas").first
    expect(chart).to_be_visible()
    box = chart.bounding_box()
    assert box and box["width"] > 100 and box["height"] > 50, box
