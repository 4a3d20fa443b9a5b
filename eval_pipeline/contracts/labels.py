"""Contracts of human labels: qrels relevance judgments and grounding labels."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from eval_pipeline.contracts.base import StrictModel


class QrelsJudgment(StrictModel):
    """A relevance judgment: 2 supporting, 1 related, 0 irrelevant (the policy's `retrieval.grades` is the scale)."""

    query_id: str
    doc_id: str
    grade: int
    source: str = "human"
    annotator: str | None = None


class GroundingLabel(StrictModel):
    """A human verdict on one claim, or on the whole answer."""

    trace_id: str
    claim: str | None = None
    verdict: Literal["SUPPORTED", "CONTRADICTED", "NOT_IN_EVIDENCE"] | None = None
    answer_grounded: bool | None = None

    @model_validator(mode="after")
    def _claim_or_answer(self) -> GroundingLabel:
        claim_level = self.claim is not None and self.verdict is not None
        answer_level = self.answer_grounded is not None
        if claim_level == answer_level:
            raise ValueError("a grounding label has either claim+verdict or answer_grounded")
        return self
