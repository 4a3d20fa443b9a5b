"""JSON Schema files generated from the input contracts, for users validating their own exports."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from eval_pipeline.contracts.cases import Case, CorpusDoc, ToolRegistry
from eval_pipeline.contracts.labels import GroundingLabel, QrelsJudgment
from eval_pipeline.contracts.policy import GatePolicy
from eval_pipeline.contracts.traces import RunManifest, Trace

SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"

CONTRACTS: dict[str, type[BaseModel]] = {
    "corpus_doc": CorpusDoc,
    "tool_registry": ToolRegistry,
    "case": Case,
    "run_manifest": RunManifest,
    "trace": Trace,
    "qrels_judgment": QrelsJudgment,
    "grounding_label": GroundingLabel,
    "gate_policy": GatePolicy,
}


def schema_documents() -> dict[str, dict]:
    """File name → JSON Schema document, one per contract."""
    documents = {}
    for name, model in CONTRACTS.items():
        schema = model.model_json_schema()
        schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        schema["$id"] = f"https://eval-pipeline.dev/schemas/{name}.schema.json"
        documents[f"{name}.schema.json"] = schema
    return documents


def write_schemas(out: Path = SCHEMA_DIR) -> list[Path]:
    """Write every schema file; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for file_name, document in schema_documents().items():
        path = out / file_name
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths
