"""Source attempts to a run, the same for every trace importer.

Document ids, golden-case matching, attempt numbers, cases written from the source's own gold, a new corpus version
for unseen documents, the registry and the files. Over 400 lines because these steps share one writer's state
(built traces, cases, rejects, the documents used) from the first attempt to the written run.

The rules (docs/importers.md states them for users):
- A document's id is the source's id, else its metadata key (`doc_id`, `id`, `source` by default), else the id of
  the corpus document with exactly its text, else `doc-` and the first 16 hex digits of the SHA-256 of its text, so
  the same text has the same id in every run and reference contexts given as text line up with retrieved ones.
- With golden cases under cases/<dataset_version>/, an attempt meets its case by the case key the source carries,
  else by its exact input text; one that meets none is a reject with its reason. Without golden cases, cases are
  written from what the source holds; a trace that could only be a RAG case but carries no reference documents is
  a reject, said at import time (the pipeline could not score its retrieval).
- Repeated attempts of one case are numbered 1..n in start-time order.
- Documents with text the corpus version lacks are written to a new corpus version; no version is ever overwritten.
"""

from __future__ import annotations

import gc
import hashlib
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from eval_pipeline.contracts.cases import Case
from eval_pipeline.contracts.identifiers import identifier_problem, validate_identifier
from eval_pipeline.contracts.traces import Trace
from eval_pipeline.importers.common import (
    DEFAULT_CORPUS_VERSION,
    RARE_COLLECTIONS,
    ImporterError,
    ImportSummary,
    RunFiles,
    contract_problem,
    import_mode,
    import_reject,
    json_line,
    manifest,
    resolve_registry,
    same_case,
    slug,
    unknown_tools_note,
    usage_record,
    write_run,
)
from eval_pipeline.importers.doc_ids import DOC_ID_KEYS, DocIds, plan_corpus
from eval_pipeline.importers.import_run import ImportRun
from eval_pipeline.importers.openai_messages import UnreadableMessages, called_tools, first_user_text, messages_to_steps
from eval_pipeline.importers.source import SourceAttempt, SourceDoc, SourceRound, Unreadable
from eval_pipeline.io import inputs
from eval_pipeline.io.storage import InputError, Location, open_location


@dataclass(frozen=True, kw_only=True)
class Matching:
    """How source records meet golden cases (`case_key`) and corpus documents (`doc_id_keys` of their metadata)."""

    case_key: str = "case_id"
    doc_id_keys: tuple[str, ...] = DOC_ID_KEYS


@dataclass
class Golden:
    """The golden cases of the dataset version, by id and by exact input text."""

    cases: dict[str, dict[str, Any]]
    by_input: dict[str, list[str]]

    @classmethod
    def load(cls, location: Location, dataset_version: str) -> Golden | None:
        if not location.is_dir("cases", dataset_version):
            return None
        loaded = inputs.load_cases(location, dataset_version)
        rows = loaded.frame.select("case_id", "case_revision", "input", "lanes").to_dicts()
        by_input: dict[str, list[str]] = defaultdict(list)
        for row in rows:
            by_input[row["input"] or ""].append(row["case_id"])
        return cls({row["case_id"]: row for row in rows}, dict(by_input))

    def match(self, attempt: SourceAttempt, input_text: str, key: str) -> tuple[str | None, str | None]:
        """(case id, None) of the attempt's golden case, or (None, why it has none)."""
        if attempt.case_key is not None and attempt.case_key in self.cases:
            return attempt.case_key, None
        found = self.by_input.get(input_text, []) if input_text else []
        if len(found) == 1:
            return found[0], None
        keyed = (
            f"its {key} {attempt.case_key!r} is no case of the dataset"
            if attempt.case_key is not None
            else f"it has no {key}"
        )
        if found:
            return None, f"{keyed}, and its input is the input of {len(found)} cases ({', '.join(sorted(found)[:5])})"
        return None, f"{keyed}, and no case has its input text ({len(input_text)} characters)"


