"""What a trace source holds, before documents get ids and attempts meet their cases: the shared shape of every
importer of RAG and agent traces (OTLP spans, Langfuse observations, Ragas and DeepEval rows).

A format module reads its files into `SourceAttempt`s (one per attempt: an OTel trace, a Langfuse trace, a Ragas
row) and `Unreadable`s (one per record it cannot read); `importers.attempts.import_attempts` does the rest the same
way for every format: document ids, golden-case matching, attempt numbers, cases, corpus version, registry, files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(slots=True)
class SourceDoc:
    """A document as the source gives it: any of its id, text, score and metadata (the id is settled later)."""

    id: str | None = None
    text: str | None = None
    score: float | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(slots=True)
class SourceRound:
    """One retrieval round: the documents it returned (after reranking, when a reranker ran) and what it reranked."""

    hits: list[SourceDoc]
    candidates: list[SourceDoc] | None = None
    query: str | None = None
    tool: str | None = None


@dataclass(slots=True)
class SourceAttempt:
    """One attempt of one case as a source holds it.

    `messages` is the conversation in OpenAI chat-completions form (assistant `tool_calls` with `id` and
    `function: {name, arguments}`, `tool` messages with `tool_call_id`), which `messages_to_steps` turns into steps;
    `prompt` is the text of the answering model call's input, used to tell which retrieved documents reached the
    model's context when the source does not say (`context` None). The `reference_*` fields are the gold of sources
    that carry their own (Ragas, DeepEval); `defects` turn the harness status to `error`.
    """

    source_file: str
    record: int  # the line, row or record number reject rows name
    key: str | None = None  # the source's own id of the attempt (OTel trace id, Langfuse trace id)
    started_ns: int | None = None  # orders repeated attempts of one case
    case_key: str | None = None  # the value of --case-key found in the source
    input: str | None = None
    rounds: list[SourceRound] = field(default_factory=list)
    context: list[SourceDoc] | None = None
    prompt: str | None = None
    answer: str | None = None
    messages: list[dict[str, Any]] | None = None
    usage: dict[str, Any] | None = None
    status: Literal["ok", "error", "timeout"] = "ok"
    error: str | None = None
    reference_answer: str | None = None
    reference_docs: list[SourceDoc] | None = None
    reference_tool_calls: list[dict[str, Any]] | None = None  # [{name, args}]
    tool_match: Literal["strict_order", "unordered", "goal_only"] | None = None
    defects: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Unreadable:
    """A record the importer cannot read: it becomes a reject row with this reason."""

    source_file: str
    record: int
    reason: str
    case_id: str | None = None
    trace_id: str | None = None


@dataclass(slots=True)
class Span:
    """One OpenTelemetry span, decoded from OTLP/JSON: attributes as plain Python values (arrays as lists,
    kvlists as dicts, bytes as base64 text), ids as lowercase hex."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start_ns: int
    end_ns: int
    status: Literal["UNSET", "OK", "ERROR"]
    status_message: str | None
    attributes: dict[str, Any]
    events: list[SpanEvent]
    scope: str | None = None  # the instrumentation scope's name


@dataclass(slots=True)
class SpanEvent:
    """One span event: its name, time and attributes."""

    name: str
    time_ns: int
    attributes: dict[str, Any]


def root_span(spans: Sequence[Span]) -> Span:
    """A trace's root: the earliest span whose parent is not in the trace."""
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if s.parent_id is None or s.parent_id not in ids]
    return min(roots or spans, key=lambda s: (s.start_ns, s.span_id))


def span_case_key(spans: Sequence[Span], root: Span, key: str) -> str | None:
    """The case key a trace carries: in the root span first, then any span; a key of the `metadata` attribute (a
    JSON object, as OpenInference writes it), else the attribute `<key>` or `eval.<key>`."""
    for span in [root, *spans]:
        found = span.attributes
        metadata = found.get("metadata")
        if isinstance(metadata, str) and metadata.startswith("{"):
            try:
                metadata = json.loads(metadata)
            except ValueError:
                metadata = None
        for value in (
            metadata.get(key) if isinstance(metadata, Mapping) else None,
            found.get(key),
            found.get(f"eval.{key}"),
        ):
            if value not in (None, ""):
                return str(value)
    return None


__all__ = ["SourceAttempt", "SourceDoc", "SourceRound", "Span", "SpanEvent", "Unreadable", "root_span", "span_case_key"]
