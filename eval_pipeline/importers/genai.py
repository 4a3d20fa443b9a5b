"""OTel traces in the OpenTelemetry GenAI semantic conventions, read into one `SourceAttempt` per trace.

Two forms are read. The current one (conventions 1.37 and later) carries the conversation on the spans:
`gen_ai.input.messages` / `gen_ai.output.messages` (a JSON string or a structured list of `{role, parts}` with
`text`, `tool_call` and `tool_call_response` parts), `gen_ai.system_instructions`, `execute_tool` spans with
`gen_ai.tool.call.{id,arguments,result}` and `retrieval` spans with `gen_ai.retrieval.query.text` and
`gen_ai.retrieval.documents`. The older one (before 1.37) carries it as events of the model call's span:
`gen_ai.{system,user,assistant,tool}.message` and `gen_ai.choice`, whose fields are the event's attributes (the
body of a log-record event, merged into them by the OTLP reader). Either form only holds text when the producer
captured content (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`). docs/importers.md maps every field.

Over 400 lines because both forms are read into one model-call shape here, and one conversation is rebuilt from
those calls and the tool spans they dispatched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval_pipeline.importers.source import (
    SourceAttempt,
    SourceDoc,
    SourceRound,
    Span,
    SpanEvent,
    Unreadable,
    root_span,
    span_case_key,
)

CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE_EVENT = "gen_ai.choice"
_BODY_KEYS = ("body", "event.body")  # where span-event producers put a log event's body, when not in attributes
_TEXT_KEYS = ("content", "text", "page_content")


class UnreadableGenAI(ValueError):
    """A GenAI attribute or event whose value does not have the documented shape."""


def is_genai(spans: Sequence[Span]) -> bool:
    """Whether any span of the trace has a `gen_ai.*` attribute or event."""
    return any(
        any(k.startswith("gen_ai.") for k in s.attributes) or any(e.name.startswith("gen_ai.") for e in s.events)
        for s in spans
    )


def _json(value: Any, what: str) -> Any:
    """A structured attribute value, given as structure or as a JSON string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise UnreadableGenAI(f"{what} is not valid JSON ({exc.msg} at column {exc.colno})") from None


def _text(content: Any) -> str | None:
    """Text of a message content: a string, or the text of a list of parts (`{type: text, content|text}`)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            _text(p.get("content", p.get("text"))) if isinstance(p, dict) else _text(p)
            for p in content
            if not isinstance(p, dict) or p.get("type", "text") == "text"
        ]
        return "\n".join(t for t in texts if t) or None
    return json.dumps(content, ensure_ascii=False)


def _arguments(value: Any) -> Any:
    """Tool call arguments in the OpenAI form: a JSON string (a structured value is encoded)."""
    return value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": _arguments(arguments)}}


def _parts_message(message: Any, what: str) -> list[dict[str, Any]]:
    """One conventions message (`{role, parts}`) as OpenAI chat messages (a tool role gives one per response)."""
    if not isinstance(message, dict):
        raise UnreadableGenAI(f"{what}: a message is not an object")
    role, parts = message.get("role"), message.get("parts")
    if not isinstance(parts, list):
        if "content" in message:  # an instrumentation writing chat-completions messages into the attribute
            return [dict(message)]
        raise UnreadableGenAI(f"{what}: a {role} message without a parts list")
    typed = [p for p in parts if isinstance(p, dict)]
    responses = [p for p in typed if p.get("type") == "tool_call_response"]
    if responses:
        return [
            {"role": "tool", "tool_call_id": p.get("id"), "content": _tool_content(p.get("response"))}
            for p in responses
        ]
    out: dict[str, Any] = {"role": role, "content": _text([p for p in typed if p.get("type") == "text"])}
    calls = [_call(p.get("id"), p.get("name"), p.get("arguments")) for p in typed if p.get("type") == "tool_call"]
    if calls:
        out["tool_calls"] = calls
    return [out]


def _tool_content(value: Any) -> str | None:
    return value if value is None or isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _messages(value: Any, what: str) -> list[dict[str, Any]]:
    """A `gen_ai.input.messages` / `gen_ai.output.messages` value as OpenAI chat messages."""
    data = _json(value, what)
    if data is None:
        return []
    if not isinstance(data, list):
        raise UnreadableGenAI(f"{what} is not a list of messages")
    return [m for message in data for m in _parts_message(message, what)]


def _event_fields(event: SpanEvent) -> dict[str, Any]:
    """An event's fields: its attributes, with a body given as one attribute (JSON or structure) spread in."""
    fields = {k: v for k, v in event.attributes.items() if k not in _BODY_KEYS}
    for key in _BODY_KEYS:
        body = event.attributes.get(key)
        if isinstance(body, str) and body.lstrip().startswith("{"):
            body = _json(body, f"event {event.name} {key}")
        if isinstance(body, dict):
            fields.update(body)
    return fields


