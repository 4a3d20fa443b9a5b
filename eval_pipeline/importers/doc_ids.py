"""Document ids for imported traces, and the corpus version an import names or writes.

The rules (docs/importers.md states them for users): a document's id is the source's id, else its metadata key
(`doc_id`, `id`, `source` by default), else the id of the corpus document with exactly its text, else `doc-` and the
first 16 hex digits of the SHA-256 of its text, so the same text has the same id in every run and reference contexts
given as text line up with retrieved ones. A metadata value that is no corpus id and already named another text of
the source (LangChain's `source` is the file every chunk of it came from) is not that document's id: the document
gets its id from its text, and the import says so. Texts the corpus version lacks go to a new corpus version; no
version is ever overwritten.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass, field

import orjson

from eval_pipeline.importers.common import ImporterError
from eval_pipeline.importers.source import SourceDoc
from eval_pipeline.io import inputs
from eval_pipeline.io.storage import Location

DOC_ID_KEYS = ("doc_id", "id", "source")


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
    shared: dict[str, set[str]] = field(
        default_factory=lambda: defaultdict(set)
    )  # metadata value -> texts it also named
    touched: set[str] = field(default_factory=set)  # ids resolved since the last take_touched()

    @classmethod
    def of_corpus(cls, location: Location, version: str | None, keys: tuple[str, ...]) -> DocIds:
        """The ids of corpus version `version` (none when it is None or does not exist)."""
        ids = cls(keys)
        if version is None or not location.is_dir("corpus", version):
            return ids
        frame = inputs.load_corpus(location, version).frame.select("doc_id", "text")
        for doc_id, text in frame.iter_rows():
            ids.corpus_text[doc_id] = text or ""
            if text:
                ids.by_text.setdefault(text, doc_id)
        return ids

    def take_touched(self) -> set[str]:
        """The ids resolved since the last call: the documents of the attempt just built."""
        touched, self.touched = self.touched, set()
        return touched

    def _metadata_id(self, doc: SourceDoc) -> str | None:
        """The first metadata key value that can be the document's id: one that names no other text."""
        for key in self.keys:
            value = (doc.metadata or {}).get(key)
            if isinstance(value, bool) or not isinstance(value, str | int) or not str(value):
                continue
            value = str(value)
            known = self.new.get(value)  # a corpus id is trusted: golden cases name it, whatever chunk the source holds
            if doc.text and known is not None and known != doc.text:
                self.shared[value].add(doc.text)  # a file name, say, that many chunks share
                return None
            return value
        return None

    def resolve(self, doc: SourceDoc) -> str:
        """The doc's id by the rules of this module; a text the corpus lacks is remembered for the new version."""
        doc_id, way = doc.id, "source id"
        if not doc_id and doc.metadata:
            doc_id, way = self._metadata_id(doc), "metadata key"
        if not doc_id and doc.text:
            doc_id, way = self.by_text.get(doc.text), "matching text"
            if doc_id is None:
                doc_id, way = digest_id(doc.text), "content digest"
        if not doc_id:
            raise ValueError("a document with neither an id nor text")
        if not any(doc_id in found for found in self.how.values()):  # each document counted once, the first way
            self.how[way].add(doc_id)
        if doc.text and doc_id not in self.corpus_text and doc_id not in self.new:
            # later documents with only this text get this id too: a new corpus version holds it
            self.new[doc_id] = doc.text
            self.by_text.setdefault(doc.text, doc_id)
        self.touched.add(doc_id)
        return doc_id

    def text_of(self, doc: SourceDoc, doc_id: str) -> str:
        """The text a context chunk holds: the source's, else the corpus version's."""
        return doc.text or self.corpus_text.get(doc_id) or self.new.get(doc_id, "")

    def new_texts(self, used: set[str]) -> dict[str, str]:
        """The texts the corpus version lacks of the documents the written traces and cases name."""
        return {doc_id: text for doc_id, text in self.new.items() if doc_id in used}

    def notes(self, used: set[str]) -> list[str]:
        """What the summary says about the ids of the documents written traces and cases name: how they came,
        those with no text anywhere, metadata values that many texts share."""
        how = ", ".join(f"{len(found & used)} by {way}" for way, found in sorted(self.how.items()) if found & used)
        notes = [f"document ids: {how}"] if how else []
        textless = sorted(doc_id for doc_id in used if doc_id not in self.corpus_text and doc_id not in self.new)
        if textless:
            notes.append(
                f"{len(textless)} retrieved documents have no text in the source or the corpus version "
                f"({_some(textless)}): import with --corpus-version naming the corpus that holds them, or "
                "context and grounding cannot read them"
            )
        if self.shared:
            notes.append(
                f"{len(self.shared)} metadata values name documents with different texts "
                f"({_some(sorted(self.shared))}): "
                f"those documents have ids from their text; give --doc-id-key the key that names one chunk"
            )
        return notes


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")


@dataclass(frozen=True)
class CorpusPlan:
    """The corpus version a run names, and the docs.jsonl to write when the import brings texts it lacks."""

    version: str
    lines: bytes | None  # None: the named version is used as it is
    note: str | None


def plan_corpus(
    location: Location, given: str | None, run_id: str, new: dict[str, str], *, overwrite: bool, default: str
) -> CorpusPlan:
    """The corpus version of the run: `given` as it is when the source brings no `new` text, else `<given>-<run>`
    (the given version's documents plus the new ones) or, without one, `given` or `<run>-docs` holding the new ones.
    ImporterError when that version exists and `overwrite` is not set: nothing is written before this is known."""
    if not new:
        return CorpusPlan(given or default, None, None)
    exists = given is not None and location.is_dir("corpus", given)
    version = f"{given}-{run_id}" if exists else (given or f"{run_id}-docs")
    if location.is_dir("corpus", version) and not overwrite:
        raise ImporterError(
            f"corpus version {version} already exists at {location.uri_of('corpus', version)}; "
            "import with another --run or --corpus-version, or --force to replace what this import wrote"
        )
    lines = b"".join(orjson.dumps({"doc_id": d, "text": t}) + b"\n" for d, t in new.items())
    if exists:
        lines = (
            b"".join(
                location.read_bytes("corpus", given, name).rstrip(b"\n") + b"\n"
                for name in location.files("corpus", given, suffixes=(".jsonl",))
            )
            + lines
        )
        origin = f"corpus version {given} plus "
    elif given is not None:
        others = ", ".join(location.subdirs("corpus")[:5]) or "none"
        origin = f"corpus version {given} did not exist (versions under corpus/: {others}), so it holds only "
    else:
        origin = ""
    return CorpusPlan(
        version, lines, f"corpus: wrote corpus/{version}/docs.jsonl ({origin}{len(new)} documents from the source)"
    )


__all__ = ["DOC_ID_KEYS", "CorpusPlan", "DocIds", "digest_id", "plan_corpus"]
