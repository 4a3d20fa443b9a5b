"""The Dagster UI (`dagster dev` on loopback, read in headless Chromium) shows the lanes, their checks and a report."""

import re

import pytest

expect = pytest.importorskip(
    "playwright.sync_api",
    reason="the Python package playwright is not installed (pip install -e '.[test]'); the browser test needs it",
).expect

pytestmark = pytest.mark.integration

LOCATION = "eval_pipeline.definitions"
# Every group of the graph, by the domain module that defines it.
GROUPS = ("ingestion", "deidentification", "retrieval", "generation", "agent", "attribution", "gates")
# Per lane group: its scores table, whose node the group's graph shows on opening, and every asset the group lists.
LANE_GROUPS = {
    "retrieval": ("retrieval_scores", ("context_scores", "judging_queue", "qrels", "retrieval_scores")),
    "generation": (
        "grounding_scores",
        ("answer_scores", "citation_scores", "claims", "grounding_scores", "judge_calibration", "review_queue"),
    ),
    "agent": ("tool_scores", ("outcome_scores", "tool_call_diffs", "tool_scores")),
}
# Both lanes' attribution assets, as the catalog writes a two-part key.
ATTRIBUTION_ASSETS = tuple(
    f"{lane} / {lane}_{name}"
    for lane in ("agent", "rag")
    for name in ("attribution", "attribution_rollup", "quarantine", "reliability", "report", "stage_results")
)
# The checks every lane table carries, blocking, ERROR severity.
LANE_TABLE_CHECKS = ("complete", "no_personal_data", "schema", "value_ranges")
REPORT_TITLES = {"rag": "RAG lane report — run {run}", "agent": "Agent lane report — run {run}"}


def _graph_node(page, name: str):
    """An asset or group node drawn in the lineage graph (an SVG), not the sidebar's entry of the same name."""
    return page.locator("svg").get_by_text(name, exact=True)


def _expect_listed(page, names) -> None:
    for name in names:
        expect(page.get_by_text(name, exact=True).first).to_be_visible()


def test_the_global_asset_graph_draws_every_group(page, ui_run):
    page.goto(f"{ui_run.url}/asset-groups")
    expect(page.get_by_text("Global asset lineage")).to_be_visible()
    for group in GROUPS:
        expect(_graph_node(page, group)).to_be_visible()


