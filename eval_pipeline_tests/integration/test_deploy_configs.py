"""The deploy/ cluster configurations load and validate against dagster-k8s, dagster-celery and dagster-postgres."""

import importlib.util
import shutil
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config
from dagster._core.system_config.objects import ResolvedRunConfig

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

pytestmark = pytest.mark.integration


def load_definitions(variant: str) -> dg.Definitions:
    """The `defs` of deploy/<variant>/definitions.py, loaded from its file as a code location would."""
    spec = importlib.util.spec_from_file_location(f"deploy_{variant}_definitions", DEPLOY / variant / "definitions.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.defs


@pytest.mark.parametrize("variant", ["postgres", "kubernetes"])
def test_instance_files_validate(variant, tmp_path):
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed (pip install 'dagster-postgres')")
    shutil.copy(DEPLOY / variant / "dagster.yaml", tmp_path / "dagster.yaml")
    config, _ = dagster_instance_config(str(tmp_path))
    assert config["storage"]["postgres"]["postgres_db"]["scheme"] == "postgresql+psycopg2"
    assert config["concurrency"]["runs"]["max_concurrent_runs"] in (4, 8)
    if variant == "kubernetes":
        k8s = pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed (pip install 'dagster-k8s')")
        assert config["run_launcher"]["class"] == "K8sRunLauncher"
        result = process_config(k8s.K8sRunLauncher.config_type(), config["run_launcher"]["config"])
        assert result.success, result.errors


def test_kubernetes_code_location_runs_each_step_as_a_kubernetes_job():
    pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed (pip install 'dagster-k8s')")
    job = load_definitions("kubernetes").resolve_job_def("evaluate_run")
    assert job.executor_def.name == "eval_pipeline_k8s"
    assert job.partitions_def is not None and job.partitions_def.name == "evaluation_runs"
    assert ResolvedRunConfig.build(job, {}).execution is not None


def test_celery_code_location_and_worker_config(monkeypatch):
    dagster_celery = pytest.importorskip(
        "dagster_celery", reason="dagster-celery is not installed (pip install 'dagster-celery')"
    )
    monkeypatch.setenv("DAGSTER_CELERY_BROKER_URL", "pyamqp://guest@rabbitmq:5672//")
    monkeypatch.setenv("DAGSTER_CELERY_BACKEND_URL", "rpc://")
    run_config = yaml.safe_load((DEPLOY / "celery" / "celery.yaml").read_text())
    result = process_config(dagster_celery.celery_executor.config_schema.config_type, run_config["execution"]["config"])
    assert result.success, result.errors
    assert result.value["broker"] == "pyamqp://guest@rabbitmq:5672//"
    assert result.value["config_source"]["worker_prefetch_multiplier"] == 1
    job = load_definitions("celery").resolve_job_def("evaluate_run")
    assert job.executor_def.name == "celery"
    assert ResolvedRunConfig.build(job, run_config).execution is not None
