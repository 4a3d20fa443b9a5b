"""`eval-pipeline import langfuse FILE`: Langfuse observations, one attempt per Langfuse trace.

Reads an observation export as Langfuse writes it: the blob-storage export (JSONL, CSV or Parquet, gzip or not,
snake_case columns) and the public API or UI export (a JSON list, an API page `{"data": [...]}`, a trace with its
`observations`; camelCase fields). In CSV and Parquet, `input`, `output`, `metadata`, `usage_details` and
`cost_details` are JSON text. The file is read columnar (polars) and grouped by trace; only the trace being converted
is held as Python objects. docs/importers.md has the field mapping.

Per trace, in start-time order: RETRIEVER observations (and spans named like a retriever) are retrieval rounds, their
`output` read in the common shapes (a list of documents or strings, `{documents: [...]}`, LangChain `Document` dicts,
LlamaIndex nodes) or at the field `doc_path` names; GENERATION outputs are the agent's turns (their tool calls the
dispatch), the last one's text the answer and its input the prompt; TOOL observations answer the calls (else a tool
message in a later generation's input does); a TOOL observation no generation dispatched is a call of its own. Usage
and cost are summed over the observations, latency is the trace's span, and level ERROR on the root observation or a
generation makes the attempt's status `error`.
"""

from __future__ import annotations

import ast
import gzip
import io
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from eval_pipeline.importers.attempts import ImportRun, Matching, import_attempts
from eval_pipeline.importers.common import ImporterError, ImportSummary
from eval_pipeline.importers.source import SourceAttempt, SourceDoc, SourceRound, Unreadable

FORMAT = "langfuse"
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_LONG_FRACTION = re.compile(r"\.(\d{6})\d+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_JSON_FIELDS = ("input", "output", "metadata", "trace_metadata", "usage_details", "cost_details", "usage")
_DOC_LISTS = ("documents", "docs", "results", "hits", "nodes", "source_nodes", "matches", "chunks", "contexts")
_DOC_TEXT = ("page_content", "content", "text", "chunk", "body")
_DOC_ID = ("id", "doc_id", "id_", "document_id")
_DOC_SCORE = ("score", "relevance_score", "similarity")
_QUERY_KEYS = ("query", "question", "input", "user_input", "text", "prompt")
_ANSWER_KEYS = ("content", "text", "output", "answer", "result", "response")
_INPUT_TOKENS = ("input", "input_tokens", "prompt_tokens")
_OUTPUT_TOKENS = ("output", "output_tokens", "completion_tokens")
_TOTAL_COST = ("calculated_total_cost", "total_cost", "total_price")


def snake(name: str) -> str:
    """A field name in snake_case (Langfuse's API writes camelCase, its blob export snake_case)."""
    return _CAMEL.sub(r"_\1", name).lower()


@dataclass(slots=True)
class Observation:
    """One Langfuse observation, its JSON fields decoded."""

    row: int
    id: str
    type: str
    name: str | None
    parent: str | None
    is_root: bool  # the export's is_root_observation: an app root the SDK marked, even with a parent
    start_ns: int | None
    end_ns: int | None
    input: Any
    output: Any
    metadata: dict[str, Any]
    trace_metadata: dict[str, Any]
    level: str | None
    status_message: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost: float | None


@dataclass
class _Trace:
    """The rows of one trace: its observations, its trace-level rows, and what could not be read."""

    key: str
    record: int
    observations: list[Observation] = field(default_factory=list)
    trace_rows: list[dict[str, Any]] = field(default_factory=list)
    defects: list[str] = field(default_factory=list)


# ---- values ------------------------------------------------------------------------------------------------------


def _decoded(value: Any) -> Any:
    """A JSON-text field as its JSON value (an object, array or string); any other value as it is."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def _mapping(value: Any) -> dict[str, Any]:
    """A map field as a dict: a JSON object, its JSON text, or Parquet's list of {key, value} entries."""
    value = _decoded(value)
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and all(isinstance(e, dict) and "key" in e for e in value):
        return {str(e["key"]): _decoded(e.get("value")) for e in value}
    return {}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(value) if isinstance(value, str) and value.strip() else None
    except ValueError:
        return None


def _first_number(values: Mapping[str, Any], keys: Sequence[str]) -> float | None:
    return next((n for n in (_number(values.get(k)) for k in keys) if n is not None), None)


def _ns(value: Any) -> int | None:
    """A timestamp as nanoseconds since the epoch: ISO 8601 text (UTC when it has no offset), a datetime, or a
    number of seconds, milliseconds, microseconds or nanoseconds (told apart by size)."""
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, int | float) and not isinstance(value, bool):
        scale = next(s for limit, s in ((1e17, 1), (1e14, 1_000), (1e11, 1_000_000), (0, 1_000_000_000)) if abs(value) >= limit or limit == 0)
        return int(value * scale)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(_LONG_FRACTION.sub(r".\1", value.strip()))
        except ValueError:
            raise ValueError(f"{value[:40]!r} is not a timestamp") from None
    if not isinstance(value, datetime):
        raise ValueError(f"a timestamp is a {type(value).__name__}")
    moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _id(value: Any) -> str | None:
    """An identifier field as text (ids may arrive as numbers); None when absent or a boolean."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    return str(value) if isinstance(value, str | int) else None


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


# ---- reading the file --------------------------------------------------------------------------------------------


def _document_rows(document: Any) -> list[Any]:
    """The rows of a JSON document: a list of them, an API page `{data: [...]}`, or one trace with its observations."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("data"), list):
        return document["data"]
    if isinstance(document, dict) and isinstance(document.get("trace"), dict):
        return [{**document["trace"], "observations": document.get("observations") or []}]
    return [document]


