"""Records with planted personal data of every type, shaped exactly like SPEC §2 cases, traces and corpus lines."""

from __future__ import annotations

import pytest

EMAIL = "jane.doe@example.com"
EMAIL_UPPER = "Jane.Doe@Example.com"
PHONE = "+1 415-555-0132"
PHONE_LOCAL = "(415) 555-0132"
CARD = "4111 1111 1111 1111"
CARD_BAD_LUHN = "4111 1111 1111 1112"
IBAN = "GB82 WEST 1234 5698 7654 32"
IBAN_BAD = "GB83 WEST 1234 5698 7654 32"
SSN = "078-05-1120"
NINO = "AB 12 34 56 C"
IPV4 = "203.0.113.77"
IPV6 = "2001:db8:85a3::8a2e:370:7334"
OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w"
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
GITHUB_TOKEN = "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB"
SLACK_TOKEN = "xoxb-123456789012-abcdefABCDEF"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
BEARER = "9f8e7d6c5b4a39281706aBcD"
PASSWORD = "hunter2-Secret"
CRED_URL = "https://admin:s3cretPass@api.example.com/refunds"
TOKEN_URL = "https://files.example.com/report.pdf?token=abc123XYZ789"
FULL_NAME = "Mia Li"

# Every planted raw value; none may survive de-identification anywhere.
PLANTED = (
    EMAIL, EMAIL_UPPER, PHONE, PHONE_LOCAL, CARD, IBAN, SSN, NINO, IPV4, IPV6, OPENAI_KEY, AWS_KEY, GITHUB_TOKEN,
    SLACK_TOKEN, JWT, BEARER, PASSWORD, CRED_URL, TOKEN_URL, FULL_NAME,
)  # fmt: skip
# Ordinary identifiers and near-misses; every one must survive unchanged.
DECOYS = (
    "88131",
    "SKU-88-B",
    "ERR-4412",
    "2026-03-01",
    "policy/refunds-2025",
    CARD_BAD_LUHN,
    IBAN_BAD,
    "Lisbon",
    "c-771",
)


def case_record() -> dict:
    """An agent case whose fixtures hold the customer record and whose reference calls carry personal data."""
    return {
        "case_id": "agent-0042",
        "case_revision": 2,
        "lanes": ["agent", "rag"],
        "input": f"Refund order 88131 for {EMAIL}; she called from {PHONE_LOCAL}.",
        "reference_answer": f"Refund for {FULL_NAME} sent to {EMAIL}.",
        "expected_answer_contains": [EMAIL, "14 days"],
        "required_doc_ids": ["policy/refunds-2025"],
        "allowed_tools": ["get_order", "issue_refund", "send_email"],
        "reference_tool_calls": [
            {"name": "get_order", "args": {"order_id": "88131"}},
            {"name": "send_email", "args": {"to": EMAIL, "body": f"Dear {FULL_NAME}, card {CARD} refunded."}},
        ],
        "alternatives": [[{"name": "send_email", "args": {"to": EMAIL, "sms": PHONE}}]],
        "fixtures": {
            "customers": {
                "c-771": {
                    "full_name": FULL_NAME,
                    "email": EMAIL,
                    "phone": PHONE,
                    "ssn": SSN,
                    "iban": IBAN,
                    "office": "Lisbon",
                }
            },
            "orders": {"88131": {"sku": "SKU-88-B", "amount": 49.0, "date": "2026-03-01"}},
        },
        "milestones": {
            "customer_notified": {"path": "notifications.c-771.to", "equals": EMAIL},
            "refund_correct": {"path": "refunds.R-552.amount", "equals": 49.0},
        },
        "scope": {"customer_email": EMAIL},
    }