class _Built:
    """The traces built so far, held to the trace contract and encoded without their trace id and attempt number,
    waiting for their attempt numbers. Kept as columns of strings, numbers and bytes, not an object a trace: the
    garbage collector does not walk them, and 100k traces stay small."""

    def __init__(self) -> None:
        self.case_ids: list[str] = []
        self.started: list[int] = []
        self.records: list[int] = []
        self.source_files: list[str] = []
        self.bodies: list[bytes] = []  # each trace's JSON object without trace_id and attempt
        self.incomplete: dict[int, str] = {}  # position -> why the trace is not ok

    def add(
        self, case_id: str, started_ns: int | None, record: int, source_file: str, body: bytes, incomplete: str | None
    ) -> None:
        if incomplete is not None:
            self.incomplete[len(self.bodies)] = incomplete
        self.case_ids.append(case_id)
        self.started.append(started_ns if started_ns is not None else 2**63)
        self.records.append(record)
        self.source_files.append(source_file)
        self.bodies.append(body)

    def __len__(self) -> int:
        return len(self.bodies)


def _round(number: int, source: SourceRound, ids: DocIds) -> dict[str, Any]:
    def ranked(docs: Sequence[SourceDoc]) -> list[dict[str, Any]]:
        return [{"doc_id": ids.resolve(d), "score": d.score} for d in docs]

    return {
        "round": number,
        "tool": source.tool,
        "variant": None,
        "query": source.query,
        "candidates": ranked(source.candidates) if source.candidates is not None else None,
        "hits": ranked(source.hits),
    }


def _context(attempt: SourceAttempt, ids: DocIds) -> list[dict[str, Any]] | None:
    """The chunks that reached the model: the source's context, else the retrieved docs whose text (the source's,
    else the corpus version's for a hit given by id alone) is in the prompt."""
    if attempt.context is not None:
        docs = attempt.context
    elif attempt.prompt is not None:
        prompt = attempt.prompt
        docs = [
            d
            for r in attempt.rounds
            for d in r.hits
            if (text := ids.text_of(d, ids.resolve(d)).strip()) and text in prompt
        ]
    else:
        return None
    chunks: dict[str, dict[str, Any]] = {}
    for doc in docs:
        doc_id = ids.resolve(doc)
        chunks.setdefault(doc_id, {"doc_id": doc_id, "text": ids.text_of(doc, doc_id), "tokens": None})
    return list(chunks.values())


def _steps(attempt: SourceAttempt) -> tuple[list[dict[str, Any]] | None, list[str]]:
    if attempt.messages is None:
        return None, []
    try:
        return messages_to_steps(attempt.messages)
    except UnreadableMessages as exc:
        return None, [str(exc)]


def build_trace(attempt: SourceAttempt, ids: DocIds) -> tuple[dict[str, Any], list[str]]:
    """The trace of an attempt (no id or attempt number yet) and the tools it called."""
    steps, defects = _steps(attempt)
    defects = [*attempt.defects, *defects]
    status, error = attempt.status, attempt.error
    if defects:
        status, error = "error", "; ".join(filter(None, [error, "import: " + "; ".join(defects)]))
    input_text = attempt.input if attempt.input is not None else (first_user_text(steps) if steps else None)
    trace = {
        "status": status,
        "error": error,
        "input": input_text,
        "retrieval": [_round(n, r, ids) for n, r in enumerate(attempt.rounds, start=1)] or None,
        "context": _context(attempt, ids),
        "answer": {"text": attempt.answer, "citations": []} if attempt.answer is not None else None,
        "steps": steps,
        "final_state": None,
        "usage": usage_record(attempt.usage),
    }
    return trace, called_tools(steps or [])


def source_case(
    attempt: SourceAttempt, case_id: str, input_text: str, trace: Mapping[str, Any], ids: DocIds
) -> tuple[dict[str, Any] | None, str | None]:
    """(the case the source's own gold states, None) or (None, why the attempt states no case: another attempt of
    the case may); ValueError when the gold breaks the case contract."""
    references = [ids.resolve(d) for d in attempt.reference_docs or []]
    calls = attempt.reference_tool_calls or []
    has_calls = any(s["kind"] == "tool_call" for s in trace["steps"] or [])
    lanes = (["rag"] if references else []) + (["agent"] if calls or has_calls else [])
    if not lanes:
        if trace["retrieval"]:
            return None, (
                "no golden case and no reference documents: nothing to score retrieval against; put the "
                "golden cases under cases/<dataset version> (or give the source's reference contexts)"
            )
        if attempt.answer is not None:
            return None, (
                "no golden case and no reference documents or tool calls: a RAG case needs the documents "
                "that answer it; put the golden cases under cases/<dataset version>"
            )
        return None, "no golden case and nothing to score: no retrieval, answer, tool call or reference"
    case: dict[str, Any] = {"case_id": case_id, "case_revision": 1, "lanes": lanes, "input": input_text}
    if references:
        case["required_doc_ids"] = list(dict.fromkeys(references))
    if attempt.reference_answer:
        case["reference_answer"] = attempt.reference_answer
    if "agent" in lanes:
        case["reference_tool_calls"] = calls
        case["tool_match"] = attempt.tool_match or ("unordered" if calls else "goal_only")
    problem = contract_problem(Case, case)
    if problem:
        raise ValueError(f"the source's gold breaks the case contract: {problem}")
    return case, None


