"""Source attempts to a run, the same for every trace importer: document ids, golden-case matching, attempt numbers,
cases written from the source's own gold, a new corpus version for unseen documents, the registry and the files.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from eval_pipeline.contracts.identifiers import validate_identifier
from eval_pipeline.contracts.models import Case, Trace
from eval_pipeline.importers.common import (
    DEFAULT_CORPUS_VERSION,
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
from eval_pipeline.importers.openai_messages import UnreadableMessages, called_tools, first_user_text, messages_to_steps
from eval_pipeline.importers.source import SourceAttempt, SourceDoc, SourceRound, Unreadable
from eval_pipeline.io import loaders
from eval_pipeline.io.storage import InputError, Location, open_location

DOC_ID_KEYS = ("doc_id", "id", "source")


@dataclass(frozen=True, kw_only=True)
class ImportRun:
    """The run an import writes: its id, data root, versions and manifest fields."""

    run_id: str
    data_root: str | Path
    dataset_version: str | None = None
    environment_version: str | None = None
    corpus_version: str | None = None
    tools: str | Path | None = None
    candidate: str | None = None
    model: str | None = None
    mode: str | None = None
    baseline_run_id: str | None = None
    overwrite: bool = False


@dataclass(frozen=True, kw_only=True)
class Matching:
    """How source records meet golden cases (`case_key`) and corpus documents (`doc_id_keys` of their metadata)."""

    case_key: str = "case_id"
    doc_id_keys: tuple[str, ...] = DOC_ID_KEYS


def digest_id(text: str) -> str:
    """The id of a document known only by its text: the same text, the same id, in every run."""
    return "doc-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class DocIds:
    """Document ids settled against one corpus version, and the texts that version lacks."""

    keys: tuple[str, ...]
    corpus_text: dict[str, str] = field(default_factory=dict)  # doc_id -> text of the corpus version
    by_text: dict[str, str] = field(default_factory=dict)  # text -> first doc_id with it
    new: dict[str, str] = field(default_factory=dict)  # doc_id -> text, not in the corpus version
    how: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # the ids that came each way
    fresh: list[tuple[str, str]] = field(default_factory=list)  # (id, text) new since the last kept attempt

    def keep(self) -> None:
        """The documents of the attempt just built belong to the run."""
        self.fresh.clear()

    def drop(self) -> None:
        """Forget the documents only a rejected attempt brought: they are not written to the corpus version."""
        for doc_id, text in self.fresh:
            self.new.pop(doc_id, None)
            if self.by_text.get(text) == doc_id:
                del self.by_text[text]
            for found in self.how.values():
                found.discard(doc_id)
        self.fresh.clear()

    def resolve(self, doc: SourceDoc) -> str:
        """The doc's id by the rules of this module; a text the corpus lacks is remembered for the new version."""
        doc_id, way = doc.id, "source id"
        if not doc_id and doc.metadata:
            found = next((doc.metadata[k] for k in self.keys if isinstance(doc.metadata.get(k), str | int)
                          and not isinstance(doc.metadata.get(k), bool) and str(doc.metadata[k])), None)
            doc_id, way = (str(found), "metadata key") if found is not None else (None, way)
        if not doc_id and doc.text:
            doc_id, way = self.by_text.get(doc.text), "matching text"
            if doc_id is None:
                doc_id, way = digest_id(doc.text), "content digest"
        if not doc_id:
            raise ValueError("a document with neither an id nor text")
        if not any(doc_id in found for found in self.how.values()):  # each document counted once, the first way
            self.how[way].add(doc_id)
        if doc.text and doc_id not in self.corpus_text and doc_id not in self.new:
            # later documents with only this text get this id too: the new corpus version holds it
            self.new[doc_id] = doc.text
            self.by_text.setdefault(doc.text, doc_id)
            self.fresh.append((doc_id, doc.text))
        return doc_id

    def text_of(self, doc: SourceDoc, doc_id: str) -> str:
        """The text a context chunk holds: the source's, else the corpus version's."""
        return doc.text or self.corpus_text.get(doc_id) or self.new.get(doc_id, "")