def _lines_frame(lines: pl.Series) -> pl.DataFrame:
    """JSON rows as a frame of their text, with the row number and the trace each belongs to."""
    frame = pl.DataFrame({"__line": lines}).with_row_index("__row", offset=1)
    field_of = pl.col("__line").str.json_path_match
    trace = pl.coalesce(field_of("$.trace_id"), field_of("$.traceId"),
                        pl.when(field_of("$.type").is_null()).then(field_of("$.id")))
    return frame.with_columns(trace.alias("__trace"))


def _table_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """CSV or Parquet rows with snake_case columns, the row number and the trace each belongs to."""
    renamed: dict[str, str] = {}
    for column in frame.columns:
        if snake(column) not in frame.columns and snake(column) not in renamed.values():
            renamed[column] = snake(column)
    frame = frame.rename(renamed).with_row_index("__row", offset=1)
    keys = [pl.col("trace_id").cast(pl.String)] if "trace_id" in frame.columns else []
    if "id" in frame.columns:
        trace_row = pl.col("type").is_null() if "type" in frame.columns else pl.lit(True)
        keys.append(pl.when(trace_row).then(pl.col("id").cast(pl.String)))
    return frame.with_columns((pl.coalesce(keys) if keys else pl.lit(None, pl.String)).alias("__trace"))


def _raw_bytes(path: Path) -> tuple[str, bytes | None]:
    """(the name that tells the format, the decompressed bytes of a gzip file, else None: polars reads the path)."""
    if path.suffix.lower() == ".gz":
        try:
            return path.stem, gzip.decompress(path.read_bytes())
        except (OSError, EOFError) as exc:
            raise ImporterError(f"{path}: not a readable gzip file ({exc})") from exc
    return path.name, None


