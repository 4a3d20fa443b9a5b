"""One materialization of the bundled sample (both runs) shared by the pipeline tests."""

import io
import json
import shutil
from pathlib import Path

import dagster as dg
import pytest

from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.runner import run_pipeline

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def planted() -> dict:
    return json.loads((REPO_ROOT / "data" / "planted.json").read_text())


@pytest.fixture(scope="session")
def sample_copy(tmp_path_factory) -> Path:
    """A private copy of data/ (tests may change it) without outputs."""
    root = tmp_path_factory.mktemp("sample") / "data"
    shutil.copytree(REPO_ROOT / "data", root, ignore=shutil.ignore_patterns("warehouse", "reports"))
    return root


@pytest.fixture(scope="session")
def scored(sample_copy, tmp_path_factory):
    """Both sample runs materialized into a temporary warehouse; (data root, warehouse, reports, exit code, instance)."""
    out = tmp_path_factory.mktemp("scored")
    instance = dg.DagsterInstance.ephemeral()
    summary = io.StringIO()
    code = run_pipeline(data=str(sample_copy), warehouse=str(out / "warehouse"), reports=str(out / "reports"),
                        deid_demo=True, quiet=True, instance=instance, stream=summary)
    return {"data": sample_copy, "warehouse": Warehouse.at(out / "warehouse"), "reports": out / "reports",
            "code": code, "instance": instance, "summary": summary.getvalue()}