@pytest.mark.parametrize("group", sorted(LANE_GROUPS))
def test_a_lane_groups_graph_draws_its_scores_table_and_lists_every_asset(page, ui_run, group):
    table, assets = LANE_GROUPS[group]
    page.goto(f"{ui_run.url}/locations/{LOCATION}/asset-groups/{group}")
    expect(_graph_node(page, table)).to_be_visible()
    page.get_by_text("List", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/asset-groups/{group}/list"))
    _expect_listed(page, assets)


def test_the_attribution_group_lists_both_lanes_reports_and_tables(page, ui_run):
    page.goto(f"{ui_run.url}/locations/{LOCATION}/asset-groups/attribution/list")
    _expect_listed(page, ATTRIBUTION_ASSETS)


@pytest.mark.parametrize("asset", ["retrieval_scores", "tool_scores"])
def test_a_lane_tables_checks_render_with_the_recorded_outcome(page, ui_run, asset):
    never_run = [name for name in LANE_TABLE_CHECKS if (asset, name) not in ui_run.check_passed]
    assert never_run == [], f"{asset}: checks {never_run} were never evaluated (run exit {ui_run.pipeline_exit})"
    page.goto(f"{ui_run.url}/assets/{asset}?view=checks")
    expect(page.get_by_text("Checks (4)", exact=True)).to_be_visible()
    for name in LANE_TABLE_CHECKS:
        # The list entry: the check's name (its title) and the latest execution's status under it.
        entry = page.locator("span", has=page.get_by_title(name, exact=True))
        expect(entry).to_contain_text("Succeeded" if ui_run.check_passed[(asset, name)] else "Failed")
    # The Great Expectations suite behind value_ranges is named in the check's metadata.
    page.get_by_title("value_ranges", exact=True).click()
    expect(page).to_have_url(re.compile(r"checkDetail=value_ranges"))
    expect(page.get_by_text("Evaluation result", exact=True)).to_be_visible()
    expect(
        page.get_by_text("Passed" if ui_run.check_passed[(asset, "value_ranges")] else "Failed", exact=True).last
    ).to_be_visible()
    expect(page.get_by_text(f"{asset}.value_ranges", exact=True)).to_be_visible()


@pytest.mark.parametrize("lane", ["rag", "agent"])
def test_a_lane_reports_markdown_metadata_renders(page, ui_run, lane):
    # the overview shows the latest materialization: the candidate's, evaluated after its baseline
    run = ui_run.candidate_run_id
    assert f"{lane}/{lane}_report" in ui_run.materialized, (
        f"{lane}/{lane}_report of {run} was never materialized, so the UI has no report to show; run exit "
        f"{ui_run.pipeline_exit}:\n{ui_run.pipeline_summary}"
    )
    markdown = ui_run.reports / run / f"{lane}.md"
    sections = [line[3:] for line in markdown.read_text().splitlines() if line.startswith("## ")]
    assert "First failing stage (Pareto)" in sections
    page.goto(f"{ui_run.url}/assets/{lane}/{lane}_report?partition={run}")
    expect(page.get_by_text(str(markdown), exact=True)).to_be_visible()
    page.get_by_text("[Show Markdown]", exact=True).click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading", name=REPORT_TITLES[lane].format(run=run), exact=True)).to_be_visible()
    for section in sections:
        expect(dialog.get_by_role("heading", name=section, exact=True)).to_be_attached()
    pareto = dialog.get_by_role("heading", name="First failing stage (Pareto)", exact=True)
    pareto.scroll_into_view_if_needed()
    expect(pareto).to_be_visible()


@pytest.mark.parametrize("asset", ["gate_results", "gate_report"])
def test_the_candidates_blocked_release_is_a_failed_check_with_the_gates_and_cases(page, ui_run, asset):
    run = ui_run.candidate_run_id
    assert ui_run.check_passed.get((asset, "release_is_not_blocked")) is False, (
        f"the release check of {run} did not fail; run exit {ui_run.pipeline_exit}:\n{ui_run.pipeline_summary}"
    )
    page.goto(f"{ui_run.url}/assets/{asset}?view=checks")
    entry = page.locator("span", has=page.get_by_title("release_is_not_blocked", exact=True))
    expect(entry).to_contain_text("Failed")
    page.get_by_title("release_is_not_blocked", exact=True).click()
    expect(page).to_have_url(re.compile(r"checkDetail=release_is_not_blocked"))
    expect(page.get_by_text("Release blocked: 8 of 10 gates failed", exact=False).first).to_be_visible()
    # a result, not a crash: the failed gates and blocking cases are its metadata, no Python error is shown
    expect(page.get_by_text("failed_gates", exact=True).first).to_be_visible()
    expect(page.get_by_text("blocking_cases", exact=True).first).to_be_visible()
    for words in ("DagsterAssetCheckFailedError", "Traceback"):
        assert page.get_by_text(words).count() == 0, words


def _fits_the_window(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("report", ["gate.html", "rag.html", "agent.html"])
def test_a_report_shows_a_red_banner_and_fits_the_window(page, ui_run, report):
    path = ui_run.reports / ui_run.candidate_run_id / report
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(path.as_uri())
    banner = page.locator(".verdict")
    expect(banner.first).to_be_visible()
    expect(banner.first).to_contain_text("Release blocked")
    colour = banner.first.evaluate("e => getComputedStyle(e).backgroundColor")
    red, green, blue = (int(v) for v in re.findall(r"\d+", colour)[:3])
    assert red > green and red > blue, colour
    assert _fits_the_window(page), page.evaluate("document.documentElement.scrollWidth")
    # Markdown in the text is rendered, not shown literally
    assert "**" not in page.locator("body").inner_text()


def test_a_per_case_page_tells_the_story_of_a_blocking_case(page, ui_run):
    gate = ui_run.reports / ui_run.candidate_run_id / "gate.html"
    page.goto(gate.as_uri())
    page.get_by_role("link", name="rag-031", exact=True).first.click()
    expect(page).to_have_url(re.compile(r"cases/rag-031\.html$"))
    expect(page.get_by_text("rag-031", exact=False).first).to_be_visible()
    expect(page.get_by_text("recall_at_10", exact=False).first).to_be_visible()
    expect(page.get_by_text(ui_run.run_id, exact=False).first).to_be_visible()  # the baseline side by side
    assert _fits_the_window(page)