def _frame(path: Path) -> pl.DataFrame:
    """The file's rows as a frame: `__row`, `__trace`, and either `__line` (JSON) or the export's columns."""
    name, data = _raw_bytes(path)
    source: Any = io.BytesIO(data) if data is not None else path
    head = data[:4096] if data is not None else path.open("rb").read(4096)
    suffix = Path(name).suffix.lower()
    try:
        if head.startswith(b"PAR1") or suffix in (".parquet", ".pq"):
            return _table_frame(pl.read_parquet(source))
        stripped = head.lstrip()
        if suffix == ".csv" or not stripped.startswith((b"{", b"[")):
            return _table_frame(pl.read_csv(source, infer_schema=False))
        lines = pl.read_csv(source, has_header=False, separator="\x1f", quote_char=None, new_columns=["line"],
                            schema={"line": pl.String}, truncate_ragged_lines=True)["line"]
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise ImporterError(f"{path}: cannot read it as a Langfuse export ({exc})") from exc
    filled = lines.drop_nulls().filter(lines.drop_nulls().str.strip_chars() != "")
    if stripped.startswith(b"[") or filled.len() <= 1 or not _parses(filled[0]):
        # one JSON document (an array, an API page, a trace download, pretty-printed or not)
        text = data if data is not None else path.read_bytes()
        try:
            rows = _document_rows(orjson.loads(text))
        except orjson.JSONDecodeError as exc:
            raise ImporterError(f"{path}: neither JSONL nor one JSON document ({exc})") from exc
        lines = pl.Series("line", [orjson.dumps(r).decode() for r in rows], dtype=pl.String)
    return _lines_frame(lines)


def _parses(line: str) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _row(values: dict[str, Any]) -> dict[str, Any] | str:
    """One row as a dict with snake_case keys, or why it cannot be read."""
    if "__line" in values:
        if values["__line"] is None or not values["__line"].strip():
            return "an empty line"
        try:
            raw = orjson.loads(values["__line"])
        except orjson.JSONDecodeError as exc:
            return f"invalid JSON: {exc}"
        if not isinstance(raw, dict):
            return f"not a JSON object: a {type(raw).__name__}"
    else:
        raw = {k: v for k, v in values.items() if not k.startswith("__") and v is not None}
    return {snake(k): v for k, v in raw.items()}


def _observation(row: int, raw: Mapping[str, Any]) -> Observation:
    """One observation row; ValueError naming the field that cannot be read."""
    obs_id = _id(raw.get("id"))
    if obs_id is None:
        raise ValueError("an observation without an id")
    usage = {snake(k): v for k, v in {**_mapping(raw.get("usage")), **_mapping(raw.get("usage_details"))}.items()}
    costs = {k: n for k, n in ((k, _number(v)) for k, v in _mapping(raw.get("cost_details")).items()) if n is not None}
    cost = costs.get("total", sum(costs.values()) if costs else _first_number({**usage, **raw}, _TOTAL_COST))
    tokens = [_first_number(usage, keys) if _first_number(usage, keys) is not None else _number(raw.get(keys[-1]))
              for keys in (_INPUT_TOKENS, _OUTPUT_TOKENS)]
    try:
        start, end = _ns(raw.get("start_time")), _ns(raw.get("end_time"))
    except ValueError as exc:
        raise ValueError(f"observation {obs_id}: {exc}") from None
    return Observation(
        row=row, id=obs_id, type=str(raw.get("type") or "").upper(), name=raw.get("name") if isinstance(raw.get("name"), str) else None,
        parent=_id(raw.get("parent_observation_id")), is_root=raw.get("is_root_observation") in (True, "true", "True"), start_ns=start, end_ns=end,
        input=_decoded(raw.get("input")), output=_decoded(raw.get("output")), metadata=_mapping(raw.get("metadata")),
        trace_metadata=_mapping(raw.get("trace_metadata")), level=str(raw["level"]).upper() if raw.get("level") else None,
        status_message=raw.get("status_message") or None,
        input_tokens=int(tokens[0]) if tokens[0] is not None else None,
        output_tokens=int(tokens[1]) if tokens[1] is not None else None, cost=cost)


def _collect(trace: _Trace, row: int, raw: dict[str, Any], source_file: str) -> Iterator[Unreadable]:
    """Add one row to its trace: an observation, or a trace-level row with the observations nested in it."""
    observations = [raw]
    if raw.get("type") is None:
        nested = raw.pop("observations", None)
        trace.trace_rows.append({k: _decoded(v) for k, v in raw.items()})
        observations = nested if isinstance(nested, list) else []
    for item in observations:
        try:
            if not isinstance(item, dict):
                raise ValueError(f"an observation is a {type(item).__name__}, not an object")
            trace.observations.append(_observation(row, {snake(k): v for k, v in item.items()}))
        except (ValueError, TypeError) as exc:
            trace.defects.append(f"row {row} could not be read: {exc}")
            yield Unreadable(source_file, row, str(exc), trace_id=trace.key)