@dataclass
class Golden:
    """The golden cases of the dataset version, by id and by exact input text."""

    cases: dict[str, dict[str, Any]]
    by_input: dict[str, list[str]]

    @classmethod
    def load(cls, location: Location, dataset_version: str) -> Golden | None:
        if not location.is_dir("cases", dataset_version):
            return None
        loaded = loaders.load_cases(location, dataset_version)
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
        keyed = f"its {key} {attempt.case_key!r} is no case of the dataset" if attempt.case_key is not None else f"it has no {key}"
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
        self.bodies: list[bytes] = []  # each trace's JSON object without trace_id and attempt
        self.incomplete: dict[int, str] = {}  # position -> why the trace is not ok

    def add(self, case_id: str, started_ns: int | None, record: int, body: bytes, incomplete: str | None) -> None:
        if incomplete is not None:
            self.incomplete[len(self.bodies)] = incomplete
        self.case_ids.append(case_id)
        self.started.append(started_ns if started_ns is not None else 2**63)
        self.records.append(record)
        self.bodies.append(body)

    def __len__(self) -> int:
        return len(self.bodies)


def _round(number: int, source: SourceRound, ids: DocIds) -> dict[str, Any]:
    def ranked(docs: Sequence[SourceDoc]) -> list[dict[str, Any]]:
        return [{"doc_id": ids.resolve(d), "score": d.score} for d in docs]

    return {"round": number, "tool": source.tool, "variant": None, "query": source.query,
            "candidates": ranked(source.candidates) if source.candidates is not None else None, "hits": ranked(source.hits)}


def _context(attempt: SourceAttempt, ids: DocIds) -> list[dict[str, Any]] | None:
    """The chunks that reached the model: the source's context, else the retrieved docs whose text (the source's,
    else the corpus version's for a hit given by id alone) is in the prompt."""
    if attempt.context is not None:
        docs = attempt.context
    elif attempt.prompt is not None:
        prompt = attempt.prompt
        docs = [d for r in attempt.rounds for d in r.hits if (text := ids.text_of(d, ids.resolve(d)).strip()) and text in prompt]
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


def source_case(attempt: SourceAttempt, case_id: str, input_text: str, trace: Mapping[str, Any], ids: DocIds
                ) -> tuple[dict[str, Any] | None, str | None]:
    """(the case the source's own gold states, None) or (None, why the attempt cannot be a case)."""
    references = [ids.resolve(d) for d in attempt.reference_docs or []]
    calls = attempt.reference_tool_calls or []
    has_calls = any(s["kind"] == "tool_call" for s in trace["steps"] or [])
    lanes = (["rag"] if references else []) + (["agent"] if calls or has_calls else [])
    if not lanes:
        if trace["retrieval"] or attempt.answer is not None:
            return None, ("no golden case and no reference documents: nothing to score retrieval against; put the "
                          "golden cases under cases/<dataset version> (or give the source's reference contexts)")
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
    return (None, f"the source's gold breaks the case contract: {problem}") if problem else (case, None)


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


def _corpus(location: Location, version: str | None, keys: tuple[str, ...]) -> DocIds:
    ids = DocIds(keys)
    if version is None or not location.is_dir("corpus", version):
        return ids
    frame = loaders.load_corpus(location, version).frame.select("doc_id", "text")
    for doc_id, text in frame.iter_rows():
        ids.corpus_text[doc_id] = text or ""
        if text:
            ids.by_text.setdefault(text, doc_id)
    return ids


def _write_corpus(location: Location, run: ImportRun, ids: DocIds, summary: ImportSummary) -> str:
    """The corpus version the run names, writing a new one when the source has documents the given one lacks."""
    given = run.corpus_version
    if not ids.new:
        return given or DEFAULT_CORPUS_VERSION
    exists = given is not None and location.is_dir("corpus", given)
    version = f"{given}-{run.run_id}" if exists else (given or f"{run.run_id}-docs")
    lines = b"".join(orjson.dumps({"doc_id": d, "text": t}) + b"\n" for d, t in ids.new.items())
    if exists:
        lines = b"".join(location.read_bytes("corpus", given, name).rstrip(b"\n") + b"\n"
                         for name in location.files("corpus", given, suffixes=(".jsonl",))) + lines
    if location.is_dir("corpus", version) and not run.overwrite:
        raise ImporterError(f"corpus version {version} already exists at {location.uri_of('corpus', version)}; "
                            "import with another --run or --corpus-version, or --force to replace what this import wrote")
    location.write_bytes(lines, "corpus", version, "docs.jsonl")
    origin = f"corpus version {given} plus " if exists else ""
    summary.notes.append(f"corpus: wrote corpus/{version}/docs.jsonl ({origin}{len(ids.new)} documents from the source)")
    return version


