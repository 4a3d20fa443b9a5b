"""Writing report files so that none holding personal data is ever left on disk (docs/privacy.md).

Each file's text is scanned first; only when no file holds personal data is each written under a temporary name in
its own folder (a dot name, which listings skip) and moved into place (os.replace on a local disk, a move on an
object store). Otherwise nothing is written, and an older copy of the same report is removed: it would otherwise
stand for a run whose report failed its check.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from eval_pipeline.deid import leak_summary, scan_documents
from eval_pipeline.io.storage import Location


@dataclass(frozen=True)
class ReportFile:
    """One report file: its path parts under the reports location and its text."""

    parts: tuple[str, ...]
    text: str


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


def scan_files(files: Sequence[ReportFile], table: str) -> PublishVerdict:
    """Both scans over each file's text (deid.scan_text: line by line and over line breaks): passed, and each finding
    as `table.<file>: TYPE`, never the value."""
    findings = scan_documents([("/".join(f.parts), f.text) for f in files], table)
    where = [f"{place} ×{count}" for place, count in leak_summary(findings).items()]
    return PublishVerdict(
        passed=findings.height == 0,
        description=f"{findings.height} personal data finding(s) in {len(files)} report file(s)"
        + (f": {'; '.join(where[:10])}" if where else ""),
        metadata={"findings": findings.height, "files": len(files), "where": "\n".join(where) or "nothing found"},
    )


def publish(location: Location, files: Sequence[ReportFile], table: str) -> PublishVerdict:
    """Scan the files' text; when it is clean, write each under a temporary name and move it into place (no reader
    sees a half-written report); otherwise remove any older copy of the same files, and write nothing."""
    verdict = scan_files(files, table)
    if not verdict.passed:
        for f in files:
            _remove(location, f.parts)
        return verdict
    temporary = [_temporary(f.parts) for f in files]
    try:
        for f, tmp in zip(files, temporary, strict=True):
            location.write_bytes(f.text.encode(), *tmp)
        for f, tmp in zip(files, temporary, strict=True):
            _move(location, tmp, f.parts)
    except BaseException:
        for tmp in temporary:
            _remove(location, tmp)
        raise
    return PublishVerdict(True, verdict.description, verdict.metadata, [location.uri_of(*f.parts) for f in files])


def publish_or_raise(location: Location, files: Sequence[ReportFile], table: str) -> list[str]:
    """publish() for callers without an asset check: the URIs written, ReportLeakError when nothing was."""
    verdict = publish(location, files, table)
    if not verdict.passed:
        raise ReportLeakError(verdict.description)
    return verdict.uris