def trace_record(attempt: int) -> dict:
    """One attempt of the case: personal data in input, retrieval, context, answer, citations, every step field."""
    return {
        "trace_id": f"cand-12:agent-0042#{attempt}",
        "case_id": "agent-0042",
        "case_revision": 2,
        "attempt": attempt,
        "status": "ok",
        "error": None,
        "input": f"Refund order 88131 for {EMAIL}; she called from {PHONE_LOCAL}.",
        "retrieval": [
            {
                "round": 1,
                "tool": "search_docs",
                "variant": "dense-v3",
                "query": f"refund {EMAIL} {PHONE}",
                "candidates": [{"doc_id": "policy/refunds-2025", "score": 0.8}],
                "hits": [{"doc_id": "policy/refunds-2025", "score": 0.9}],
            }
        ],
        "context": [
            {
                "doc_id": "policy/refunds-2025",
                "text": f"Refunds within 14 days to IBAN {IBAN}. Lisbon office.",
                "tokens": 20,
            }
        ],
        "answer": {
            "text": f"Hi Mia, refund of 49.00 for order 88131 goes to {EMAIL} [doc:policy/refunds-2025].",
            "citations": [{"doc_id": "policy/refunds-2025", "quote": f"Refunds within 14 days to IBAN {IBAN}."}],
        },
        "steps": [
            {
                "index": 1,
                "kind": "tool_call",
                "tool": "get_order",
                "args": {"order_id": "88131"},
                "status": "ok",
                "result": {
                    "customer": {"first_name": "Mia", "last_name": "Li", "email": EMAIL_UPPER, "nino": NINO},
                    "card": CARD,
                    "declined_card": CARD_BAD_LUHN,
                    "old_iban": IBAN_BAD,
                    "login_ips": [IPV4, IPV6],
                    "error_code": "ERR-4412",
                },
                "dispatched": {"tool": "get_order", "args": {"order_id": "88131"}},
            },
            {
                "index": 2,
                "kind": "tool_call",
                "tool": "send_email",
                "args": {"to": EMAIL, "body": f"Dear {FULL_NAME}, card {CARD} refunded."},
                "status": "error",
                "error": f"POST {CRED_URL} failed: Authorization: Bearer {BEARER} rejected",
                "result": {"keys": [OPENAI_KEY, AWS_KEY], "session": JWT},
                "state_diff": [{"path": "notifications.c-771.to", "before": None, "after": EMAIL}],
                "dispatched": {
                    "tool": "send_email",
                    "args": {"to": EMAIL, "body": f"Dear {FULL_NAME}, card {CARD} refunded."},
                },
            },
            {
                "index": 3,
                "kind": "finish",
                "content": f"Done, Mia. Logs: {TOKEN_URL} password={PASSWORD} {GITHUB_TOKEN} {SLACK_TOKEN} SSN {SSN}",
            },
        ],
        "final_state": {
            "notifications": {"c-771": {"to": EMAIL, "sent": True}},
            "refunds": {"R-552": {"amount": 49.0}},
        },
        "usage": {"input_tokens": 1900, "output_tokens": 120, "cost_usd": 0.0042, "latency_ms": 2300},
    }


def corpus_records() -> list[dict]:
    """Two corpus documents, one quoting the customer's IBAN and name, one clean."""
    return [
        {
            "doc_id": "policy/refunds-2025",
            "family": "policy/refunds",
            "version": "2025",
            "text": f"Refunds within 14 days to IBAN {IBAN}. Lisbon office.",
        },
        {"doc_id": "faq/contact", "text": f"Escalations: Mia Li, {PHONE}."},
    ]


@pytest.fixture
def planted_frames():
    """(traces, cases, corpus) frames built with the canonical builders from the planted records."""
    from eval_pipeline_harness.records import (
        cases_frame_from_records,
        corpus_frame_from_records,
        traces_frame_from_records,
    )

    traces = traces_frame_from_records([trace_record(1), trace_record(2)], run_id="cand-12")
    cases = cases_frame_from_records([case_record()], dataset_version="ds-1")
    corpus = corpus_frame_from_records(corpus_records(), corpus_version="c-1")
    return traces, cases, corpus


@pytest.fixture
def pii():
    """The planted constants of this module (EMAIL, CARD, PLANTED, DECOYS, ...) as attributes."""
    import types

    return types.SimpleNamespace(**{k: v for k, v in globals().items() if k.isupper()})