@contextmanager
def _rare_collections() -> Iterator[None]:
    """The cyclic garbage collector rarely, while attempts are read and built. Their objects are freed by reference
    counting as each attempt is written; with the default thresholds the collector walked every live object about
    thirty times in a 10k-trace import, 15 to 25 % of its time, and found almost nothing."""
    before = gc.get_threshold()
    gc.set_threshold(100_000, 50, 1000)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def import_attempts(fmt: str, sources: Sequence[Path], attempts: Iterable[SourceAttempt | Unreadable], run: ImportRun,
                    matching: Matching = Matching()) -> ImportSummary:
    """Write the attempts of a source as a run under the data root; the summary of what was written and rejected."""
    dataset_version, environment_version = _versions(fmt, sources, run)
    location = open_location(run.data_root)
    if location.exists("traces", run.run_id, "run.yaml") and not run.overwrite:
        raise ImporterError(f"run {run.run_id!r} already exists at {location.uri_of('traces', run.run_id)}; "
                            "choose another --run or pass --force to replace it")
    try:
        golden = Golden.load(location, dataset_version)
        ids = _corpus(location, run.corpus_version, matching.doc_id_keys)
    except InputError as exc:
        raise ImporterError(str(exc)) from exc
    label = ", ".join(str(s) for s in sources)
    summary = ImportSummary(fmt, label, run.run_id, str(run.data_root), dataset_version, environment_version,
                            run.corpus_version or DEFAULT_CORPUS_VERSION)
    rejects: list[dict[str, Any]] = []
    built = _Built()
    cases: dict[str, dict[str, Any]] = {}
    called: list[str] = []

    def refuse(source_file: str, record: int, reason: str, **keys: Any) -> None:
        rejects.append(import_reject(run.run_id, fmt, source_file, record, reason, **keys))

    with _rare_collections():
        for attempt in attempts:
            summary.records += 1
            if isinstance(attempt, Unreadable):
                refuse(attempt.source_file, attempt.record, attempt.reason, case_id=attempt.case_id, trace_id=attempt.trace_id)
                continue
            try:
                trace, tools = build_trace(attempt, ids)
            except ValueError as exc:
                ids.drop()
                refuse(attempt.source_file, attempt.record, str(exc))
                continue
            input_text = trace["input"] or ""
            if golden is not None:
                case_id, why = golden.match(attempt, input_text, matching.case_key)
            else:
                case_id = _case_id_of(attempt, input_text)
                why = None if case_id else f"no {matching.case_key} and no input text: the trace names no case"
                if case_id:
                    case, why = source_case(attempt, case_id, input_text, trace, ids)
                    if case is not None and case_id in cases and not same_case(cases[case_id], case):
                        why = f"its gold differs from an earlier record of case {case_id!r}"
                    elif case is not None:
                        cases.setdefault(case_id, case)
            if why is not None:
                ids.drop()
                refuse(attempt.source_file, attempt.record, why, case_id=case_id)
                continue
            revision = golden.cases[case_id]["case_revision"] if golden is not None else 1
            trace = {"case_id": case_id, "case_revision": revision, **trace}
            # the contract is checked with attempt 1: the number given later changes nothing the contract checks
            problem = contract_problem(Trace, {"trace_id": _trace_id(run.run_id, case_id, 1), "attempt": 1, **trace})
            if problem is not None:
                ids.drop()
                refuse(attempt.source_file, attempt.record, problem, case_id=case_id)
                continue
            ids.keep()
            called += tools
            incomplete = None if trace["status"] == "ok" else (trace["error"] or trace["status"])
            built.add(case_id, attempt.started_ns, attempt.record, json_line(trace), incomplete)

    summary.notes += _golden_notes(golden, cases, dataset_version, ids)
    return _finish(summary, location, run, ids, list(cases.values()), built, rejects, called, environment_version)


