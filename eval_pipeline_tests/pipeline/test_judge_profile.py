"""The judge profile as a run uses it (gate policy, environment, resource) and self-consistency in judge_calibration."""

from __future__ import annotations

import io
import shutil

import dagster as dg
import polars as pl
import pytest
import yaml

from eval_pipeline.defs.generation.assets import judge_calibration
from eval_pipeline.defs.resources import EvalConfig, JudgeConfig, judge_config_from_env, make_run_judge
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.judge import JudgeConfigError
from eval_pipeline.judge.profile import JudgeProfile, default_profile
from eval_pipeline.runner import run_pipeline
from eval_pipeline.scoring.calibration import DETERMINISTIC_NOTE

STRICT = JudgeProfile(backend="local", support_threshold=0.95, source="test")


@pytest.fixture()
def data_with_profile(sample_data, tmp_path):
    """A copy of the sample whose gate policy names a strict judge profile inside the data root."""
    root = tmp_path / "data"
    shutil.copytree(sample_data, root, ignore=shutil.ignore_patterns("warehouse", "reports"))
    (root / "policy" / "judge_profile.yaml").write_text(STRICT.to_yaml())
    policy = yaml.safe_load((root / "policy" / "gates.yaml").read_text())
    policy["judge"]["profile"] = "policy/judge_profile.yaml"
    (root / "policy" / "gates.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    return root


def test_the_policy_names_the_profile_and_the_resource_or_environment_override_it(
    data_with_profile, tmp_path, monkeypatch
):
    config = EvalConfig(data_root=str(data_with_profile))
    assert make_run_judge(JudgeConfig(), config).version == f"local-2.0+{STRICT.digest}"
    other = tmp_path / "other.yaml"
    other.write_text(JudgeProfile(backend="local", support_threshold=0.7, source="t").to_yaml())
    other_digest = JudgeProfile(support_threshold=0.7).digest
    assert make_run_judge(JudgeConfig(profile=str(other)), config).version == f"local-2.0+{other_digest}"
    monkeypatch.setenv("EVAL_PIPELINE_JUDGE_PROFILE", str(other))
    assert judge_config_from_env().profile == str(other)
    assert make_run_judge(judge_config_from_env(), config).version == f"local-2.0+{other_digest}"


def test_a_profile_outside_the_data_root_or_missing_is_bad_input(data_with_profile):
    gates = data_with_profile / "policy" / "gates.yaml"
    policy = yaml.safe_load(gates.read_text())
    policy["judge"]["profile"] = "../elsewhere.yaml"
    gates.write_text(yaml.safe_dump(policy))
    with pytest.raises(Exception, match="inside the data root"):
        EvalConfig(data_root=str(data_with_profile)).judge_profile()
    policy["judge"]["profile"] = "policy/missing.yaml"
    gates.write_text(yaml.safe_dump(policy))
    with pytest.raises(JudgeConfigError, match="not in the data root"):
        EvalConfig(data_root=str(data_with_profile)).judge_profile()


def test_a_run_under_the_policy_profile_judges_with_it(data_with_profile, tmp_path):
    code = run_pipeline(
        data=str(data_with_profile),
        run_ids=["base-41"],
        warehouse=str(tmp_path / "wh"),
        reports=str(tmp_path / "rep"),
        deid_demo=True,
        quiet=True,
        instance=dg.DagsterInstance.ephemeral(),
        stream=io.StringIO(),
    )
    assert code == 0
    claims = Warehouse.at(tmp_path / "wh").read("claims", "base-41")
    assert claims["judge_version"].unique().to_list() == [f"local-2.0+{STRICT.digest}"]
    # SUPPORTED exactly when the score reaches the strict threshold
    supported = claims.filter(pl.col("verdict") == "SUPPORTED")
    assert supported.height and supported["score"].min() >= 0.95
    assert claims.filter((pl.col("verdict") == "NOT_IN_EVIDENCE") & (pl.col("score") >= 0.95)).height == 0


def test_judge_calibration_records_self_consistency_and_the_report_says_it(scored):
    warehouse, run = scored["warehouse"], "base-41"
    config = EvalConfig(data_root=str(scored["data"]), warehouse_root=str(warehouse.root))
    result = judge_calibration(
        dg.build_asset_context(partition_key=run),
        eval_config=config,
        judge=JudgeConfig(),
        run_manifest=warehouse.read("run_manifest", run),
        claims=warehouse.read("claims", run),
        grounding_scores=warehouse.read("grounding_scores", run),
        deid_traces=warehouse.read("deid_traces", run),
    )
    rows = result.value
    mine = rows.filter(pl.col("judge_version") == f"local-2.0+{default_profile('local').digest}")
    assert mine.height and mine["self_consistency_flip_rate"].to_list() == [0.0] * mine.height
    assert set(mine["self_consistency_note"]) == {DETERMINISTIC_NOTE} and set(mine["self_consistency_n"]) == {0}
    assert result.metadata["self_consistency_flip_rate"].value == 0.0
    report = (scored["reports"] / run / "rag.md").read_text()
    assert f"- self-consistency: flip rate 0.0000 ({DETERMINISTIC_NOTE})" in report
