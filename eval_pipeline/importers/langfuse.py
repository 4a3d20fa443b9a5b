"""`eval-pipeline import langfuse FILE`: Langfuse observations, one attempt per Langfuse trace.

Reads an observation export as Langfuse writes it (importers.langfuse_export: blob-storage JSONL, CSV or Parquet,
gzip or not; API and UI JSON), grouped by trace. docs/importers.md has the field mapping.

Per trace, in start-time order: RETRIEVER observations (and spans named like a retriever) are retrieval rounds, their
`output` read in the common shapes (a list of documents or strings, `{documents: [...]}`, LangChain `Document` dicts,
LlamaIndex nodes) or at the field `doc_path` names; GENERATION outputs are the agent's turns (their tool calls the
dispatch), the last one's text the answer and its input the prompt; TOOL observations answer the calls (else a tool
message in a later generation's input does); a TOOL observation no generation dispatched is a call of its own. Usage
and cost are summed over the observations, latency is the trace's span, and level ERROR on the root observation or a
generation makes the attempt's status `error`.

Over 400 lines because the retriever, generation and tool observations of a trace are read into one attempt
together (the export's file forms are in langfuse_export).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from eval_pipeline.importers.attempts import Matching, import_attempts
from eval_pipeline.importers.common import ImporterError, ImportSummary
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.importers.langfuse_export import (
    ExportTrace,
    Observation,
    export_traces,
    first_number,
    mapping,
    text_id,
)
from eval_pipeline.importers.source import (
    SourceAttempt,
    SourceDoc,
    SourceRound,
    Unreadable,
)

FORMAT = "langfuse"
_DOC_LISTS = ("documents", "docs", "results", "hits", "nodes", "source_nodes", "matches", "chunks", "contexts")
_DOC_TEXT = ("page_content", "content", "text", "chunk", "body")
_DOC_ID = ("id", "doc_id", "id_", "document_id")
_DOC_SCORE = ("score", "relevance_score", "similarity")
_QUERY_KEYS = ("query", "question", "input", "user_input", "text", "prompt")
_ANSWER_KEYS = ("content", "text", "output", "answer", "result", "response")


# ---- values ------------------------------------------------------------------------------------------------------


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a JSON value, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def _content_text(content: Any) -> str | None:
    """A message's content as text: a string, or the text parts of a content-part list."""
    if isinstance(content, str) or content is None:
        return content
    if isinstance(content, list):
        parts = [p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, str | dict)]
        text = "\n".join(p for p in parts if isinstance(p, str))
        return text or None
    return None


def _messages_of(value: Any) -> list[dict[str, Any]] | None:
    """The chat messages of a generation's input: a message list, or `{messages: [...]}`."""
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        value = value["messages"]
    if isinstance(value, list) and value and all(isinstance(m, dict) and "role" in m for m in value):
        return value
    return None


def _plain(value: Any) -> str | None:
    """The question a value holds: a string, the last user message, a query-like key, or a function's text argument."""
    if isinstance(value, str):
        return value
    messages = _messages_of(value)
    if messages is not None:
        users = [m for m in messages if m.get("role") in ("user", "human")]
        return _content_text(users[-1].get("content")) if users else None
    if isinstance(value, list) and len(value) == 1:
        return _plain(value[0])
    if isinstance(value, dict):
        found = next((value[k] for k in _QUERY_KEYS if isinstance(value.get(k), str)), None)
        if found is not None:
            return found
        # a function traced with @observe records {"args": [...], "kwargs": {...}}
        texts = [v for v in [*(value.get("args") or []), *(value.get("kwargs") or {}).values()] if isinstance(v, str)]
        return texts[0] if len(texts) == 1 else None
    return None


def _prompt(value: Any) -> str | None:
    """The text a model call was given: its messages' contents, else every string of its input."""
    messages = _messages_of(value)
    texts = [t for t in (_content_text(m.get("content")) for m in messages) if t] if messages else list(_strings(value))
    return "\n".join(texts) or None


def _answer(value: Any) -> str | None:
    """The text of an output: a string, or the first text field of an object (a message's content first)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value:
        return _answer(value[-1])
    if isinstance(value, dict):
        return next((t for t in (_content_text(value.get(k)) for k in _ANSWER_KEYS) if t), None)
    return None


# ---- retrieval -----------------------------------------------------------------------------------------------------


def _at(value: Any, path: str) -> Any:
    """The value at a dotted path (`data.matches`, `results.0.docs`): keys of objects, indexes of lists."""
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _doc_list(output: Any, doc_path: str | None) -> list[Any] | None:
    """The documents a retriever returned: the list at doc_path, else the output's list or its documents field."""
    if output is None:
        return []
    found = _at(output, doc_path) if doc_path else output
    if doc_path is None and isinstance(output, dict):
        found = next((output[k] for k in _DOC_LISTS if isinstance(output.get(k), list)), None)
    return found if isinstance(found, list) else None


