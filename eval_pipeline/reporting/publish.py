"""Writing report files so that none holding personal data is ever left on disk (docs/privacy.md).

Each file's text is scanned first; only when no file holds personal data is each written under a temporary name in
its own folder (a dot name, which listings skip) and moved into place (os.replace on a local disk, a move on an
object store). Otherwise nothing is written, and an older copy of the same report is removed: it would otherwise
stand for a run whose report failed its check.

A re-score rewrites a run's reports when a few cases changed: most of its case pages come out byte for byte as they
were. Each folder keeps a ledger (LEDGER, a dot name) of the digest of every file it published, and of the scanner
that passed it (LEDGER_SCANNER: deid.scanner_identity and this module). A file whose text has the digest the ledger
lists for it, under the same scanner, is not scanned again: that text passed this scan already. On a local disk, one
whose bytes are already in place is not written again either. A ledger only ever lists texts that passed: a failed
set is removed from it.
A renderer that can say what a file was rendered from (ReportFile.source: the case pages) finds it in the ledger too,
and takes a file whose source is unchanged as it stands (published_texts) instead of rendering it again. Two steps
publishing into one folder at once may each rewrite the ledger over the other's entries: a lost entry only means
that file is scanned again next time.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from eval_pipeline.deid import leak_summary, scan_documents, scanner_identity
from eval_pipeline.io.storage import Location


@dataclass(frozen=True)
class ReportFile:
    """One report file: its path parts under the reports location and its text."""

    parts: tuple[str, ...]
    text: str
    # a digest of everything the text was rendered from, when the renderer can tell (published_text)
    source: str | None = None


@dataclass(frozen=True)
class PublishVerdict:
    """The privacy check of a set of report files: passed, why, where the findings are (never the values)."""

    passed: bool
    description: str
    metadata: dict[str, Any] = field(default_factory=dict)
    uris: list[str] = field(default_factory=list)


class ReportLeakError(RuntimeError):
    """Report files were not written: their text holds personal data (the message names file and type only)."""


def _temporary(parts: tuple[str, ...]) -> tuple[str, ...]:
    return (*parts[:-1], f".{parts[-1]}.{uuid.uuid4().hex}.tmp")


def _move(location: Location, source: tuple[str, ...], target: tuple[str, ...]) -> None:
    if isinstance(location.fs, pafs.LocalFileSystem):
        os.replace(location.join(*source), location.join(*target))
    else:
        location.fs.move(location.join(*source), location.join(*target))


def _remove(location: Location, parts: tuple[str, ...]) -> None:
    if location.exists(*parts):
        location.fs.delete_file(location.join(*parts))


def scan_files(files: Sequence[ReportFile], table: str, *, already_passed: int = 0) -> PublishVerdict:
    """Both scans over each file's text (deid.scan_text: line by line and over line breaks): passed, and each finding
    as `table.<file>: TYPE`, never the value; `already_passed` more files of the set were passed before (the ledger)."""
    findings = scan_documents([("/".join(f.parts), f.text) for f in files], table)
    where = [f"{place} ×{count}" for place, count in leak_summary(findings).items()]
    total = len(files) + already_passed
    return PublishVerdict(
        passed=findings.height == 0,
        description=f"{findings.height} personal data finding(s) in {total} report file(s)"
        + (f": {'; '.join(where[:10])}" if where else ""),
        metadata={
            "findings": findings.height,
            "files": total,
            "passed_before": already_passed,
            "where": "\n".join(where) or "nothing found",
        },
    )


LEDGER = ".published.json"
# The scanner a ledger names: the detectors (deid.scanner_identity) and this module, which decides what is scanned;
# taken when this process loaded them.
LEDGER_SCANNER = hashlib.sha256(scanner_identity().encode() + b"\n" + Path(__file__).read_bytes()).hexdigest()
# The most a report file read back from disk may hold (a case page is about 10 KB, a lane report at 1M traces 2 MB).
_READ_LIMIT = 256 << 20


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _ledger(location: Location, folder: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """A folder's ledger for this scanner: (file name -> digest of the text it published, file name -> source of that
    text); empty when there is none, it is unreadable, or another scanner wrote it."""
    if not location.exists(*folder, LEDGER):
        return {}, {}
    try:
        ledger = json.loads(location.read_bytes(*folder, LEDGER))
    except (OSError, ValueError):
        return {}, {}
    if not isinstance(ledger, dict) or ledger.get("scanner") != LEDGER_SCANNER:
        return {}, {}
    files, sources = ledger.get("files"), ledger.get("sources")
    files = {k: v for k, v in files.items() if isinstance(v, str)} if isinstance(files, dict) else {}
    sources = (
        {k: v for k, v in sources.items() if isinstance(v, str) and k in files} if isinstance(sources, dict) else {}
    )
    return files, sources


def _record(location: Location, folder: tuple[str, ...], published: dict[str, tuple[str, str | None] | None]) -> None:
    """Update a folder's ledger: each name to (digest of the text it now holds, its source), or unlisted (None)."""
    files, sources = _ledger(location, folder)
    for name, entry in published.items():
        files.pop(name, None)
        sources.pop(name, None)
        if entry is not None:
            files[name] = entry[0]
            if entry[1] is not None:
                sources[name] = entry[1]
    target = (*folder, LEDGER)
    if not files:
        _remove(location, target)
        return
    ledger = {"scanner": LEDGER_SCANNER, "files": files, "sources": sources}
    temporary = _temporary(target)
    location.write_bytes(json.dumps(ledger, sort_keys=True).encode(), *temporary)
    _move(location, temporary, target)


