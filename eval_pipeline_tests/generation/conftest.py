"""Fixtures of the generation tests: a small refund-policy context, rag cases, and the loopback judge server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.contracts.frames import cases_frame_from_records
from eval_pipeline_harness.loopback_server import LoopbackServer

REFUNDS = "Annual SMB plans have a 14 day refund window. Monthly plans are not refundable."
BILLING = "Refunds are issued to the original payment method. Processing takes 5 business days."
PRICING = "The Pro plan costs $49.00 per month. Enterprise contracts are negotiated individually."

CONTEXT = [
    {"doc_id": "policy/refunds-2025", "text": REFUNDS, "tokens": 20},
    {"doc_id": "billing/faq", "text": BILLING, "tokens": 18},
]
CORPUS = [
    {"doc_id": "policy/refunds-2025", "family": "policy/refunds", "version": "2025", "text": REFUNDS},
    {"doc_id": "billing/faq", "text": BILLING},
    {"doc_id": "pricing/plans", "text": PRICING},
]


@pytest.fixture()
def rag_cases():
    """Case c1 (rag, expects '14 days'), c-refusal (rag, expects a refusal) and c-agent (agent only)."""
    return cases_frame_from_records(
        [
            {"case_id": "c1", "lanes": ["rag"], "input": "How long is the refund window for annual SMB plans?",
             "required_doc_ids": ["policy/refunds-2025"],
             "expected_answer_contains": ["14 days"], "reference_answer": "Annual SMB plans have a 14 day refund window."},
            {"case_id": "c-refusal", "lanes": ["rag"], "input": "Do you refund enterprise plans?", "expect_refusal": True},
            {"case_id": "c-agent", "lanes": ["agent"], "input": "Refund order 88131."},
        ]
    )


@pytest.fixture()
def loopback() -> Iterator[LoopbackServer]:
    """A running loopback OpenAI-compatible server (canned NOT_IN_EVIDENCE unless a test sets a responder)."""
    with LoopbackServer() as server:
        yield server


@pytest.fixture()
def judge_key(monkeypatch) -> str:
    """Name of an environment variable holding a dummy API key for the loopback server."""
    monkeypatch.setenv("LOOPBACK_JUDGE_KEY", "sk-loopback")
    return "LOOPBACK_JUDGE_KEY"


@pytest.fixture(scope="session")
def ragchecker_outputs() -> Path:
    """RAGChecker's checking_outputs.json: the repository's reference copy, else ../shared/data beside the checkout."""
    repo = Path(__file__).resolve().parents[2]
    for folder in (repo / "eval_pipeline_tests" / "reference_data", repo.parent / "shared" / "data"):
        path = folder / "ragchecker" / "checking_outputs.json"
        if path.is_file():
            return path
    pytest.skip(f"RAGChecker reference data not found under {repo / 'eval_pipeline_tests/reference_data'} or {repo.parent / 'shared/data'}")


@pytest.fixture()
def context() -> list[dict]:
    """The context chunks the answers were given: the refunds policy and the billing FAQ."""
    return [dict(chunk) for chunk in CONTEXT]


@pytest.fixture()
def corpus():
    """The corpus manifest: the two context docs plus pricing/plans."""
    from eval_pipeline.contracts.frames import corpus_frame_from_records

    return corpus_frame_from_records(CORPUS)