def _doc(item: Any) -> SourceDoc | None:
    """A retrieved document: a string, a LangChain Document, a LlamaIndex node with its score, or an object with
    any of an id, text, score and metadata; None when it holds none of them."""
    if isinstance(item, str):
        return SourceDoc(text=item) if item else None
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("node"), dict):
        inner = _doc(item["node"])
        if inner is not None and inner.score is None:
            inner.score = first_number(item, _DOC_SCORE)
        return inner
    metadata = mapping(item.get("metadata"))
    text = next((s[k] for s in (item, metadata) for k in _DOC_TEXT if isinstance(s.get(k), str)), None)
    doc_id = next((i for i in (text_id(item.get(k)) for k in _DOC_ID) if i), None)
    score = next((n for n in (first_number(s, _DOC_SCORE) for s in (item, metadata)) if n is not None), None)
    if doc_id is None and text is None and not metadata:
        return None
    return SourceDoc(id=doc_id, text=text, score=score, metadata=metadata or None)


def _is_retriever(obs: Observation) -> bool:
    # LangChain integrations before RETRIEVER existed recorded retrievers as spans named after their class
    return obs.type == "RETRIEVER" or (obs.type == "SPAN" and "retriev" in (obs.name or "").lower())


def _round(obs: Observation, doc_path: str | None) -> tuple[SourceRound | None, list[str]]:
    """A retrieval round from a retriever observation, and what of its output could not be read."""
    label = f"retriever {obs.name or obs.id}"
    items = _doc_list(obs.output, doc_path)
    if items is None:
        where = f"no list at {doc_path!r}" if doc_path else "no documents list (name its field with --doc-path)"
        return None, [f"{label}: its output holds {where}"]
    hits, defects = [], []
    for number, item in enumerate(items, start=1):
        doc = _doc(item)
        if doc is None:
            defects.append(f"{label}: document {number} ({type(item).__name__}) has no id, text or metadata")
        else:
            hits.append(doc)
    return SourceRound(hits=hits, query=_plain(obs.input), tool=obs.name), defects


# ---- the conversation --------------------------------------------------------------------------------------------


def _openai_call(call: Mapping[str, Any], fallback_id: str) -> dict[str, Any]:
    """A tool call in OpenAI form from an OpenAI call, a LangChain call `{name, args, id}` or an Anthropic
    `tool_use`."""
    function = call["function"] if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments", function.get("args", function.get("input")))
    return {
        "id": text_id(call.get("id")) or fallback_id,
        "type": "function",
        "function": {"name": function.get("name"), "arguments": arguments},
    }


def _assistant(output: Any, obs_id: str) -> dict[str, Any] | None:
    """The assistant message of a generation's output: an OpenAI or LangChain message, a chat-completions response,
    Anthropic content blocks, or text."""
    if isinstance(output, dict) and isinstance(output.get("choices"), list) and output["choices"]:
        output = output["choices"][0]
    if isinstance(output, dict) and isinstance(output.get("message"), dict):
        output = output["message"]
    if isinstance(output, list):
        output = next((m for m in reversed(output) if isinstance(m, dict)), _answer(output))
    if isinstance(output, str):
        return {"role": "assistant", "content": output}
    if not isinstance(output, dict):
        return None
    content = output.get("content")
    calls = [
        c
        for c in output.get("tool_calls") or (output.get("additional_kwargs") or {}).get("tool_calls") or []
        if isinstance(c, dict)
    ]
    if isinstance(output.get("function_call"), dict):
        calls.append({"function": output["function_call"]})
    if isinstance(content, list):
        calls += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
    text = _content_text(content) if content is not None or calls else _answer(output)
    return {
        "role": "assistant",
        "content": text,
        "tool_calls": [_openai_call(c, f"{obs_id}-{n}") for n, c in enumerate(calls, start=1)],
    }