def _case_id_of(attempt: SourceAttempt, input_text: str) -> str | None:
    if attempt.case_key:
        return attempt.case_key
    return "q-" + hashlib.sha1(input_text.encode("utf-8")).hexdigest()[:10] if input_text else None


def _versions(fmt: str, sources: Sequence[Path], run: ImportRun) -> tuple[str, str]:
    dataset_version = run.dataset_version or f"{fmt}-{slug(Path(sources[0]).stem) if sources else 'import'}"
    try:
        validate_identifier(run.run_id, "run id")
        validate_identifier(dataset_version, "dataset version")
        for value, what in ((run.environment_version, "environment version"), (run.corpus_version, "corpus version")):
            if value is not None:
                validate_identifier(value, what)
    except ValueError as exc:
        raise ImporterError(str(exc)) from exc
    return dataset_version, run.environment_version or dataset_version


@contextmanager
def _rare_collections() -> Iterator[None]:
    """The cyclic garbage collector rarely, while attempts are read and built. Their objects are freed by reference
    counting as each attempt is written; with the default thresholds the collector walked every live object about
    thirty times in a 10k-trace import, 15 to 25 % of its time, and found almost nothing."""
    before = gc.get_threshold()
    gc.set_threshold(*RARE_COLLECTIONS)
    try:
        yield
    finally:
        gc.set_threshold(*before)


@dataclass(slots=True)
class _Waiting:
    """An attempt with no gold of its own and no golden case: written if another attempt states its case."""

    case_id: str
    started_ns: int | None
    record: int
    source_file: str
    body: bytes
    incomplete: str | None
    tools: list[str]
    docs: set[str]
    why: str


