"""Fingerprints: content hashes of frames, and per run what retrieval scoring depends on (the qrels judgments of its
cases, its corpus version)."""

from __future__ import annotations

import hashlib

import polars as pl

from eval_pipeline.io import inputs, labels, loaders
from eval_pipeline.io.storage import InputError, Location


def content_hash(frame: pl.DataFrame) -> str:
    """An order-independent content hash of a frame's values, for Dagster data versions."""
    if frame.height == 0:
        return f"empty:{len(frame.columns)}"
    digest = frame.hash_rows(seed=0).sum()
    return f"{frame.height}:{digest:x}" if isinstance(digest, int) else f"{frame.height}:{digest}"


def judgments_digest(judgments: pl.DataFrame) -> str:
    """A content hash of judgments, independent of line order and of the files they came from."""
    lines = sorted(
        f"{q}\t{d}\t{g}\t{s}" for q, d, g, s in judgments.select("query_id", "doc_id", "grade", "source").iter_rows()
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def run_fingerprints(location: Location, run_ids: list[str]) -> dict[str, dict[str, str]]:
    """{run_id: {"qrels": digest of the judgments of its cases, "corpus_version": ...}} for runs with a readable
    manifest."""
    judgments = labels.load_judgments(location).frame
    case_ids_by_dataset: dict[str, pl.DataFrame] = {}
    out = {}
    for run_id in run_ids:
        try:
            manifest = loaders.load_manifest(location, run_id)
            if manifest.dataset_version not in case_ids_by_dataset:
                cases = inputs.load_cases(location, manifest.dataset_version).frame
                case_ids_by_dataset[manifest.dataset_version] = cases.select(pl.col("case_id").alias("query_id"))
        except InputError:
            continue
        relevant = judgments.join(case_ids_by_dataset[manifest.dataset_version], on="query_id", how="semi")
        out[run_id] = {"qrels": judgments_digest(relevant), "corpus_version": manifest.corpus_version}
    return out


def changed_runs(previous: dict[str, dict[str, str]], current: dict[str, dict[str, str]]) -> dict[str, set[str]]:
    """Runs seen before whose qrels or corpus version changed, with which of the two changed."""
    changes = {}
    for run_id, now in current.items():
        before = previous.get(run_id)
        if before is None:
            continue
        what = {key for key in ("qrels", "corpus_version") if before.get(key) != now.get(key)}
        if what:
            changes[run_id] = what
    return changes