def _event_message(role: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """One pre-1.37 message event as an OpenAI chat message."""
    message: dict[str, Any] = {"role": role, "content": _text(fields.get("content"))}
    if role == "tool":
        message["tool_call_id"] = fields.get("id")
    calls = _json(fields.get("tool_calls"), f"gen_ai.{role}.message tool_calls")
    if isinstance(calls, list) and calls:
        message["tool_calls"] = [_event_call(c, role) for c in calls if isinstance(c, dict)]
    return message


def _event_call(call: Mapping[str, Any], role: str) -> dict[str, Any]:
    """One tool call of a message event: `{id, type, function: {name, arguments}}`."""
    function = call.get("function") or {}
    if not isinstance(function, dict):
        raise UnreadableGenAI(
            f"a tool call of a gen_ai.{role}.message has a function that is a {type(function).__name__}, not an object"
        )
    return _call(call.get("id"), function.get("name"), function.get("arguments"))


def _choice_index(value: Any) -> int:
    """The index of a gen_ai.choice event (0 when absent)."""
    if value in (None, ""):
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise UnreadableGenAI(f"a gen_ai.choice index is {value!r}, not an integer")


@dataclass(slots=True)
class _Chat:
    """One model call: its input and output in OpenAI chat form, and its token counts."""

    span: Span
    input: list[dict[str, Any]]
    output: dict[str, Any] | None
    tokens: dict[str, int] = field(default_factory=dict)


def _chat(span: Span) -> _Chat:
    a = span.attributes
    given = _messages(a.get("gen_ai.input.messages"), "gen_ai.input.messages")
    outputs = _messages(a.get("gen_ai.output.messages"), "gen_ai.output.messages")
    system = _text(_json(a.get("gen_ai.system_instructions"), "gen_ai.system_instructions"))
    if system and not any(m["role"] == "system" for m in given):
        given.insert(0, {"role": "system", "content": system})
    choices: list[tuple[int, dict[str, Any]]] = []
    for event in span.events:
        if event.name in MESSAGE_EVENTS and not a.get("gen_ai.input.messages"):
            given.append(_event_message(MESSAGE_EVENTS[event.name], _event_fields(event)))
        elif event.name == CHOICE_EVENT:
            fields = _event_fields(event)
            message = _json(fields.get("message"), "gen_ai.choice message")
            choices.append(
                (
                    _choice_index(fields.get("index")),
                    _event_message("assistant", message if isinstance(message, dict) else {}),
                )
            )
    output = outputs[0] if outputs else (min(choices, key=lambda c: c[0])[1] if choices else None)
    tokens = {}
    for name, keys in (
        ("input_tokens", ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")),
        ("output_tokens", ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")),
    ):
        value = next((a[k] for k in keys if isinstance(a.get(k), int)), None)
        if value is not None:
            tokens[name] = value
    return _Chat(span, given, output, tokens)


def _doc(value: Any) -> SourceDoc:
    """A retrieved document: a `{id, content|text, score, metadata}` object, or its text alone."""
    if isinstance(value, str):
        return SourceDoc(text=value)
    if not isinstance(value, dict):
        raise UnreadableGenAI("gen_ai.retrieval.documents: a document is neither an object nor a text")
    metadata = _json(value.get("metadata"), "a document's metadata")
    text = next((value[k] for k in _TEXT_KEYS if isinstance(value.get(k), str)), None)
    score = value.get("score")
    return SourceDoc(
        id=None if value.get("id") is None else str(value["id"]),
        text=text,
        score=float(score) if isinstance(score, int | float) and not isinstance(score, bool) else None,
        metadata=metadata if isinstance(metadata, dict) else None,
    )


def _round(span: Span) -> SourceRound:
    a = span.attributes
    docs = _json(a.get("gen_ai.retrieval.documents"), "gen_ai.retrieval.documents")
    if docs is not None and not isinstance(docs, list):
        raise UnreadableGenAI("gen_ai.retrieval.documents is not a list")
    return SourceRound(
        hits=[_doc(d) for d in docs or []],
        query=a.get("gen_ai.retrieval.query.text"),
        tool=a.get("gen_ai.data_source.id") or span.name,
    )


def _tool_message(span: Span, call_id: str | None) -> dict[str, Any]:
    """The result of an `execute_tool` span as a tool message; a span with status ERROR is a failed call."""
    a = span.attributes
    if span.status == "ERROR":
        return {
            "role": "tool",
            "tool_call_id": call_id,
            "content": span.status_message or a.get("error.type") or "error",
            "error": True,
        }
    return {"role": "tool", "tool_call_id": call_id, "content": _tool_content(a.get("gen_ai.tool.call.result"))}


class _Conversation:
    """The agent's conversation rebuilt from the model calls in start order and the tool spans they dispatched."""

    def __init__(self, tools: list[Span]) -> None:
        self.messages: list[dict[str, Any]] = []
        self.unclaimed = list(tools)
        self.pending: list[dict[str, Any]] = []  # the last output's calls that no tool span answered

    def _claim(self, call: dict[str, Any], after: int) -> Span | None:
        """The tool span that ran a call: the one with its call id, else the first of its name (started after)."""
        candidates = [s for s in self.unclaimed if s.start_ns >= after]
        found = next(
            (s for s in candidates if call["id"] and s.attributes.get("gen_ai.tool.call.id") == call["id"]), None
        )
        found = found or next(
            (
                s
                for s in candidates
                if s.attributes.get("gen_ai.tool.name") == call["function"]["name"]
                and not s.attributes.get("gen_ai.tool.call.id")
            ),
            None,
        )
        if found is not None:
            self.unclaimed.remove(found)
        return found

    def chat(self, chat: _Chat) -> None:
        given = chat.input
        if self.messages:
            last = max((i for i, m in enumerate(given) if m["role"] == "assistant"), default=-1)
            given = (
                given[last + 1 :]
                if last >= 0
                else [m for m in given if m["role"] != "system" and m not in self.messages]
            )
        for message in given:
            if message["role"] == "tool":
                self._answer(message)
            elif message not in self.messages:
                self.messages.append(message)
        self.pending = []
        if chat.output is None:
            return
        self.messages.append(chat.output)
        for call in chat.output.get("tool_calls") or []:
            ran = self._claim(call, chat.span.start_ns)
            if ran is None:
                self.pending.append(call)
                continue
            if call["function"]["arguments"] is None:
                call["function"]["arguments"] = _arguments(ran.attributes.get("gen_ai.tool.call.arguments"))
            self.messages.append(_tool_message(ran, call["id"]))

    def _answer(self, message: dict[str, Any]) -> None:
        """A tool message of a later model call's input: the result of a call no tool span answered."""
        for call in self.pending:
            if message.get("tool_call_id") in (call["id"], None):
                self.pending.remove(call)
                self.messages.append({**message, "tool_call_id": call["id"]})
                return

    def tool(self, span: Span) -> None:
        """A tool span no model output dispatched: its own call and result."""
        if span not in self.unclaimed:
            return
        self.unclaimed.remove(span)
        a = span.attributes
        call_id = a.get("gen_ai.tool.call.id") or span.span_id
        self.messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    _call(call_id, a.get("gen_ai.tool.name") or span.name, a.get("gen_ai.tool.call.arguments"))
                ],
            }
        )
        self.messages.append(_tool_message(span, call_id))


