"""Evidence diversity (docs/evidence_diversity.md): families and sources of the context and the citations, claims
supported by more than one independent family, and the report section — every number computed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from eval_pipeline.io import inputs
from eval_pipeline.io.storage import open_location
from eval_pipeline.judge import make_judge
from eval_pipeline.judge.base import Judge
from eval_pipeline.judge.reuse import ReusingJudge
from eval_pipeline.reporting.lane_data import LaneData
from eval_pipeline.reporting.lane_rag import rag_sections
from eval_pipeline.scoring import attribution
from eval_pipeline.scoring.citations import claims_and_citations
from eval_pipeline.scoring.context import score_context
from eval_pipeline.scoring.grounding import score_grounding
from eval_pipeline.scoring.retrieval import score_retrieval
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.records import cases_frame_from_records, corpus_frame_from_records, traces_frame_from_records

REPO_ROOT = Path(__file__).resolve().parents[2]
WINDOW = "Annual SMB plans have a 14 day refund window."
POLICY_2025 = f"{WINDOW} Monthly plans are not refundable."
POLICY_2024 = "Refund policy, 2024 edition. Annual plans can be refunded within 30 days."
KB = f"{WINDOW} The refund goes back to the card."
NOTES = "Processing takes 5 business days."
# family A (policy/refunds, two versions, policy-portal), family B (kb/refunds, helpcenter), billing/faq (no family,
# no source: its own family); notes/billing is in no corpus at all: its own family, no source
CORPUS = [
    {"doc_id": "policy/refunds-2025", "family": "policy/refunds", "source": "policy-portal", "text": POLICY_2025},
    {"doc_id": "policy/refunds-2024", "family": "policy/refunds", "source": "policy-portal", "text": POLICY_2024},
    {"doc_id": "kb/refund-window", "family": "kb/refunds", "source": "helpcenter", "text": KB},
    {"doc_id": "billing/faq", "text": NOTES},
]
MIXED = [
    {"doc_id": "policy/refunds-2025", "text": POLICY_2025, "tokens": 10},
    {"doc_id": "policy/refunds-2024", "text": POLICY_2024, "tokens": 10},
    {"doc_id": "kb/refund-window", "text": KB, "tokens": 10},
    {"doc_id": "notes/billing", "text": NOTES, "tokens": 10},
]
# claim 0 is in families A and B, claim 1 only in notes/billing, claim 2 contradicts A (30 days, not refundable)
ANSWER = (
    f"{WINDOW} [doc:policy/refunds-2025] [doc:kb/refund-window] {NOTES[:-1]} [doc:notes/billing]. "
    "Monthly plans can be refunded within 30 days [doc:dead/doc]."
)


class Counting(Judge):
    """The local judge, counting the requests it is asked (after the shared de-duplication by request key); with
    `bound`, it also rules requests out as the local judge does, else it knows no bound."""

    def __init__(self, bound: bool = False) -> None:
        self.inner = make_judge("local")
        self.version, self.model, self.asked, self.bound = self.inner.version, self.inner.model, [], bound

    def could_support(self, requests: pl.DataFrame) -> pl.DataFrame:
        return self.inner.could_support(requests) if self.bound else super().could_support(requests)

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        self.asked.append(requests.height)
        return self.inner._judge_claims(requests)

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        return self.inner._judge_pairs(requests)


class Down(Judge):
    """A judge whose every call fails."""

    version, model = "down-1", "down"

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        return requests.select("request_key", status=pl.lit("incomplete"), reason=pl.lit("provider down"))

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        return requests.select("request_key", status=pl.lit("incomplete"), reason=pl.lit("provider down"))


def _rows(frame: pl.DataFrame, *columns: str) -> dict[str, tuple]:
    return {r["trace_id"]: tuple(r[c] for c in columns) for r in frame.to_dicts()}


# ---------------------------------------------------------------- context


@pytest.fixture
def context_inputs(rag):
    cases = [rag.case("c1", ["policy/refunds-2025"])]
    top = [rag.round("q", ["policy/refunds-2025"])]
    faq = {"doc_id": "billing/faq", "text": NOTES, "tokens": 5}
    traces = [
        rag.trace("mixed", "c1", top, context=MIXED),
        rag.trace("one-page", "c1", top, context=[faq, faq]),
        rag.trace("empty", "c1", top, context=[]),
        rag.trace("unlogged", "c1", top),
        rag.trace("harness", "c1", top, status="timeout", context=MIXED),
    ]
    cases_frame, traces_frame, _, qrels = rag.frames(cases, traces)
    corpus = corpus_frame_from_records(CORPUS)
    retrieval = score_retrieval(traces_frame, cases_frame, qrels, corpus, ScoringSettings())
    return traces_frame, cases_frame, qrels, retrieval, corpus


def test_context_counts_families_sources_and_redundant_chunks(context_inputs):
    traces, cases, qrels, retrieval, corpus = context_inputs
    scores = score_context(traces, cases, qrels, retrieval, ScoringSettings(), corpus=corpus)
    assert scores.schema["context_families"] == pl.Int64 and scores.schema["context_sources"] == pl.Int64
    assert scores.schema["redundant_chunk_share"] == pl.Float64
    assert _rows(scores, "context_families", "context_sources", "redundant_chunk_share") == {
        # A, A, B, notes/billing: 3 families, (4 − 3) / 4 redundant; sources policy-portal and helpcenter
        "mixed": (3, 2, 0.25),
        # two chunks of one doc without a family or source: 1 family, (2 − 1) / 2, no source named
        "one-page": (1, None, 0.5),
        # logged and empty: no family, no chunk to be redundant
        "empty": (0, None, None),
        "unlogged": (None, None, None),
        "harness": (None, None, None),
    }
    assert _rows(scores, "status")["unlogged"] == ("incomplete",)


def test_without_a_corpus_every_doc_is_its_own_family(context_inputs):
    traces, cases, qrels, retrieval, _ = context_inputs
    scores = score_context(traces, cases, qrels, retrieval, ScoringSettings())
    assert _rows(scores, "context_families", "context_sources", "redundant_chunk_share")["mixed"] == (4, None, 0.0)


# ---------------------------------------------------------------- citations and claims


@pytest.fixture
def rag_case():
    return cases_frame_from_records(
        [{"case_id": "c1", "lanes": ["rag"], "input": "q", "required_doc_ids": ["policy/refunds-2025"]}]
    )


def _traces() -> pl.DataFrame:
    return traces_frame_from_records(
        [
            {
                "trace_id": "t1",
                "case_id": "c1",
                "context": MIXED,
                "answer": {"text": ANSWER, "citations": [{"doc_id": "policy/refunds-2024", "claim_index": 0}]},
            },
            # the same answer over the same context: its (claim, family text) pairs are asked once for both
            {"trace_id": "t1-again", "case_id": "c1", "context": MIXED, "answer": {"text": ANSWER}},
            {
                "trace_id": "one-family",
                "case_id": "c1",
                "context": MIXED[:2],
                "answer": {"text": f"{WINDOW} [doc:policy/refunds-2025] [doc:policy/refunds-2024]"},
            },
            {
                "trace_id": "no-source",
                "case_id": "c1",
                "context": [{"doc_id": "notes/billing", "text": NOTES}],
                "answer": {"text": f"{NOTES} [doc:notes/billing] [doc:billing/faq]"},
            },
            {"trace_id": "uncited", "case_id": "c1", "context": MIXED, "answer": {"text": WINDOW}},
            {"trace_id": "blind", "case_id": "c1", "answer": {"text": f"{WINDOW} [doc:kb/refund-window]"}},
        ]
    )


def test_citations_count_the_families_and_sources_of_the_existing_cited_docs(rag_case):
    _, scores = claims_and_citations(
        _traces(), corpus_frame_from_records(CORPUS), rag_case, make_judge("local"), ScoringSettings()
    )
    assert _rows(scores, "cited_families", "cited_sources") == {
        # cited: policy/refunds-2025 and -2024 (family A, one family), kb/refund-window (B), notes/billing (in the
        # context only: its own family); dead/doc exists nowhere and draws on nothing; sources policy-portal, helpcenter
        "t1": (3, 2),
        "t1-again": (3, 2),
        "one-family": (1, 1),
        # notes/billing and billing/faq: two families, neither names a source
        "no-source": (2, None),
        # nothing cited (citations not required): not applicable
        "uncited": (None, None),
        # no context logged: the citation stage is incomplete
        "blind": (None, None),
    }


def test_a_claim_two_families_support_is_triangulated_and_one_family_is_not(rag_case):
    family_judge = Counting()
    claims, _ = claims_and_citations(
        _traces(),
        corpus_frame_from_records(CORPUS),
        rag_case,
        make_judge("local"),
        ScoringSettings(),
        family_judge=family_judge,
    )
    got = {
        (r["trace_id"], r["claim_index"]): (r["verdict"], r["supporting_families"], r["triangulated"])
        for r in claims.to_dicts()
    }
    assert got == {
        # A holds the verified quote (no call); B is asked and supports it; notes/billing is asked and does not
        ("t1", 0): ("SUPPORTED", 2, True),
        # notes/billing holds the quote; A and B are asked and do not support it
        ("t1", 1): ("SUPPORTED", 1, False),
        ("t1", 2): ("CONTRADICTED", 0, False),
        ("t1-again", 0): ("SUPPORTED", 2, True),
        ("t1-again", 1): ("SUPPORTED", 1, False),
        ("t1-again", 2): ("CONTRADICTED", 0, False),
        # two versions of one family are one source: no call, 1
        ("one-family", 0): ("SUPPORTED", 1, False),
        ("no-source", 0): ("SUPPORTED", 1, False),
        ("uncited", 0): ("SUPPORTED", 2, True),
        # no context logged: the claim is incomplete, and so is its count
        ("blind", 0): (None, None, None),
    }
    # distinct (claim, family text) pairs: claim 0 × {B, notes/billing} and claim 1 × {A, B}; t1-again and uncited
    # repeat them, one-family and no-source need none
    assert family_judge.asked == [4]
    assert claims.schema["supporting_families"] == pl.Int64 and claims.schema["triangulated"] == pl.Boolean


def test_the_local_judge_rules_out_without_a_call_what_it_could_never_find_supported(rag_case):
    corpus, settings = corpus_frame_from_records(CORPUS), ScoringSettings()
    unbounded, bounded = Counting(), Counting(bound=True)
    every, _ = claims_and_citations(_traces(), corpus, rag_case, make_judge("local"), settings, family_judge=unbounded)
    pruned, _ = claims_and_citations(_traces(), corpus, rag_case, make_judge("local"), settings, family_judge=bounded)
    assert pruned["supporting_families"].to_list() == every["supporting_families"].to_list()
    # of the 4 pairs only (claim 0, B) can reach the support threshold: claim 0 shares no word with the notes, and
    # claim 1's "5" and most of its words are in neither A nor B
    assert (unbounded.asked, bounded.asked) == ([4], [1])
    local = make_judge("local")
    requests = pl.DataFrame(
        {
            "request_key": ["c0-B", "c0-notes", "c1-A", "c1-notes"],
            "claim": [WINDOW, WINDOW, NOTES, NOTES],
            "evidence": [
                [{"doc_id": "kb/refund-window", "text": KB}],
                [{"doc_id": "notes/billing", "text": NOTES}],
                [
                    {"doc_id": "policy/refunds-2025", "text": POLICY_2025},
                    {"doc_id": "policy/refunds-2024", "text": POLICY_2024},
                ],
                [{"doc_id": "notes/billing", "text": NOTES}],
            ],
        }
    )
    bound = dict(local.could_support(requests).iter_rows())
    verdicts = dict(local.judge_claims(requests).select("request_key", "verdict").iter_rows())
    assert bound == {"c0-B": True, "c0-notes": False, "c1-A": False, "c1-notes": True}
    assert verdicts == {
        "c0-B": "SUPPORTED",
        "c0-notes": "NOT_IN_EVIDENCE",
        "c1-A": "NOT_IN_EVIDENCE",
        "c1-notes": "SUPPORTED",
    }


def test_a_family_decision_that_cannot_complete_leaves_the_count_unknown(rag_case):
    claims, _ = claims_and_citations(
        _traces(),
        corpus_frame_from_records(CORPUS),
        rag_case,
        make_judge("local"),
        ScoringSettings(),
        family_judge=Down(),
    )
    got = {(r["trace_id"], r["claim_index"]): (r["supporting_families"], r["triangulated"]) for r in claims.to_dicts()}
    assert (got[("t1", 0)], got[("t1", 2)], got[("one-family", 0)]) == ((None, None), (0, False), (1, False))
    # a supported claim of unknown count makes the trace's triangulated count unknown, never a 0
    scores = score_grounding(claims, _traces(), rag_case, ScoringSettings())
    assert (_rows(scores, "n_triangulated")["t1"], _rows(scores, "n_triangulated")["one-family"]) == ((None,), (0,))


def test_an_unchanged_rerun_reuses_every_family_verdict(rag_case):
    corpus, settings = corpus_frame_from_records(CORPUS), ScoringSettings()
    first_inner, again_inner = Counting(), Counting()
    first = ReusingJudge(first_inner)
    claims, _ = claims_and_citations(_traces(), corpus, rag_case, make_judge("local"), settings, family_judge=first)
    assert (first.judged, first_inner.asked) == (4, [4])
    stored = first.used().with_columns(run_id=pl.lit("run-a"))
    again = ReusingJudge(again_inner, stored.lazy())
    rerun, _ = claims_and_citations(_traces(), corpus, rag_case, make_judge("local"), settings, family_judge=again)
    assert (again.judged, again.reused, again_inner.asked) == (0, 4, [])
    assert rerun["supporting_families"].to_list() == claims["supporting_families"].to_list()


def test_grounding_counts_the_triangulated_supported_claims(rag_case):
    traces = _traces()
    claims, _ = claims_and_citations(
        traces, corpus_frame_from_records(CORPUS), rag_case, make_judge("local"), ScoringSettings()
    )
    scores = score_grounding(claims, traces, rag_case, ScoringSettings())
    assert _rows(scores, "n_supported", "n_triangulated") == {
        "t1": (2, 1),
        "t1-again": (2, 1),
        "one-family": (1, 0),
        "no-source": (1, 0),
        "uncited": (1, 1),
        # the blind trace's one claim is incomplete, not supported: none of its supported claims is triangulated
        "blind": (0, 0),
    }


# ---------------------------------------------------------------- inputs


def test_the_corpus_loader_carries_the_source_and_the_sample_names_one_for_every_document(tmp_path):
    folder = tmp_path / "corpus" / "v1"
    folder.mkdir(parents=True)
    folder.joinpath("docs.jsonl").write_text(
        json.dumps({"doc_id": "a", "family": "fa", "source": "zendesk"}) + "\n" + json.dumps({"doc_id": "b"}) + "\n"
    )
    loaded = inputs.load_corpus(open_location(tmp_path), "v1")
    assert loaded.rejects == [] and loaded.frame.select("doc_id", "source").rows() == [("a", "zendesk"), ("b", None)]
    lines = (REPO_ROOT / "data" / "corpus" / "kb-2026-03" / "docs.jsonl").read_text().splitlines()
    sources = pl.DataFrame([json.loads(line) for line in lines])["source"].value_counts().sort("source").rows()
    assert sources == [("engineering-wiki", 6), ("helpcenter", 8), ("policy-portal", 25)]


# ---------------------------------------------------------------- report


def _lane(tables: dict[str, pl.DataFrame]) -> LaneData:
    stages = attribution.stage_results("rag", [])
    outcomes = attribution.lane_outcomes(stages)
    return LaneData(
        lane="rag",
        run_id="r",
        manifest={},
        stage_results=stages,
        outcomes=outcomes,
        rollup=attribution.rollup(outcomes, "rag"),
        tables=tables,
    )


def test_the_rag_report_plots_evidence_diversity():
    context = pl.DataFrame(
        {
            "trace_id": ["t1", "t2", "t3", "t4"],
            "status": ["scored", "scored", "scored", "incomplete"],
            "context_families": [3, 1, 1, None],
            "context_sources": [2, None, 1, None],
            "redundant_chunk_share": [0.25, 0.5, 0.0, None],
        }
    )
    citations = pl.DataFrame(
        {
            "trace_id": ["t1", "t2", "t3"],
            "status": ["scored", "scored", "not_applicable"],
            "cited_families": [2, 1, None],
            "cited_sources": [2, None, None],
        }
    )
    grounding = pl.DataFrame(
        {
            "trace_id": ["t1", "t2", "t3"],
            "status": ["scored", "scored", "incomplete"],
            "n_supported": [2, 2, 1],
            "n_triangulated": [1, 0, None],
        }
    )
    sections = rag_sections(
        _lane({"context_scores": context, "citation_scores": citations, "grounding_scores": grounding})
    )
    titles = [s.title for s in sections]
    at = titles.index("Evidence diversity")
    assert titles[at - 1] == "Citations" and titles[at + 1 : at + 4] == [
        "Redundant chunks",
        "Cited families",
        "Triangulated claims",
    ]
    section = sections[at]
    assert section.lines == [
        # (3 + 1 + 1) / 3 over the three scored traces; t2 and t3 draw on one family
        "- context families per trace: mean 1.67 over 3 scored traces; 2 draw on a single family "
        "(ten chunks of one page are one source)",
        "- redundant-chunk share (chunks of a family beyond its first / chunks): mean 0.2500",
        "- cited families per citing trace: mean 1.50 over 2 traces; 1 cite a single family",
        # 1 of the 4 supported claims of the two scored grounding rows
        "- supported claims triangulated (two or more independent families support them): 1 of 4 (0.2500)",
    ]
    assert section.table.rows() == [
        ("context_families", pytest.approx(5 / 3), 3),
        ("context_sources", 1.5, 2),
        ("redundant_chunk_share", 0.25, 3),
        ("cited_families", 1.5, 2),
        ("cited_sources", 2.0, 1),
        ("n_triangulated", 0.5, 2),
    ]
    # bars: 2 traces with one family, 1 with three
    assert "<title>1: 2</title>" in section.chart and "<title>3: 1</title>" in section.chart
    redundant = sections[at + 1].chart
    assert (
        "<title>0: 1</title>" in redundant
        and "<title>≤ 0.25: 1</title>" in redundant
        and "<title>≤ 0.5: 1</title>" in redundant
    )
    assert "<title>triangulated (≥ 2 families): 1</title>" in sections[at + 3].chart


def test_the_section_is_left_out_when_the_tables_have_no_diversity_columns():
    context = pl.DataFrame({"trace_id": ["t1"], "status": ["scored"], "context_recall": [1.0]})
    assert "Evidence diversity" not in [s.title for s in rag_sections(_lane({"context_scores": context}))]
