"""The story of one case in one run, stage by stage, from de-identified tables: as terminal text and as an HTML page.

Everything here is a pure function of polars frames (`CaseTables`, tables.py); reading them from the warehouse is
`case_pages.read_case_tables`. Only de-identified tables are ever read: no `_restricted` table reaches a story.
build.py makes the story (views.py: each lane's view of an attempt), compare.py sets it beside the baseline's,
text.py and lane_text.py write it for the terminal, page.py as an HTML page.
"""

from eval_pipeline.reporting.case_story.arguments import ABSENT, call_argument_diffs, field_diffs, json_text, split_call
from eval_pipeline.reporting.case_story.build import build_story
from eval_pipeline.reporting.case_story.compare import baseline_lines, side_by_side
from eval_pipeline.reporting.case_story.formatting import delta_cell, fmt
from eval_pipeline.reporting.case_story.model import AgentView, Attempt, CaseStory, RagView
from eval_pipeline.reporting.case_story.page import case_page_html, case_page_name, case_sections
from eval_pipeline.reporting.case_story.tables import CASE_TABLES, RUN_TABLES, CaseTables
from eval_pipeline.reporting.case_story.text import (
    attempt_lines,
    case_lines,
    case_story_text,
    case_value,
    gate_lines,
    process_failures,
    reliability_lines,
    verdict_line,
)

__all__ = [
    "ABSENT",
    "CASE_TABLES",
    "RUN_TABLES",
    "AgentView",
    "Attempt",
    "CaseStory",
    "CaseTables",
    "RagView",
    "attempt_lines",
    "baseline_lines",
    "build_story",
    "call_argument_diffs",
    "case_lines",
    "case_page_html",
    "case_page_name",
    "case_sections",
    "case_story_text",
    "case_value",
    "delta_cell",
    "field_diffs",
    "fmt",
    "gate_lines",
    "json_text",
    "process_failures",
    "reliability_lines",
    "side_by_side",
    "split_call",
    "verdict_line",
]
