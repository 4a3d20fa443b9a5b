"""The run an import writes (ImportRun): its id, data root, versions and manifest fields, shared by every importer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class ImportRun:
    """The run an import writes: its id, data root, versions and manifest fields.

    `corpus_version` None: the trace importers write the documents the source holds as a new corpus version, the
    other importers name the empty corpus version `none` (common.DEFAULT_CORPUS_VERSION)."""

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


__all__ = ["ImportRun"]
