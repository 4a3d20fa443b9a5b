"""The OpenAI judge's prompts, by version, and the JSON schemas its replies must follow (no `openai` import)."""

from __future__ import annotations

from typing import Any

from eval_pipeline.judge.base import PREFERENCES, VERDICTS

CLAIM_PROMPT_VERSION = "grounding-claim-v1"
PAIR_PROMPT_VERSION = "pairwise-v1"

SYSTEM_PROMPTS: dict[str, str] = {
    "grounding-claim-v1": (
        "You check whether one claim is supported by evidence. The EVIDENCE is the only source of truth: ignore what "
        "you know. The user message is JSON with `claim` and `evidence` (a list of {doc_id, text}).\n"
        "verdict: SUPPORTED when the evidence states the claim; CONTRADICTED when the evidence states something "
        "incompatible with it (another number, date, amount, duration, name or plan, or the negation); "
        "NOT_IN_EVIDENCE otherwise.\n"
        "evidence_quote: the one evidence sentence you relied on, copied verbatim; null only when no sentence is "
        "relevant. evidence_doc_id: the doc_id of that sentence, or null.\n"
        'Reply with JSON only: {"claim": "...", "verdict": "...", "evidence_quote": "...", "evidence_doc_id": "..."}'
    ),
    "pairwise-v1": (
        "You compare two answers to the same question. The user message is JSON with `question`, `evidence` (a list "
        "of {doc_id, text}), `answer_a` and `answer_b`. Prefer the answer whose statements are supported by the "
        "evidence and that answers the question; an unsupported or contradicted statement counts against an answer; "
        "length and style do not count. Say tie when neither is better.\n"
        'Reply with JSON only: {"preference": "A" | "B" | "tie", "reason": "one sentence"}'
    ),
}

CLAIM_SCHEMA: dict[str, Any] = {
    "name": "claim_verdict",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {
            "claim": {"type": "string"},
            "verdict": {"type": "string", "enum": list(VERDICTS)},
            "evidence_quote": {"type": ["string", "null"]},
            "evidence_doc_id": {"type": ["string", "null"]},
        },
        "required": ["claim", "verdict", "evidence_quote", "evidence_doc_id"],
        "additionalProperties": False,
    },
}

PAIR_SCHEMA: dict[str, Any] = {
    "name": "pairwise_preference",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"preference": {"type": "string", "enum": list(PREFERENCES)}, "reason": {"type": "string"}},
        "required": ["preference", "reason"],
        "additionalProperties": False,
    },
}
