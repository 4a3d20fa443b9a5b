"""What a case story holds: one case of one run, its attempts, and what each lane saw and decided in them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

TEXT_PREVIEW = 160

# The case's reliability columns compared with the baseline (with its pass^k columns, `pass_hat_columns`).
CASE_METRICS = ("n_attempts", "n_complete", "n_success", "pass_at_1", "flaky")
PASS_HAT = re.compile(r"pass_hat_\d+")


@dataclass
class RagView:
    """What the RAG lane saw and decided in one attempt."""

    retrieval: dict | None
    queries: list[str]
    ranked: pl.DataFrame  # rank, doc_id, score, round, variant, grade, relevant, in_context
    missed: pl.DataFrame  # doc_id, grade, source, candidate_rank: relevant docs not in the ranked list
    context: pl.DataFrame  # chunk, doc_id, tokens, relevant, text
    context_scores: dict | None
    # claim_index (0-based, as stage reasons name claims), verdict, score, text, evidence, quote ...
    claims: pl.DataFrame
    logged_citations: pl.DataFrame  # doc_id, quote, claim_index as logged by the assistant
    grounding: dict | None
    citations: dict | None
    answer: dict | None


@dataclass
class AgentView:
    """The tool calls of one attempt against the reference, and the verified world state."""

    tools: dict | None
    calls: pl.DataFrame  # position, match, actual_call, expected_call, actual_status, matched_path
    argument_diffs: pl.DataFrame  # position, tool, field, expected, actual (JSON text)
    step_errors: pl.DataFrame  # step, tool, status, error
    outcome: dict | None
    milestones: pl.DataFrame  # name, path, op, expected, actual, passed


@dataclass
class Attempt:
    """One trace of the case: harness status, per-lane outcome, every stage, and the lanes' views."""

    trace_id: str
    attempt: int | None
    harness_status: str | None
    harness_error: str | None
    answer_text: str | None
    outcomes: pl.DataFrame  # lane, outcome, first_failing_stage, owner, reason, hazard
    stages: pl.DataFrame  # lane, stage, stage_order, status, reason
    metrics: dict[str, object]
    rag: RagView | None = None
    agent: AgentView | None = None


@dataclass
class CaseStory:
    """One case of one run end to end."""

    run_id: str
    case_id: str
    manifest: dict | None
    case: dict | None
    attempts: list[Attempt]
    focus: str | None = None
    reliability: list[dict] = field(default_factory=list)
    quarantine: list[dict] = field(default_factory=list)
    gates: list[dict] = field(default_factory=list)  # gate, role (blocks / excluded), status, owner, reason, ...
    review: pl.DataFrame | None = None
    relevance_threshold: int = 2

    @property
    def known(self) -> bool:
        return self.case is not None or bool(self.attempts)

    def attempt_of(self, number: int | None) -> Attempt | None:
        return next((a for a in self.attempts if a.attempt == number), None)


def pass_hat_columns(row: dict) -> list[str]:
    """The pass^k columns (pass_hat_K) of a reliability row, by k."""
    return sorted((k for k in row if PASS_HAT.fullmatch(k)), key=lambda k: int(k.rsplit("_", 1)[1]))
