"""The OpenInference dialect of `eval-pipeline import otlp`: one OTel trace of OpenInference spans (Phoenix,
openinference-instrumentation-*) read into one `SourceAttempt`.

What is read (the mapping table is in docs/importers.md):
- the root span (no parent in the trace; the earliest when several): `input.value` is the input (from a JSON
  object, its `input`/`question`/`query`/... text or its last user message), its `output.value` the answer when
  no model output holds text, its duration the latency, status ERROR the attempt's error (the exception event's);
- RETRIEVER spans, in start order, are the retrieval rounds: `retrieval.documents.N.document.{id,content,score,
  metadata}` the hits, `input.value` the query, the span name the tool; a RERANKER span reranks the latest round
  before it: `reranker.output_documents` become its hits, `reranker.input_documents` (else its former hits) its
  candidates;
- LLM spans (not those inside another LLM span, which repeat it): `llm.output_messages` are the assistant turns
  and their `tool_calls`, `llm.token_count.*` and `llm.cost.total` summed into usage, the last one's
  `llm.input_messages` the prompt (which tells the writer which documents reached the model), its last output
  text the answer;
- TOOL spans answer the dispatched calls: by `tool_call.id` (or the id in a LangChain ToolMessage output), else
  by `tool.name` in order; a call no TOOL span answers takes the tool message a later LLM span was given;
- the case key: in the root first, then any span: a key of the `metadata` JSON object, attribute `<key>`,
  attribute `eval.<key>`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from eval_pipeline.importers.source import (
    SourceAttempt,
    SourceDoc,
    SourceRound,
    Span,
    Unreadable,
    root_span,
    span_case_key,
)

KIND = "openinference.span.kind"
# keys of a JSON input object that hold the user's text, most specific first
_INPUT_KEYS = ("input", "question", "query", "user_input", "prompt", "text", "content")
_ANSWER_KEYS = ("output", "answer", "response", "result", "text", "content")


def is_openinference(spans: Iterable[Span]) -> bool:
    """Whether a trace speaks OpenInference: any span has an `openinference.span.kind`."""
    return any(KIND in span.attributes for span in spans)


def _kind(span: Span) -> str:
    return str(span.attributes.get(KIND, "")).upper()


def _indexed(attrs: Mapping[str, Any], prefix: str) -> list[dict[str, Any]]:
    """The items of a flattened list attribute (`<prefix>.N.<rest>`), each as {rest: value}, in index order."""
    head = prefix + "."
    items: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(head):
            continue
        index, _, rest = key[len(head) :].partition(".")
        if index.isdigit() and rest:
            items.setdefault(int(index), {})[rest] = value
    return [items[i] for i in sorted(items)]


class _Lists:
    """The flattened list attributes of a trace's spans (`retrieval.documents.0.document.id`), each list read once
    per span however often it is asked for."""

    def __init__(self) -> None:
        self._read: dict[tuple[int, str], list[dict[str, Any]]] = {}

    def of(self, span: Span, prefix: str) -> list[dict[str, Any]]:
        """The items of the list `prefix` on the span, each as {rest: value}, in index order."""
        found = self._read.get((id(span), prefix))
        if found is None:
            found = self._read[(id(span), prefix)] = _indexed(span.attributes, prefix)
        return found


def _json(value: Any) -> Any:
    """A JSON-encoded attribute decoded; the value itself when it is not JSON text."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text_of(value: Any, keys: Sequence[str]) -> str | None:
    """The text a value holds: a string, or the first text under one of `keys` of a JSON object (nested once)."""
    value = _json(value)
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in keys:
            inner = value.get(key)
            if isinstance(inner, str):
                return inner
            if isinstance(inner, Mapping):
                found = _text_of(inner, keys)
                if found is not None:
                    return found
    return None


# ---- documents and retrieval rounds ----------------------------------------------------------------------------


def _document(fields: Mapping[str, Any]) -> SourceDoc:
    metadata = _json(fields.get("document.metadata"))
    score = fields.get("document.score")
    doc_id = fields.get("document.id")
    return SourceDoc(
        id=None if doc_id in (None, "") else str(doc_id),
        text=fields.get("document.content"),
        score=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else None,
        metadata=metadata if isinstance(metadata, Mapping) else None,
    )


def _rounds(spans: Sequence[Span], lists: _Lists) -> list[SourceRound]:
    """Retrieval rounds in span start order, each reranked by the RERANKER spans that follow it."""
    rounds: list[SourceRound] = []
    for span in spans:
        attrs, kind = span.attributes, _kind(span)
        if kind == "RETRIEVER":
            rounds.append(
                SourceRound(
                    hits=[_document(f) for f in lists.of(span, "retrieval.documents")],
                    tool=span.name,
                    query=_text_of(attrs.get("input.value"), _INPUT_KEYS),
                )
            )
        elif kind == "RERANKER" and (output := lists.of(span, "reranker.output_documents")):
            reranked = [_document(f) for f in lists.of(span, "reranker.input_documents")]
            if not rounds:  # a reranker over documents no traced retriever returned: a round of its own
                rounds.append(SourceRound(hits=[], tool=span.name, query=attrs.get("reranker.query")))
            latest = rounds[-1]
            latest.candidates = reranked or latest.candidates or latest.hits
            latest.hits = [_document(f) for f in output]
    return rounds