def published_texts(location: Location, pages: Sequence[tuple[tuple[str, ...], str]]) -> list[str | None]:
    """For each (parts, source): the text in place of a local file its folder's ledger lists as published from
    `source` under this scanner, when its bytes are exactly the text that passed; else None (render it again)."""
    if not isinstance(location.fs, pafs.LocalFileSystem):
        return [None] * len(pages)
    ledgers = {folder: _ledger(location, folder) for folder in {parts[:-1] for parts, _ in pages}}
    return [_text_in_place(location, parts, source, *ledgers[parts[:-1]]) for parts, source in pages]


def _regular_file_bytes(location: Location, parts: tuple[str, ...], size: int | None = None) -> bytes | None:
    """The bytes of a local regular file (of `size` bytes, when given), else None: a link is not followed (it is
    replaced when the file is written), and nothing but a regular file is read, however the path changes meanwhile."""
    path = location.join(*parts)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _READ_LIMIT or size not in (None, info.st_size):
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read(_READ_LIMIT + 1)
    finally:
        os.close(descriptor)


def _text_in_place(
    location: Location, parts: tuple[str, ...], source: str, files: dict[str, str], sources: dict[str, str]
) -> str | None:
    if sources.get(parts[-1]) != source:
        return None
    data = _regular_file_bytes(location, parts)
    if data is None or hashlib.sha256(data).hexdigest() != files[parts[-1]]:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def _in_place(location: Location, f: ReportFile) -> bool:
    """Whether a local file already holds exactly this text."""
    if not isinstance(location.fs, pafs.LocalFileSystem):
        return False
    data = f.text.encode()
    return _regular_file_bytes(location, f.parts, len(data)) == data


def _by_folder(entries: Iterable[tuple[ReportFile, Any]]) -> dict[tuple[str, ...], dict[str, Any]]:
    folders: dict[tuple[str, ...], dict[str, Any]] = {}
    for f, entry in entries:
        folders.setdefault(f.parts[:-1], {})[f.parts[-1]] = entry
    return folders


def publish(location: Location, files: Sequence[ReportFile], table: str) -> PublishVerdict:
    """Scan the files' text (but a text the folder's ledger lists as passed); when it is clean, write each under a
    temporary name and move it into place (no reader sees a half-written report); otherwise remove any older copy of
    the same files, and write nothing."""
    digests = [_digest(f.text) for f in files]
    ledgers = {folder: _ledger(location, folder)[0] for folder in {f.parts[:-1] for f in files}}
    passed_before = [ledgers[f.parts[:-1]].get(f.parts[-1]) == d for f, d in zip(files, digests, strict=True)]
    verdict = scan_files(
        [f for f, known in zip(files, passed_before, strict=True) if not known],
        table,
        already_passed=sum(passed_before),
    )
    if not verdict.passed:
        for f in files:
            _remove(location, f.parts)
        for folder, names in _by_folder((f, None) for f in files).items():
            _record(location, folder, names)
        return verdict
    changed = [f for f, known in zip(files, passed_before, strict=True) if not (known and _in_place(location, f))]
    temporary = [_temporary(f.parts) for f in changed]
    try:
        for f, tmp in zip(changed, temporary, strict=True):
            location.write_bytes(f.text.encode(), *tmp)
        for f, tmp in zip(changed, temporary, strict=True):
            _move(location, tmp, f.parts)
    except BaseException:
        for tmp in temporary:
            _remove(location, tmp)
        raise
    for folder, names in _by_folder((f, (d, f.source)) for f, d in zip(files, digests, strict=True)).items():
        _record(location, folder, names)
    return PublishVerdict(True, verdict.description, verdict.metadata, [location.uri_of(*f.parts) for f in files])


def publish_or_raise(location: Location, files: Sequence[ReportFile], table: str) -> list[str]:
    """publish() for callers without an asset check: the URIs written, ReportLeakError when nothing was."""
    verdict = publish(location, files, table)
    if not verdict.passed:
        raise ReportLeakError(verdict.description)
    return verdict.uris
