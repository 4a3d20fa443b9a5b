"""A persistent verdict cache (sqlite3) keyed by (judge model, prompt version, input hash).

Only completed verdicts are stored: an incomplete call is retried on the next run, never replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eval_pipeline.contracts.frames import canonical_json

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    model TEXT NOT NULL,
    prompt_version TEXT NOT NULL,
    input_hash TEXT NOT NULL,
    payload TEXT NOT NULL,
    input_tokens INTEGER,
    output_tokens INTEGER,
    cost_usd REAL,
    created_at REAL NOT NULL,
    PRIMARY KEY (model, prompt_version, input_hash)
)
"""


def input_hash(payload: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of what the judge is shown."""
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedVerdict:
    """A stored judge answer and what the call that produced it cost."""

    payload: dict[str, Any]
    input_tokens: int | None
    output_tokens: int | None
    cost_usd: float | None


class VerdictCache:
    """sqlite3 verdict store; safe to share between threads of one process."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = os.fspath(path)
        parent = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(parent, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        with self._lock:
            # WAL with normal sync makes a commit per verdict cheap and keeps every finished verdict if a run dies.
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()

    def get_many(self, model: str, prompt_version: str, hashes: Iterable[str]) -> dict[str, CachedVerdict]:
        """The stored verdicts among `hashes`."""
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, CachedVerdict] = {}
        with self._lock:
            # sqlite limits bound parameters; 500 per query stays well inside every build's limit.
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT input_hash, payload, input_tokens, output_tokens, cost_usd FROM verdicts "
                    f"WHERE model = ? AND prompt_version = ? AND input_hash IN ({marks})",
                    [model, prompt_version, *chunk],
                ).fetchall()
                for key, payload, tokens_in, tokens_out, cost in rows:
                    found[key] = CachedVerdict(json.loads(payload), tokens_in, tokens_out, cost)
        return found

    def put(self, model: str, prompt_version: str, key: str, verdict: CachedVerdict) -> None:
        """Store one completed verdict (a later put of the same key replaces it)."""
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    model,
                    prompt_version,
                    key,
                    canonical_json(verdict.payload),
                    verdict.input_tokens,
                    verdict.output_tokens,
                    verdict.cost_usd,
                    time.time(),
                ],
            )
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()