def _arguments(value: Any) -> Any:
    """A TOOL observation's input as call arguments: an object (the kwargs of an @observe function, a LangChain
    tool call's args, a Python dict literal LangChain logs), else `{"input": text}` as a one-argument tool takes it."""
    if isinstance(value, dict):
        if set(value) <= {"args", "kwargs"} and not value.get("args") and isinstance(value.get("kwargs"), dict):
            return value["kwargs"]
        return value["args"] if value.get("type") == "tool_call" and isinstance(value.get("args"), dict) else value
    if value is None:
        return {}
    if isinstance(value, str) and value.strip().startswith("{") and len(value) < 100_000:
        try:
            literal = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            literal = None
        if isinstance(literal, dict):
            return literal
    return {"input": value}


def _tool_call_id(obs: Observation) -> str | None:
    """The id of the call a tool observation answers, when its metadata, output or input says."""
    for where in (obs.metadata, obs.output, obs.input):
        if isinstance(where, dict) and text_id(where.get("tool_call_id")):
            return text_id(where["tool_call_id"])
    return (
        text_id(obs.input.get("id")) if isinstance(obs.input, dict) and obs.input.get("type") == "tool_call" else None
    )


def _result_text(output: Any) -> Any:
    """A tool's result as a tool message's content: text, or JSON text of an object (a LangChain ToolMessage's
    content)."""
    if isinstance(output, dict) and "content" in output and (output.get("type") == "tool" or "tool_call_id" in output):
        output = output["content"]
    if output is None or isinstance(output, str):
        return output
    return orjson.dumps(output).decode()


def _tool_message(call_id: str, obs: Observation) -> dict[str, Any]:
    content = _result_text(obs.output)
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if obs.level == "ERROR":
        message["content"] = content if content is not None else obs.status_message or "the tool reported an error"
        message["error"] = True
    return message


def _answering(
    call: Mapping[str, Any], after: Observation, candidates: Sequence[Observation], used: set[str]
) -> Observation | None:
    """The tool observation that answers a call: the one naming its id, else the first of its name that starts after
    the generation (a TOOL before a span), else the first of its name; each answers one call."""
    free = [o for o in candidates if o.id not in used]
    named = sorted((o for o in free if o.name == call["function"]["name"]), key=lambda o: o.type != "TOOL")
    later = [o for o in named if (o.start_ns or 0) >= (after.start_ns or 0)]
    found = next(iter([o for o in free if _tool_call_id(o) == call["id"]] or later or named), None)
    if found is not None:
        used.add(found.id)
    return found


def _conversation(input_text: str | None, observations: Sequence[Observation]) -> list[dict[str, Any]] | None:
    """The attempt as chat messages: each generation's assistant message with its calls answered, and each TOOL
    observation no generation dispatched as a call of its own, in start order."""
    generations = [o for o in observations if o.type == "GENERATION"]
    if not generations and not any(o.type == "TOOL" for o in observations):
        return None
    candidates = [o for o in observations if o.type in ("TOOL", "SPAN")]
    in_inputs = {
        m["tool_call_id"]: m
        for g in generations
        for m in _messages_of(g.input) or []
        if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)
    }
    used: set[str] = set()
    turns: dict[int, list[dict[str, Any]]] = {}
    for position, obs in enumerate(observations):
        message = _assistant(obs.output, obs.id) if obs.type == "GENERATION" else None
        if message is None:
            continue
        replies = []
        for call in message.get("tool_calls", []):
            found = _answering(call, obs, candidates, used)
            if found is not None:
                replies.append(_tool_message(call["id"], found))
            elif call["id"] in in_inputs:
                replies.append({**in_inputs[call["id"]], "role": "tool"})
        turns[position] = [message, *replies]
    for position, obs in enumerate(observations):
        if obs.type == "TOOL" and obs.id not in used:
            call = {
                "id": obs.id,
                "type": "function",
                "function": {"name": obs.name, "arguments": _arguments(obs.input)},
            }
            turns[position] = [{"role": "assistant", "content": None, "tool_calls": [call]}, _tool_message(obs.id, obs)]
    opening = [{"role": "user", "content": input_text}] if input_text else []
    return opening + [m for position in sorted(turns) for m in turns[position]]


# ---- one trace, one attempt --------------------------------------------------------------------------------------


def _key_in(metadata: Mapping[str, Any], key: str) -> str | None:
    """The case key in a metadata object, or in the span attributes Langfuse keeps under `attributes`."""
    for scope in (metadata, metadata.get("attributes")):
        for name in (key, f"eval.{key}"):
            found = text_id(scope.get(name)) if isinstance(scope, dict) else None
            if found:
                return found
    return None


def _case_key(key: str, trace: ExportTrace, root: Observation) -> str | None:
    """The case key: trace metadata (a trace row's, or the trace metadata on observations), then the root
    observation's metadata, then any observation's in start order."""
    scopes = [mapping(r.get("metadata")) for r in trace.trace_rows] + [o.trace_metadata for o in trace.observations]
    scopes += [root.metadata] + [o.metadata for o in trace.observations]
    return next((k for k in (_key_in(s, key) for s in scopes) if k), None)