def _traces(path: Path) -> Iterator[_Trace | Unreadable]:
    """The file's traces in the order of their first row, each with all of its rows; an Unreadable for each row
    that names no trace or cannot be read."""
    frame = _frame(path)
    lost = frame.filter(pl.col("__trace").is_null())
    for values in lost.iter_rows(named=True):
        raw = _row(values)
        reason = raw if isinstance(raw, str) else ("an observation without a trace_id" if raw.get("type") is not None
                                                   else "a row with no trace_id, type or id: neither an observation nor a trace")
        yield Unreadable(path.name, values["__row"], reason)
    kept = (frame.filter(pl.col("__trace").is_not_null())
            .with_columns(pl.col("__row").min().over("__trace").alias("__first")).sort("__first", "__row"))
    offset = 0
    for key, size in kept.group_by("__first", maintain_order=True).len().iter_rows():
        part = kept.slice(offset, size)
        offset += size
        trace = _Trace(part["__trace"][0], key)
        for values in part.iter_rows(named=True):
            raw = _row(values)
            if isinstance(raw, str):
                trace.defects.append(f"row {values['__row']} could not be read: {raw}")
                yield Unreadable(path.name, values["__row"], raw, trace_id=trace.key)
                continue
            yield from _collect(trace, values["__row"], raw, path.name)
        yield trace


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
            inner.score = _first_number(item, _DOC_SCORE)
        return inner
    metadata = _mapping(item.get("metadata"))
    text = next((s[k] for s in (item, metadata) for k in _DOC_TEXT if isinstance(s.get(k), str)), None)
    doc_id = next((i for i in (_id(item.get(k)) for k in _DOC_ID) if i), None)
    score = next((n for n in (_first_number(s, _DOC_SCORE) for s in (item, metadata)) if n is not None), None)
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
    """A tool call in OpenAI form from an OpenAI call, a LangChain call `{name, args, id}` or an Anthropic `tool_use`."""
    function = call["function"] if isinstance(call.get("function"), dict) else call
    arguments = function.get("arguments", function.get("args", function.get("input")))
    return {"id": _id(call.get("id")) or fallback_id, "type": "function",
            "function": {"name": function.get("name"), "arguments": arguments}}


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
    calls = [c for c in output.get("tool_calls") or (output.get("additional_kwargs") or {}).get("tool_calls") or []
             if isinstance(c, dict)]
    if isinstance(output.get("function_call"), dict):
        calls.append({"function": output["function_call"]})
    if isinstance(content, list):
        calls += [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
        content = [b for b in content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
    text = _content_text(content) if content is not None or calls else _answer(output)
    return {"role": "assistant", "content": text,
            "tool_calls": [_openai_call(c, f"{obs_id}-{n}") for n, c in enumerate(calls, start=1)]}


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
        if isinstance(where, dict) and _id(where.get("tool_call_id")):
            return _id(where["tool_call_id"])
    return _id(obs.input.get("id")) if isinstance(obs.input, dict) and obs.input.get("type") == "tool_call" else None


def _result_text(output: Any) -> Any:
    """A tool's result as a tool message's content: text, or JSON text of an object (a LangChain ToolMessage's content)."""
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


def _answering(call: Mapping[str, Any], after: Observation, candidates: Sequence[Observation], used: set[str]) -> Observation | None:
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
    in_inputs = {m["tool_call_id"]: m for g in generations for m in _messages_of(g.input) or []
                 if m.get("role") == "tool" and isinstance(m.get("tool_call_id"), str)}
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
            call = {"id": obs.id, "type": "function", "function": {"name": obs.name, "arguments": _arguments(obs.input)}}
            turns[position] = [{"role": "assistant", "content": None, "tool_calls": [call]}, _tool_message(obs.id, obs)]
    opening = [{"role": "user", "content": input_text}] if input_text else []
    return opening + [m for position in sorted(turns) for m in turns[position]]


# ---- one trace, one attempt --------------------------------------------------------------------------------------


def _key_in(metadata: Mapping[str, Any], key: str) -> str | None:
    """The case key in a metadata object, or in the span attributes Langfuse keeps under `attributes`."""
    for scope in (metadata, metadata.get("attributes")):
        for name in (key, f"eval.{key}"):
            found = _id(scope.get(name)) if isinstance(scope, dict) else None
            if found:
                return found
    return None


def _case_key(key: str, trace: _Trace, root: Observation) -> str | None:
    """The case key: trace metadata (a trace row's, or the trace metadata on observations), then the root
    observation's metadata, then any observation's in start order."""
    scopes = [_mapping(r.get("metadata")) for r in trace.trace_rows] + [o.trace_metadata for o in trace.observations]
    scopes += [root.metadata] + [o.metadata for o in trace.observations]
    return next((k for k in (_key_in(s, key) for s in scopes) if k), None)


def _total(values: Sequence[float | int | None]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _usage(observations: Sequence[Observation]) -> dict[str, Any] | None:
    """Tokens and cost summed over the observations; latency from the first start to the last end."""
    starts = [o.start_ns for o in observations if o.start_ns is not None]
    ends = [o.end_ns for o in observations if o.end_ns is not None]
    usage = {"input_tokens": _total([o.input_tokens for o in observations]),
             "output_tokens": _total([o.output_tokens for o in observations]),
             "cost_usd": _total([o.cost for o in observations]),
             "latency_ms": (max(ends) - min(starts)) / 1e6 if starts and ends else None}
    return usage if any(v is not None for v in usage.values()) else None


def convert_trace(trace: _Trace, source_file: str, *, case_key: str = "case_id", doc_path: str | None = None
                  ) -> SourceAttempt | Unreadable:
    """One Langfuse trace as one attempt."""
    if not trace.observations:
        return Unreadable(source_file, trace.record, f"trace {trace.key} has no observations in this file", trace_id=trace.key)
    observations = sorted(trace.observations, key=lambda o: (o.start_ns is None, o.start_ns or 0, o.row))
    trace.observations = observations
    ids = {o.id for o in observations}
    root = next((o for o in observations if o.is_root), None) or next(
        (o for o in observations if o.parent is None or o.parent not in ids), observations[0])
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
    error = (failing.status_message or f"{failing.type.lower()} observation {failing.name or failing.id} has level ERROR"
             if failing is not None else None)
    return SourceAttempt(
        source_file=source_file, record=trace.record, key=trace.key,
        started_ns=min((o.start_ns for o in observations if o.start_ns is not None), default=None),
        case_key=_case_key(case_key, trace, root), input=input_text, rounds=rounds, prompt=prompt, answer=answer,
        messages=_conversation(input_text, observations), usage=_usage(observations),
        status="error" if failing is not None else "ok", error=error, defects=defects)


def read_langfuse(path: str | Path, *, case_key: str = "case_id", doc_path: str | None = None
                  ) -> Iterator[SourceAttempt | Unreadable]:
    """Every trace of a Langfuse observation export as an attempt, and an Unreadable for each row it cannot read."""
    path = Path(path)
    for item in _traces(path):
        if isinstance(item, Unreadable):
            yield item
        elif item.observations or not item.defects:  # a trace whose every row was unreadable is already reported
            yield convert_trace(item, path.name, case_key=case_key, doc_path=doc_path)


def import_langfuse(source: str | Path, run: ImportRun, matching: Matching = Matching(), *, doc_path: str | None = None
                    ) -> ImportSummary:
    """Import a Langfuse observation export as one run: one attempt per Langfuse trace."""
    path = Path(source)
    if not path.is_file():
        raise ImporterError(f"no such file: {path}")
    attempts = read_langfuse(path, case_key=matching.case_key, doc_path=doc_path)
    return import_attempts(FORMAT, [path], attempts, run, matching)


__all__ = ["FORMAT", "Observation", "convert_trace", "import_langfuse", "read_langfuse", "snake"]
