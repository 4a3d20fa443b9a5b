"""The resources read their configuration the Dagster way and reads of other runs are declared and recorded."""

import dataclasses
import json

import dagster as dg
import polars as pl
import pytest

from eval_pipeline.defs.resources import EvalConfig, JudgeConfig, OtherRuns, judge_config_from_env
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.judge import JudgeConfigError, JudgeSettings

KEY = "EVAL_PIPELINE_DEID_KEY"


def test_the_environment_configuration_binds_the_key_as_an_env_var_not_a_value(monkeypatch, tmp_path):
    monkeypatch.setenv("EVAL_PIPELINE_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("EVAL_PIPELINE_WAREHOUSE", str(tmp_path / "wh"))
    monkeypatch.delenv("EVAL_PIPELINE_REPORTS", raising=False)
    monkeypatch.setenv("EVAL_PIPELINE_DEID_DEMO", "yes")
    monkeypatch.setenv(KEY, "a-secret-of-sixteen-bytes")
    config = EvalConfig.from_environment()
    assert (config.data_root, config.warehouse_root, config.reports_root, config.deid_demo) == (
        str(tmp_path / "data"),
        str(tmp_path / "wh"),
        "",
        True,
    )
    assert isinstance(config.deid_key, dg.EnvVar) and config.deid_key.env_var_name == KEY

    run_config = config.run_config()
    assert run_config["deid_key"] == {"env": KEY}
    assert run_config["warehouse_root"] == str(tmp_path / "wh")
    assert "a-secret-of-sixteen-bytes" not in json.dumps(run_config)


def test_without_variables_the_configuration_is_the_default_and_holds_no_key(monkeypatch):
    for name in (
        "EVAL_PIPELINE_DATA",
        "EVAL_PIPELINE_WAREHOUSE",
        "EVAL_PIPELINE_REPORTS",
        "EVAL_PIPELINE_DEID_DEMO",
        KEY,
    ):
        monkeypatch.delenv(name, raising=False)
    config = EvalConfig.from_environment()
    assert (config.data_root, config.warehouse_root, config.deid_demo, config.deid_key) == ("data", "", False, "")
    assert "deid_key" not in config.run_config()
    assert config.deid_key_source() == {}
    assert EvalConfig(deid_key="k" * 16).deid_key_source() == {KEY: "k" * 16}


def test_the_judge_configuration_comes_from_its_variables(monkeypatch):
    monkeypatch.setenv("EVAL_PIPELINE_JUDGE_BACKEND", "openai")
    monkeypatch.setenv("EVAL_PIPELINE_JUDGE_MODEL", "gpt-x")
    monkeypatch.setenv("EVAL_PIPELINE_JUDGE_CONCURRENCY", "3")
    judge = judge_config_from_env()
    assert (judge.backend, judge.model, judge.concurrency) == ("openai", "gpt-x", 3)
    assert judge.run_config()["model"] == "gpt-x" and JudgeConfig().run_config()["backend"] == "local"


def test_the_judge_resource_is_judge_settings_as_dagster_config():
    assert set(JudgeConfig.model_fields) <= {f.name for f in dataclasses.fields(JudgeSettings)}
    assert JudgeConfig().settings() == JudgeSettings()
    assert JudgeConfig.from_settings(JudgeSettings()).run_config() == JudgeConfig().run_config()
    settings = JudgeSettings(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="K", seed=3)
    assert JudgeConfig.from_settings(settings).settings() == settings


def test_the_openai_key_is_read_where_the_judge_is_made_and_never_enters_run_config(monkeypatch, tmp_path):
    monkeypatch.delenv("RESOURCE_JUDGE_KEY", raising=False)
    config = JudgeConfig(backend="openai", model="m", api_key_env="RESOURCE_JUDGE_KEY")
    with pytest.raises(JudgeConfigError, match=r"\$RESOURCE_JUDGE_KEY, which is not set"):
        config.make(str(tmp_path))
    # a step pod or worker holds the key that the process which wrote the run config lacks
    monkeypatch.setenv("RESOURCE_JUDGE_KEY", "sk-resource-secret")
    judge = config.make(str(tmp_path))
    assert judge.version == "openai:m:grounding-claim-v1" and judge.config.cache_path.endswith("verdicts.sqlite")
    assert "sk-resource-secret" not in json.dumps(config.run_config())


def _warehouse(tmp_path) -> Warehouse:
    warehouse = Warehouse.at(str(tmp_path / "wh"))
    for run in ("base-1", "cand-2"):
        warehouse.write_partition("claims", pl.DataFrame({"run_id": [run], "trace_id": [f"{run}:t1"]}), run)
        warehouse.write_partition("tool_scores", pl.DataFrame({"run_id": [run], "trace_id": [f"{run}:t1"]}), run)
    return warehouse


def test_other_runs_reads_declared_tables_and_lists_each_other_run_read_once(tmp_path):
    other = OtherRuns(_warehouse(tmp_path), "cand-2", frozenset({"claims"}))
    assert other.read("claims", "base-1")["trace_id"].to_list() == ["base-1:t1"]
    assert other.read("claims", "base-1").height == 1
    assert other.read("claims", "cand-2")["trace_id"].to_list() == ["cand-2:t1"]
    assert sorted(other.runs("claims")) == ["base-1", "cand-2"]
    assert other.scan("claims").collect().height == 2
    assert other.reads == ["claims[base-1]", "claims[all runs]"]
    assert other.metadata()["other_runs_read"].value == "claims[base-1], claims[all runs]"


def test_other_runs_refuses_a_table_the_asset_does_not_declare(tmp_path):
    other = OtherRuns(_warehouse(tmp_path), "cand-2", frozenset({"claims"}))
    with pytest.raises(
        dg.DagsterInvariantViolationError, match="reads table tool_scores of other runs without declaring it"
    ):
        other.read("tool_scores", "base-1")
    assert other.reads == [] and other.metadata()["other_runs_read"].value == "no other run"


def test_an_unbound_key_is_read_where_the_step_runs(monkeypatch):
    monkeypatch.delenv(KEY, raising=False)
    config = EvalConfig()
    assert config.deid_key_source() == {}
    # a step pod or worker holds the secret the process that built the definitions did not
    monkeypatch.setenv(KEY, "s" * 20)
    assert config.deid_key_source() == {KEY: "s" * 20}
    assert EvalConfig(deid_key="b" * 16).deid_key_source() == {KEY: "b" * 16}