def _trace_id(run_id: str, case_id: str, attempt: int) -> str:
    return f"{run_id}:{case_id}#{attempt}"


def _numbered(run_id: str, built: _Built) -> tuple[list[tuple[str, int, int]], list[dict[str, str]]]:
    """(trace id, attempt, position) of every trace, attempts 1..n per case in start-time order, and the traces
    that are not ok."""
    by_case: dict[str, list[int]] = defaultdict(list)
    for position, case_id in enumerate(built.case_ids):
        by_case[case_id].append(position)
    order: list[tuple[str, int, int]] = []
    incomplete: list[dict[str, str]] = []
    for case_id, positions in by_case.items():
        positions.sort(key=lambda i: (built.started[i], built.records[i]))
        for attempt, position in enumerate(positions, start=1):
            trace_id = _trace_id(run_id, case_id, attempt)
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


def _golden_notes(golden: Golden | None, cases: Mapping[str, Mapping[str, Any]], dataset_version: str, ids: DocIds) -> list[str]:
    how = ", ".join(f"{len(found)} by {way}" for way, found in sorted(ids.how.items()) if found)
    notes = [f"document ids: {how}"] if how else []
    textless = sorted(doc_id for found in ids.how.values() for doc_id in found
                      if doc_id not in ids.corpus_text and doc_id not in ids.new)
    if textless:
        notes.append(f"{len(textless)} retrieved documents have no text in the source or the corpus version "
                     f"({', '.join(textless[:3])}{', ...' if len(textless) > 3 else ''}): import with --corpus-version "
                     "naming the corpus that holds them, or context and grounding cannot read them")
    if golden is not None:
        return [f"golden cases: matched to the {len(golden.cases)} cases of cases/{dataset_version}; no case written", *notes]
    rag = sum("rag" in c["lanes"] for c in cases.values())
    agent = sum("agent" in c["lanes"] for c in cases.values())
    goal_only = sum(c.get("tool_match") == "goal_only" for c in cases.values())
    notes.append(f"no golden cases under cases/{dataset_version}: wrote {len(cases)} cases from the source's own gold "
                 f"({rag} rag, {agent} agent)")
    if goal_only:
        notes.append(f"{goal_only} agent cases have no reference tool calls (goal_only): their tool calls are not "
                     "compared with a reference")
    return notes


def _finish(summary: ImportSummary, location: Location, run: ImportRun, ids: DocIds, cases: list[dict[str, Any]],
            built: _Built, rejects: list[dict[str, Any]], called: list[str], environment_version: str
            ) -> ImportSummary:
    rejects.sort(key=lambda r: (r["source_file"], r["line"]))
    summary.rejects = rejects
    if not built:
        summary.notes.append("nothing written: no record could be imported")
        return summary
    named = called + [c["name"] for case in cases for c in case.get("reference_tool_calls", [])]
    registry, known, origin = resolve_registry(run.data_root, environment_version, run.tools, {}, named)
    summary.notes.append(f"tool registry: {origin}")
    summary.notes += filter(None, [unknown_tools_note(called, known)])
    mode = import_mode(run.data_root, summary.dataset_version, run.mode, run.baseline_run_id)
    summary.corpus_version = _write_corpus(location, run, ids, summary)
    run_manifest = manifest(run.run_id, run.candidate or Path(summary.source.split(", ")[0]).stem, summary.dataset_version,
                            environment_version, summary.corpus_version, run.model, mode, run.baseline_run_id)
    order, incomplete = _numbered(run.run_id, built)
    files = RunFiles(run_manifest, cases, [], registry, f"{summary.format}.jsonl", rejects, encoded_traces=_lines(built, order))
    summary.files = write_run(run.data_root, files, run.overwrite)
    summary.mode, summary.cases, summary.traces = mode, len(cases), len(order)
    summary.incomplete = incomplete
    return summary


__all__ = ["DOC_ID_KEYS", "DocIds", "ImportRun", "Matching", "build_trace", "digest_id", "import_attempts"]