# ---- messages -----------------------------------------------------------------------------------------------


def _message_text(fields: Mapping[str, Any]) -> str | None:
    """A message's text: `message.content`, else its text `message.contents` parts joined."""
    content = fields.get("message.content")
    if isinstance(content, str):
        return content
    parts = [
        part.get("message_content.text")
        for part in _indexed(fields, "message.contents")
        if part.get("message_content.type", "text") == "text"
    ]
    texts = [p for p in parts if isinstance(p, str)]
    return "\n".join(texts) if texts else None


def _tool_calls(fields: Mapping[str, Any], span: Span, position: int) -> list[dict[str, Any]]:
    """The OpenAI-form tool calls of one output message (`tool_calls`, or the legacy `function_call_name`); a call
    without an id gets one made of its span's."""
    calls = [
        (c.get("tool_call.id"), c.get("tool_call.function.name"), c.get("tool_call.function.arguments"))
        for c in _indexed(fields, "message.tool_calls")
    ]
    if not calls and fields.get("message.function_call_name"):
        calls = [(None, fields["message.function_call_name"], fields.get("message.function_call_arguments_json"))]
    return [
        {
            "id": str(call_id or f"{span.span_id}-{position}-{number}"),
            "type": "function",
            "function": {"name": name, "arguments": arguments if arguments is not None else "{}"},
        }
        for number, (call_id, name, arguments) in enumerate(calls)
    ]


def _tool_result(span: Span) -> tuple[str | None, str | None, bool]:
    """(call id, result text, failed) of a TOOL span; LangChain writes its ToolMessage as the output."""
    attrs = span.attributes
    output = _json(attrs.get("output.value"))
    call_id = attrs.get("tool_call.id")
    failed = span.status == "ERROR"
    if isinstance(output, Mapping) and isinstance(output.get("data"), Mapping) and output.get("type") == "tool":
        data = output["data"]
        call_id = call_id or data.get("tool_call_id")
        failed = failed or data.get("status") == "error"
        output = data.get("content")
    if output is None and failed:
        output = f"Error: {span.status_message or 'the tool failed'}"
    text = output if isinstance(output, str) or output is None else json.dumps(output)
    return (str(call_id) if call_id else None), text, failed


class _ToolResults:
    """The TOOL spans of a trace, each answering one dispatched call (by id, else by name in order)."""

    def __init__(self, spans: Sequence[Span], llm_spans: Sequence[Span], lists: _Lists) -> None:
        self.tools = [
            (span.attributes.get("tool.name") or span.name, *_tool_result(span))
            for span in spans
            if _kind(span) == "TOOL"
        ]
        self.used: set[int] = set()
        self._llm_spans, self._lists = llm_spans, lists
        self._given: dict[Any, str | None] | None = None

    @property
    def given(self) -> dict[Any, str | None]:
        """Results the model was given, for calls whose tool was not traced (read only when such a call exists:
        every model call's input repeats the conversation so far)."""
        if self._given is None:
            self._given = {
                m.get("message.tool_call_id"): _message_text(m)
                for s in self._llm_spans
                for m in self._lists.of(s, "llm.input_messages")
                if m.get("message.role") == "tool" and m.get("message.tool_call_id")
            }
        return self._given

    def message(self, call: Mapping[str, Any]) -> dict[str, Any] | None:
        """The tool message answering a call, or None when nothing in the trace answers it."""
        name, call_id = call["function"]["name"], call["id"]
        found = next((i for i, t in enumerate(self.tools) if i not in self.used and t[1] == call_id), None)
        if found is None:
            found = next(
                (i for i, t in enumerate(self.tools) if i not in self.used and t[1] is None and t[0] == name), None
            )
        if found is not None:
            self.used.add(found)
            _, _, text, failed = self.tools[found]
            return {"role": "tool", "tool_call_id": call_id, "content": text, "error": failed}
        if call_id in self.given:
            return {"role": "tool", "tool_call_id": call_id, "content": self.given[call_id]}
        return None


def _outer_llm_spans(spans: Sequence[Span]) -> list[Span]:
    """LLM spans that are not inside another LLM span (a wrapper's inner client span repeats the same call)."""
    by_id = {s.span_id: s for s in spans}

    def nested(span: Span) -> bool:
        parent, seen = by_id.get(span.parent_id or ""), set()
        while parent is not None and parent.span_id not in seen:
            if _kind(parent) == "LLM":
                return True
            seen.add(parent.span_id)
            parent = by_id.get(parent.parent_id or "")
        return False

    return [s for s in spans if _kind(s) == "LLM" and not nested(s)]