class _Writer:
    """One import: attempts taken one by one into built traces, cases and rejects."""

    def __init__(
        self, fmt: str, run: ImportRun, matching: Matching, golden: Golden | None, ids: DocIds, summary: ImportSummary
    ) -> None:
        self.fmt, self.run, self.matching, self.golden, self.ids, self.summary = (
            fmt,
            run,
            matching,
            golden,
            ids,
            summary,
        )
        self.rejects: list[dict[str, Any]] = []
        self.built = _Built()
        self.cases: dict[str, dict[str, Any]] = {}
        self.called: list[str] = []
        self.used: set[str] = set()  # ids of the documents written traces and cases name
        self.waiting: list[_Waiting] = []

    def refuse(self, source_file: str, record: int, reason: str, **keys: Any) -> None:
        self.rejects.append(import_reject(self.run.run_id, self.fmt, source_file, record, reason, **keys))

    def _case_of(
        self, attempt: SourceAttempt, trace: Mapping[str, Any]
    ) -> tuple[str | None, dict[str, Any] | None, str | None]:
        """(case id, the case the attempt's own gold states, why it has none)."""
        input_text = trace["input"] or ""
        if self.golden is not None:
            case_id, why = self.golden.match(attempt, input_text, self.matching.case_key)
            return case_id, None, why
        case_id = _case_id_of(attempt, input_text)
        if case_id is None:
            return None, None, f"no {self.matching.case_key} and no input text: the trace names no case"
        case, why = source_case(attempt, case_id, input_text, trace, self.ids)
        if case is not None and case_id in self.cases and not same_case(self.cases[case_id], case):
            raise ValueError(f"its gold differs from an earlier record of case {case_id!r}")
        return case_id, case, why

    def take(self, attempt: SourceAttempt | Unreadable) -> None:
        """Build one attempt's trace, or make it a reject with its reason."""
        self.summary.records += 1
        if isinstance(attempt, Unreadable):
            self.refuse(
                attempt.source_file, attempt.record, attempt.reason, case_id=attempt.case_id, trace_id=attempt.trace_id
            )
            return
        case_id: str | None = None
        try:
            trace, tools = build_trace(attempt, self.ids)
            case_id, case, why = self._case_of(attempt, trace)
        except ValueError as exc:
            self.ids.take_touched()
            self.refuse(attempt.source_file, attempt.record, str(exc), case_id=case_id)
            return
        docs = self.ids.take_touched()
        if case_id is None or (why is not None and self.golden is not None):
            self.refuse(attempt.source_file, attempt.record, str(why), case_id=case_id)
            return
        revision = self.golden.cases[case_id]["case_revision"] if self.golden is not None else 1
        trace = {"case_id": case_id, "case_revision": revision, **trace}
        # the contract is checked with attempt 1: the number given later changes nothing the contract checks
        problem = contract_problem(Trace, {"trace_id": _trace_id(self.run.run_id, case_id, 1), "attempt": 1, **trace})
        if problem is not None:
            self.refuse(attempt.source_file, attempt.record, problem, case_id=case_id)
            return
        incomplete = None if trace["status"] == "ok" else (trace["error"] or trace["status"])
        if why is not None:  # no gold of its own: another attempt of its case may state the case
            self.waiting.append(
                _Waiting(
                    case_id,
                    attempt.started_ns,
                    attempt.record,
                    attempt.source_file,
                    json_line(trace),
                    incomplete,
                    tools,
                    docs,
                    why,
                )
            )
            return
        if case is not None:
            self.cases.setdefault(case_id, case)
        self._add(
            case_id, attempt.started_ns, attempt.record, attempt.source_file, json_line(trace), incomplete, tools, docs
        )

    def _add(
        self,
        case_id: str,
        started_ns: int | None,
        record: int,
        source_file: str,
        body: bytes,
        incomplete: str | None,
        tools: list[str],
        docs: set[str],
    ) -> None:
        self.built.add(case_id, started_ns, record, source_file, body, incomplete)
        self.called += tools
        self.used |= docs

    def settle(self) -> None:
        """The waiting attempts whose case another attempt stated are written; the others are rejects."""
        for item in self.waiting:
            if item.case_id in self.cases:
                self._add(
                    item.case_id,
                    item.started_ns,
                    item.record,
                    item.source_file,
                    item.body,
                    item.incomplete,
                    item.tools,
                    item.docs,
                )
            else:
                self.refuse(item.source_file, item.record, item.why, case_id=item.case_id)
        self.waiting.clear()


def import_attempts(
    fmt: str,
    sources: Sequence[Path],
    attempts: Iterable[SourceAttempt | Unreadable],
    run: ImportRun,
    matching: Matching = Matching(),
) -> ImportSummary:
    """Write the attempts of a source as a run under the data root; the summary of what was written and rejected."""
    dataset_version, environment_version = _versions(fmt, sources, run)
    location = open_location(run.data_root)
    if location.exists("traces", run.run_id, "run.yaml") and not run.overwrite:
        raise ImporterError(
            f"run {run.run_id!r} already exists at {location.uri_of('traces', run.run_id)}; "
            "choose another --run or pass --force to replace it"
        )
    try:
        golden = Golden.load(location, dataset_version)
        ids = DocIds.of_corpus(location, run.corpus_version, matching.doc_id_keys)
    except InputError as exc:
        raise ImporterError(str(exc)) from exc
    label = ", ".join(str(s) for s in sources)
    summary = ImportSummary(
        fmt,
        label,
        run.run_id,
        str(run.data_root),
        dataset_version,
        environment_version,
        run.corpus_version or DEFAULT_CORPUS_VERSION,
    )
    writer = _Writer(fmt, run, matching, golden, ids, summary)
    with _rare_collections():
        for attempt in attempts:
            writer.take(attempt)
        writer.settle()
    summary.notes += _golden_notes(golden, writer.cases, dataset_version) + ids.notes(writer.used)
    return _finish(summary, location, run, writer, environment_version)


def _trace_id(run_id: str, case_id: str, attempt: int) -> str:
    return f"{run_id}:{case_id}#{attempt}"