def _operation(span: Span) -> str | None:
    operation = span.attributes.get("gen_ai.operation.name")
    if operation is None and any(e.name == CHOICE_EVENT or e.name in MESSAGE_EVENTS for e in span.events):
        return "chat"
    return operation


def _prompt(chat: _Chat) -> str | None:
    texts = [m.get("content") for m in chat.input if isinstance(m.get("content"), str) and m.get("content")]
    return "\n".join(texts) if texts else None


def _first_user(messages: Sequence[Mapping[str, Any]]) -> str | None:
    return next((m.get("content") for m in messages if m.get("role") == "user" and m.get("content")), None)


@dataclass(slots=True)
class _Read:
    """What a trace's GenAI spans hold."""

    chats: list[_Chat]
    rounds: list[SourceRound]
    messages: list[dict[str, Any]]
    agent_input: list[dict[str, Any]]
    agent_output: list[dict[str, Any]]


def _read(spans: Sequence[Span], root: Span) -> _Read:
    """The model calls, retrieval rounds and conversation of a trace; UnreadableGenAI when a value is malformed."""
    operations = [(_operation(s), s) for s in spans]
    chats = [_chat(s) for op, s in operations if op in CHAT_OPERATIONS]
    conversation = _Conversation([s for op, s in operations if op == "execute_tool"])
    model_calls = iter(chats)
    for op, span in operations:
        if op in CHAT_OPERATIONS:
            conversation.chat(next(model_calls))
        elif op == "execute_tool":
            conversation.tool(span)
    # an agent span of a trace without model-call spans: its own input and output messages
    agent = [
        _messages(root.attributes.get(f"gen_ai.{side}.messages"), f"gen_ai.{side}.messages") if not chats else []
        for side in ("input", "output")
    ]
    return _Read(chats, [_round(s) for op, s in operations if op == "retrieval"], conversation.messages, *agent)


