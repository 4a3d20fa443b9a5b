"""Through the pipeline, on a copy of the sample: traces without logged context are incomplete in grounding and
citations (never a zero), and HTML planted in an answer reaches neither report as markup."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline
from eval_pipeline.scoring.attribution import HARNESS_OWNER

REPO_ROOT = Path(__file__).resolve().parents[2]
NO_CONTEXT = "base-41:rag-001#1"  # context field left out: null
EMPTY_CONTEXT = "base-41:rag-002#1"  # context: []
PLANTED_HTML = "base-41:rag-004#1"
SCRIPT = "<script>alert(1)</script>"
PLANTED_CLAIM = f"Also {SCRIPT} is set."  # a sentence of its own: a claim the context does not support


def _edit_traces(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        trace = json.loads(line)
        if trace["trace_id"] == NO_CONTEXT:
            del trace["context"]
        elif trace["trace_id"] == EMPTY_CONTEXT:
            trace["context"] = []
        elif trace["trace_id"] == PLANTED_HTML:
            trace["answer"]["text"] += f" {PLANTED_CLAIM}"
        else:
            continue
        lines[i] = json.dumps(trace)
    path.write_text("\n".join(lines), encoding="utf-8")


@pytest.fixture(scope="module")
def edited_run(tmp_path_factory):
    """base-41 of the sample, two traces without context and one answer carrying a <script>, scored once."""
    root = tmp_path_factory.mktemp("no-context")
    data = root / "data"
    shutil.copytree(REPO_ROOT / "data", data, ignore=shutil.ignore_patterns("warehouse", "reports"))
    _edit_traces(data / "traces" / "base-41" / "rag.jsonl")
    code = run_pipeline(
        data=str(data),
        run_ids=["base-41"],
        warehouse=str(root / "warehouse"),
        reports=str(root / "reports"),
        deid_demo=True,
        quiet=True,
        instance=dg.DagsterInstance.ephemeral(),
        stream=io.StringIO(),
    )
    return {"code": code, "warehouse": Warehouse.at(root / "warehouse"), "reports": root / "reports" / "base-41"}


def _rows(frame: pl.DataFrame, *trace_ids: str) -> dict[str, dict]:
    return {r["trace_id"]: r for r in frame.filter(pl.col("trace_id").is_in(list(trace_ids))).to_dicts()}


def test_traces_without_context_are_incomplete_in_grounding_and_citations_never_zero(edited_run):
    assert edited_run["code"] == 0
    warehouse = edited_run["warehouse"]
    grounding = _rows(warehouse.read("grounding_scores", "base-41"), NO_CONTEXT, EMPTY_CONTEXT)
    # rag-001 answers in two claims, rag-002 in one; none is judged, none counts as unsupported.
    assert [
        (
            t,
            r["n_claims"],
            r["n_supported"],
            r["n_not_in_evidence"],
            r["n_incomplete"],
            r["grounding_rate"],
            r["status"],
            r["reason"],
            r["grounding_stage"],
            r["grounding_reason"],
        )
        for t, r in sorted(grounding.items())
    ] == [
        (NO_CONTEXT, 2, 0, 0, 2, None, "incomplete", "no_context_logged", "incomplete", "no_context_logged"),
        (EMPTY_CONTEXT, 1, 0, 0, 1, None, "incomplete", "no_context_logged", "incomplete", "no_context_logged"),
    ]
    citations = _rows(warehouse.read("citation_scores", "base-41"), NO_CONTEXT, EMPTY_CONTEXT)
    for row in citations.values():
        assert (
            row["citation_precision"],
            row["citation_recall"],
            row["citation_resolution_rate"],
            row["quotes_found_rate"],
            row["n_dead_citations"],
            row["status"],
            row["citation_stage"],
            row["citation_reason"],
        ) == (None, None, None, None, None, "incomplete", "incomplete", "no_context_logged")
    claims = (
        warehouse.read("claims", "base-41")
        .filter(pl.col("trace_id").is_in([NO_CONTEXT, EMPTY_CONTEXT]))
        .sort("trace_id", "claim_index")
    )
    assert claims.select("trace_id", "claim_index", "verdict", "status", "reason", "citation_verdict").rows() == [
        (NO_CONTEXT, 0, None, "incomplete", "no_context_logged", None),
        (NO_CONTEXT, 1, None, "incomplete", "no_context_logged", None),
        (EMPTY_CONTEXT, 0, None, "incomplete", "no_context_logged", None),
    ]
    # No judge call was made for them: nothing judged was stored for their claims.
    assert claims["cached"].to_list() == [None, None, None]


def test_stage_results_and_attribution_follow_the_incomplete_path(edited_run):
    warehouse = edited_run["warehouse"]
    stages = warehouse.read("stage_results", "base-41").filter(pl.col("trace_id").is_in([NO_CONTEXT, EMPTY_CONTEXT]))
    assert stages.filter(pl.col("stage").is_in(["context_assembly", "grounding", "citation"])).sort(
        "trace_id", "stage_order"
    ).select("trace_id", "stage", "status", "reason").rows() == [
        (NO_CONTEXT, "context_assembly", "incomplete", "context not logged: the trace has no context field"),
        (NO_CONTEXT, "grounding", "incomplete", "no_context_logged"),
        (NO_CONTEXT, "citation", "incomplete", "no_context_logged"),
        (
            EMPTY_CONTEXT,
            "context_assembly",
            "fail",
            "relevant docs in the top 10 never reached the context: policy/refunds-2025",
        ),
        (EMPTY_CONTEXT, "grounding", "incomplete", "no_context_logged"),
        (EMPTY_CONTEXT, "citation", "incomplete", "no_context_logged"),
    ]
    attribution = _rows(warehouse.read("attribution", "base-41"), NO_CONTEXT, EMPTY_CONTEXT)
    # Without a context field the lane is incomplete (the harness's); an empty context is the context stage's failure.
    assert (
        attribution[NO_CONTEXT]["outcome"],
        attribution[NO_CONTEXT]["first_failing_stage"],
        attribution[NO_CONTEXT]["owner"],
    ) == ("incomplete", None, HARNESS_OWNER)
    assert (attribution[EMPTY_CONTEXT]["outcome"], attribution[EMPTY_CONTEXT]["first_failing_stage"]) == (
        "fail",
        "context_assembly",
    )


def test_the_report_counts_them_incomplete_and_leaves_them_out_of_the_mean(edited_run):
    grounding = edited_run["warehouse"].read("grounding_scores", "base-41")
    scored = grounding.filter(pl.col("status") == "scored")
    markdown = (edited_run["reports"] / "rag.md").read_text()
    assert f"- grounding rate {scored['grounding_rate'].mean():.4f} (supported claims / claims, per trace)" in markdown
    incomplete = grounding.filter(pl.col("grounding_stage") == "incomplete")
    assert incomplete.height == 2 and grounding.height == 61
    assert "- incomplete grounding: 2 of 61 traces, left out of the means (no_context_logged: 2)" in markdown
    assert "- incomplete citation: 2 of 61 traces, left out of the means (no_context_logged: 2)" in markdown
    assert (
        f"| {NO_CONTEXT} | [rag-001](cases/rag-001.html) | {HARNESS_OWNER} | "
        "context_assembly incomplete: context not logged: the trace has no context field |" in markdown
    )


def test_html_planted_in_an_answer_is_escaped_in_both_reports(edited_run):
    claims = edited_run["warehouse"].read("claims", "base-41").filter(pl.col("trace_id") == PLANTED_HTML)
    assert claims.select("claim_index", "claim", "verdict").rows()[-1] == (
        1,
        PLANTED_CLAIM,
        "NOT_IN_EVIDENCE",
    )  # in the tables as text
    escaped = "Also &lt;script&gt;alert(1)&lt;/script&gt; is set."
    for name in ("rag.md", "rag.html"):
        text = (edited_run["reports"] / name).read_text()
        assert "<script" not in text, name
        # the grounding failure names the claim, in the failed-traces table of both reports
        assert f"claim 1 NOT_IN_EVIDENCE: {escaped}" in text, name