def _conversation(
    user: str | None, llm_spans: Sequence[Span], tools: _ToolResults, lists: _Lists
) -> tuple[list[dict[str, Any]], str | None]:
    """(OpenAI chat messages, the last assistant text): the user's input, every assistant turn with its calls
    and their results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}] if user is not None else []
    answer = None
    for span in llm_spans:
        for position, fields in enumerate(lists.of(span, "llm.output_messages")):
            text, calls = _message_text(fields), _tool_calls(fields, span, position)
            if text is None and not calls:
                continue
            turn: dict[str, Any] = {"role": "assistant", "content": text}
            if calls:
                turn["tool_calls"] = calls
            messages.append(turn)
            messages += [m for m in map(tools.message, calls) if m is not None]
            if text:
                answer = text
    return messages, answer


# ---- the attempt ------------------------------------------------------------------------------------------


def _user_text(message: Any) -> str | None:
    """The text of a user message in any form a root's input shows it: OpenAI `{role, content}`, a LangChain
    message dump `{type: human, data: {content}}`, or a `[role, text]` pair."""
    if isinstance(message, list) and len(message) == 2 and message[0] in ("user", "human"):
        return message[1] if isinstance(message[1], str) else None
    if not isinstance(message, Mapping):
        return None
    fields = message.get("data") if isinstance(message.get("data"), Mapping) else message
    role = message.get("role", message.get("type"))
    return fields.get("content") if role in ("user", "human") and isinstance(fields.get("content"), str) else None


def _input(root: Span, llm_spans: Sequence[Span], lists: _Lists) -> str | None:
    """The user's input: the root's `input.value` text (or its last user message), else the first user message a
    model was given."""
    text = _text_of(root.attributes.get("input.value"), _INPUT_KEYS)
    if text is None:
        value = _json(root.attributes.get("input.value"))
        messages = value.get("messages") if isinstance(value, Mapping) else value
        if isinstance(messages, list):
            text = next(filter(None, map(_user_text, reversed(messages))), None)
    if text is None:
        text = next(
            (
                _message_text(m)
                for s in llm_spans
                for m in lists.of(s, "llm.input_messages")
                if m.get("message.role") == "user" and _message_text(m)
            ),
            None,
        )
    return text


def _usage(root: Span, llm_spans: Sequence[Span]) -> dict[str, Any] | None:
    """Tokens and cost summed over the LLM spans, latency from the root span."""
    usage: dict[str, Any] = {}
    for field, attribute in (
        ("input_tokens", "llm.token_count.prompt"),
        ("output_tokens", "llm.token_count.completion"),
        ("cost_usd", "llm.cost.total"),
    ):
        values = [s.attributes[attribute] for s in llm_spans if isinstance(s.attributes.get(attribute), (int, float))]
        if values:
            usage[field] = float(sum(values)) if field == "cost_usd" else int(sum(values))
    if root.end_ns > root.start_ns:
        usage["latency_ms"] = (root.end_ns - root.start_ns) / 1e6
    return usage or None


def _error(root: Span) -> str:
    """The root's exception (`type: message` of its last exception event), else its status message without the
    traceback some instrumentations append to it."""
    event = next((e for e in reversed(root.events) if e.name == "exception"), None)
    if event is not None and event.attributes.get("exception.message"):
        kind = event.attributes.get("exception.type")
        return (
            f"{kind}: {event.attributes['exception.message']}" if kind else str(event.attributes["exception.message"])
        )
    message = (root.status_message or "").split("Traceback (most recent call last)")[0].strip()
    return message or "the root span's status is ERROR"


def openinference_attempt(
    spans: list[Span], source_file: str, record: int, *, case_key: str = "case_id"
) -> SourceAttempt | Unreadable:
    """One OTel trace of OpenInference spans (sorted by start) as one attempt."""
    if not spans:
        return Unreadable(source_file, record, "a trace without spans")
    root = root_span(spans)
    llm_spans = _outer_llm_spans(spans)
    lists = _Lists()
    user = _input(root, llm_spans, lists)
    messages, answer = _conversation(user, llm_spans, _ToolResults(spans, llm_spans, lists), lists)
    if answer is None:
        answer = _text_of(root.attributes.get("output.value"), _ANSWER_KEYS)
        if answer is not None:
            messages.append({"role": "assistant", "content": answer})
    prompt = None
    if llm_spans:
        texts = [_message_text(m) for m in lists.of(llm_spans[-1], "llm.input_messages")]
        prompt = "\n".join(t for t in texts if t) or None
    failed = root.status == "ERROR"
    return SourceAttempt(
        source_file=source_file,
        record=record,
        key=root.trace_id,
        started_ns=root.start_ns,
        case_key=span_case_key(spans, root, case_key),
        input=user,
        rounds=_rounds(spans, lists),
        prompt=prompt,
        answer=answer,
        messages=messages,
        usage=_usage(root, llm_spans),
        status="error" if failed else "ok",
        error=_error(root) if failed else None,
    )


__all__ = ["KIND", "is_openinference", "openinference_attempt"]