def _usage(root: Span, chats: Sequence[_Chat]) -> dict[str, Any]:
    """Tokens summed over the model calls; latency from the root span."""
    usage: dict[str, Any] = {"latency_ms": (root.end_ns - root.start_ns) / 1e6} if root.end_ns > root.start_ns else {}
    for chat in chats:
        for name, count in chat.tokens.items():
            usage[name] = usage.get(name, 0) + count
    return usage


def genai_attempt(
    spans: list[Span], source_file: str, record: int, *, case_key: str = "case_id"
) -> SourceAttempt | Unreadable:
    """One OTel trace (spans in start order) in the GenAI conventions as an attempt, or why it cannot be read."""
    root = root_span(spans)
    try:
        read = _read(spans, root)
    except UnreadableGenAI as exc:
        return Unreadable(source_file, record, f"OTel trace {root.trace_id}: {exc}", trace_id=root.trace_id)
    last_output = read.chats[-1].output if read.chats else (read.agent_output[-1] if read.agent_output else None)
    answer = _text(last_output.get("content")) if last_output else None
    question = (
        _first_user(read.messages)
        or _first_user(read.agent_input)
        or next((r.query for r in read.rounds if r.query), None)
    )
    failed = root.status == "ERROR"
    captured = question or answer or any(r.hits for r in read.rounds) or any(m.get("tool_calls") for m in read.messages)
    if not captured and not failed:
        return Unreadable(
            source_file,
            record,
            f"OTel trace {root.trace_id} has GenAI spans but no message, document or "
            "tool call: was content capture on (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)?",
            trace_id=root.trace_id,
        )
    return SourceAttempt(
        source_file=source_file,
        record=record,
        key=root.trace_id,
        started_ns=root.start_ns,
        case_key=span_case_key(spans, root, case_key),
        input=question,
        rounds=read.rounds,
        prompt=_prompt(read.chats[-1]) if read.chats else None,
        answer=answer,
        messages=read.messages or None,
        usage=_usage(root, read.chats) or None,
        status="error" if failed else "ok",
        error=(root.status_message or root.attributes.get("error.type") or "the root span's status is ERROR")
        if failed
        else None,
    )


__all__ = ["CHAT_OPERATIONS", "UnreadableGenAI", "genai_attempt", "is_genai"]