def _total(values: Sequence[float | int | None]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _usage(observations: Sequence[Observation]) -> dict[str, Any] | None:
    """Tokens and cost summed over the observations; latency from the first start to the last end."""
    starts = [o.start_ns for o in observations if o.start_ns is not None]
    ends = [o.end_ns for o in observations if o.end_ns is not None]
    usage = {
        "input_tokens": _total([o.input_tokens for o in observations]),
        "output_tokens": _total([o.output_tokens for o in observations]),
        "cost_usd": _total([o.cost for o in observations]),
        "latency_ms": (max(ends) - min(starts)) / 1e6 if starts and ends else None,
    }
    return usage if any(v is not None for v in usage.values()) else None


def convert_trace(
    trace: ExportTrace, source_file: str, *, case_key: str = "case_id", doc_path: str | None = None
) -> SourceAttempt | Unreadable:
    """One Langfuse trace as one attempt."""
    if not trace.observations:
        return Unreadable(
            source_file, trace.record, f"trace {trace.key} has no observations in this file", trace_id=trace.key
        )
    observations = sorted(trace.observations, key=lambda o: (o.start_ns is None, o.start_ns or 0, o.row))
    trace.observations = observations
    ids = {o.id for o in observations}
    root = next((o for o in observations if o.is_root), None) or next(
        (o for o in observations if o.parent is None or o.parent not in ids), observations[0]
    )
    generations = [o for o in observations if o.type == "GENERATION"]
    defects = list(trace.defects)
    rounds = []
    for obs in filter(_is_retriever, observations):
        found, problems = _round(obs, doc_path)
        defects += problems
        rounds += [found] if found is not None else []
    input_text = next(filter(None, (_plain(r.get("input")) for r in trace.trace_rows)), None) or _plain(root.input)
    if input_text is None and generations:
        input_text = _plain(generations[0].input)
    if generations:
        answer = (_assistant(generations[-1].output, generations[-1].id) or {}).get("content")
        prompt = _prompt(generations[-1].input)
    else:
        outputs = [r.get("output") for r in trace.trace_rows] + ([root.output] if not _is_retriever(root) else [])
        answer, prompt = next(filter(None, map(_answer, outputs)), None), None
    failing = next((o for o in [root, *generations] if o.level == "ERROR"), None)
    error = (
        failing.status_message or f"{failing.type.lower()} observation {failing.name or failing.id} has level ERROR"
        if failing is not None
        else None
    )
    return SourceAttempt(
        source_file=source_file,
        record=trace.record,
        key=trace.key,
        started_ns=min((o.start_ns for o in observations if o.start_ns is not None), default=None),
        case_key=_case_key(case_key, trace, root),
        input=input_text,
        rounds=rounds,
        prompt=prompt,
        answer=answer,
        messages=_conversation(input_text, observations),
        usage=_usage(observations),
        status="error" if failing is not None else "ok",
        error=error,
        defects=defects,
    )


def read_langfuse(
    path: str | Path, *, case_key: str = "case_id", doc_path: str | None = None
) -> Iterator[SourceAttempt | Unreadable]:
    """Every trace of a Langfuse observation export as an attempt, and an Unreadable for each row it cannot read."""
    path = Path(path)
    for item in export_traces(path):
        if isinstance(item, Unreadable):
            yield item
        elif item.observations or not item.defects:  # a trace whose every row was unreadable is already reported
            try:
                yield convert_trace(item, path.name, case_key=case_key, doc_path=doc_path)
            except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
                # a value of a shape this reader does not expect: this trace is a reject, the import goes on
                yield Unreadable(
                    path.name,
                    item.record,
                    f"trace {item.key} could not be read: {type(exc).__name__}: {exc}",
                    trace_id=item.key,
                )


def import_langfuse(
    source: str | Path, run: ImportRun, matching: Matching = Matching(), *, doc_path: str | None = None
) -> ImportSummary:
    """Import a Langfuse observation export as one run: one attempt per Langfuse trace."""
    path = Path(source)
    if not path.is_file():
        raise ImporterError(f"no such file: {path}")
    attempts = read_langfuse(path, case_key=matching.case_key, doc_path=doc_path)
    return import_attempts(FORMAT, [path], attempts, run, matching)


__all__ = ["FORMAT", "convert_trace", "import_langfuse", "read_langfuse"]
