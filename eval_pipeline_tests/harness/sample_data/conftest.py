"""Shared fixtures: the committed sample data read from data/ the way a user's tool would read it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

DATA = Path(__file__).resolve().parents[3] / "data"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file (blank lines skipped)."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Sample:
    """The sample data root, parsed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.planted: dict[str, Any] = json.loads((root / "planted.json").read_text(encoding="utf-8"))
        versions = self.planted["versions"]
        self.corpus = {d["doc_id"]: d for d in read_jsonl(root / "corpus" / versions["corpus_version"] / "docs.jsonl")}
        self.tools = {
            t["name"]: t
            for t in yaml.safe_load((root / "tools" / versions["environment_version"] / "tools.yaml").read_text())[
                "tools"
            ]
        }
        self.cases = {}
        for path in sorted((root / "cases" / versions["dataset_version"]).glob("*.yaml")):
            case = yaml.safe_load(path.read_text(encoding="utf-8"))
            self.cases[case["case_id"]] = case
        self.judgments = [j for p in sorted((root / "labels" / "qrels").glob("*.jsonl")) for j in read_jsonl(p)]
        self.grounding_labels = [
            g for p in sorted((root / "labels" / "grounding").glob("*.jsonl")) for g in read_jsonl(p)
        ]
        rejected = {(r["file"], r["line"]) for r in self.planted["rejects"]}
        self.traces: dict[str, dict[str, dict[str, Any]]] = {}
        for run in self.planted["runs"].values():
            self.traces[run] = {}
            for path in sorted((root / "traces" / run).glob("*.jsonl")):
                rel = f"traces/{run}/{path.name}"
                for number, raw in enumerate(path.read_bytes().split(b"\n")[:-1], start=1):
                    if not raw.strip() or (rel, number) in rejected:
                        continue
                    trace = json.loads(raw.decode("utf-8"))
                    assert trace["trace_id"] not in self.traces[run], (
                        f"{rel}:{number} repeats a trace id without a planted reject"
                    )
                    self.traces[run][trace["trace_id"]] = trace


@pytest.fixture(scope="session")
def sample() -> Sample:
    """The committed sample under data/."""
    return Sample(DATA)
