"""Contracts of a trace batch: the run manifest (run.yaml) and the trace of each attempt."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator

from eval_pipeline.contracts.base import Identifier, JsonObject, StrictModel, TextId

# ---------------------------------------------------------------- run manifest


class Candidate(StrictModel):
    """The system under test."""

    system: str
    version: str | None = None


class RunManifest(StrictModel):
    """run.yaml of one trace batch."""

    run_id: Identifier
    candidate: str | Candidate
    model: str | None = None
    prompt_version: Identifier | None = None
    index_version: Identifier | None = None
    corpus_version: Identifier
    environment_version: Identifier | None = None
    dataset_version: Identifier
    mode: Literal["gate", "exploratory"] = "gate"
    created_at: str | None = None
    # the run this one is gated against; without it, the gate policy's baseline_run_id
    baseline_run_id: Identifier | None = None
    citations: Literal["required", "optional"] | None = None
    # BCP 47 tag (e.g. "de-DE"): the default region for national phone numbers and ids in this run's traces
    locale: str | None = None

    model_config = ConfigDict(strict=False, extra="ignore")

    @field_validator("created_at", mode="before")
    @classmethod
    def _timestamp_as_text(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        if hasattr(value, "isoformat"):
            return value.isoformat().replace("+00:00", "Z")
        return str(value)

    @property
    def candidate_label(self) -> str:
        if isinstance(self.candidate, str):
            return self.candidate
        return f"{self.candidate.system}@{self.candidate.version}" if self.candidate.version else self.candidate.system


# ---------------------------------------------------------------- traces


class RankedDoc(StrictModel):
    """One entry of a ranked list."""

    doc_id: str
    score: float | None = None


class RetrievalRound(StrictModel):
    """One retrieval call: the query sent, candidates before reranking, final hits."""

    round: int = 1
    tool: str | None = None
    variant: str | None = None
    query: str | None = None
    candidates: list[RankedDoc] | None = None
    hits: list[RankedDoc] = Field(default_factory=list)


class ContextChunk(StrictModel):
    """A chunk that reached the model's context."""

    doc_id: str
    text: str = ""
    tokens: int | None = None


class Citation(StrictModel):
    """A structured citation of the answer."""

    doc_id: str
    quote: str | None = None
    claim_index: int | None = None


class Answer(StrictModel):
    """The generated answer."""

    text: str | None = None
    citations: list[Citation] = Field(default_factory=list)
    refused: bool | None = None


class Dispatched(StrictModel):
    """The runtime record at the tool-dispatch boundary."""

    tool: str
    args: JsonObject = Field(default_factory=dict)


class StateChange(StrictModel):
    """One change a step made to the world state."""

    path: str
    before: Any = None
    after: Any = None


class Step(StrictModel):
    """One step of an agent trajectory."""

    index: int
    kind: str
    tool: str | None = None
    args: JsonObject | None = None
    status: str | None = None
    result: Any = None
    error: str | None = None
    state_diff: list[StateChange] | None = None
    dispatched: Dispatched | None = None
    content: str | None = None


class Usage(StrictModel):
    """Tokens, cost and latency of the attempt."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None


class Trace(StrictModel):
    """One attempt of one case (docs/inputs.md#traces)."""

    trace_id: TextId
    case_id: TextId
    case_revision: int | None = None
    attempt: int = 1
    status: Literal["ok", "error", "timeout"] = "ok"
    error: str | None = None
    input: str | None = None
    retrieval: list[RetrievalRound] | None = None
    context: list[ContextChunk] | None = None
    answer: Answer | None = None
    steps: list[Step] | None = None
    final_state: JsonObject | None = None
    usage: Usage | None = None