def _numbered(run_id: str, writer: _Writer) -> tuple[list[tuple[str, int, int]], list[dict[str, str]]]:
    """(trace id, attempt, position) of every trace, attempts 1..n per case in start-time order, and the traces
    that are not ok; a trace whose id breaks the identifier rules (a long case id, many attempts) is a reject."""
    built = writer.built
    by_case: dict[str, list[int]] = defaultdict(list)
    for position, case_id in enumerate(built.case_ids):
        by_case[case_id].append(position)
    order: list[tuple[str, int, int]] = []
    incomplete: list[dict[str, str]] = []
    for case_id, positions in by_case.items():
        positions.sort(key=lambda i: (built.started[i], built.records[i]))
        for attempt, position in enumerate(positions, start=1):
            trace_id = _trace_id(run_id, case_id, attempt)
            problem = identifier_problem(trace_id) if attempt > 1 else None  # attempt 1 was checked with its trace
            if problem is not None:
                writer.refuse(
                    built.source_files[position],
                    built.records[position],
                    f"trace id {trace_id!r} {problem}",
                    case_id=case_id,
                )
                continue
            order.append((trace_id, attempt, position))
            if position in built.incomplete:
                incomplete.append({"trace_id": trace_id, "reason": built.incomplete[position]})
    return order, incomplete


def _lines(built: _Built, order: Sequence[tuple[str, int, int]]) -> Iterator[bytes]:
    """The trace lines in `order`, the id and attempt number spliced in front of each encoded trace's fields; each
    body is let go once written."""
    for trace_id, attempt, position in order:
        body, built.bodies[position] = built.bodies[position], b""
        yield b'{"trace_id":' + orjson.dumps(trace_id) + b',"attempt":' + str(attempt).encode() + b"," + body[1:]


def _golden_notes(golden: Golden | None, cases: Mapping[str, Mapping[str, Any]], dataset_version: str) -> list[str]:
    if golden is not None:
        return [f"golden cases: matched to the {len(golden.cases)} cases of cases/{dataset_version}; no case written"]
    if not cases:
        return [f"no golden cases under cases/{dataset_version}, and no record states a case of its own"]
    notes: list[str] = []
    rag = sum("rag" in c["lanes"] for c in cases.values())
    agent = sum("agent" in c["lanes"] for c in cases.values())
    goal_only = sum(c.get("tool_match") == "goal_only" for c in cases.values())
    notes.append(
        f"no golden cases under cases/{dataset_version}: wrote {len(cases)} cases from the source's own gold "
        f"({rag} rag, {agent} agent)"
    )
    if goal_only:
        notes.append(
            f"{goal_only} agent cases have no reference tool calls (goal_only): their tool calls are not "
            "compared with a reference"
        )
    return notes


def _finish(
    summary: ImportSummary, location: Location, run: ImportRun, writer: _Writer, environment_version: str
) -> ImportSummary:
    cases = list(writer.cases.values())
    order, incomplete = _numbered(run.run_id, writer)
    writer.rejects.sort(key=lambda r: (r["source_file"], r["line"]))
    summary.rejects = writer.rejects
    if not order:
        summary.notes.append("nothing written: no record could be imported")
        return summary
    named = writer.called + [c["name"] for case in cases for c in case.get("reference_tool_calls", [])]
    registry, known, origin = resolve_registry(run.data_root, environment_version, run.tools, {}, named)
    summary.notes.append(f"tool registry: {origin}")
    summary.notes += filter(None, [unknown_tools_note(writer.called, known)])
    mode = import_mode(run.data_root, summary.dataset_version, run.mode, run.baseline_run_id)
    corpus = plan_corpus(
        location,
        run.corpus_version,
        run.run_id,
        writer.ids.new_texts(writer.used),
        overwrite=run.overwrite,
        default=DEFAULT_CORPUS_VERSION,
    )
    summary.corpus_version = corpus.version
    run_manifest = manifest(
        run.run_id,
        run.candidate or Path(summary.source.split(", ")[0]).stem,
        summary.dataset_version,
        environment_version,
        corpus.version,
        run.model,
        mode,
        run.baseline_run_id,
    )
    files = RunFiles(
        run_manifest,
        cases,
        [],
        registry,
        f"{summary.format}.jsonl",
        writer.rejects,
        encoded_traces=_lines(writer.built, order),
        corpus_lines=corpus.lines,
    )
    summary.files = write_run(run.data_root, files, run.overwrite)
    summary.notes += filter(None, [corpus.note])
    summary.mode, summary.cases, summary.traces = mode, len(cases), len(order)
    summary.incomplete = incomplete
    return summary


__all__ = ["Matching", "build_trace", "import_attempts", "source_case"]
