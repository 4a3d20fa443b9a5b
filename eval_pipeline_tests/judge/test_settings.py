"""JudgeSettings: one definition of the judge's configuration, read from the EVAL_PIPELINE_JUDGE_* variables given."""

import pytest

from eval_pipeline.judge import ENV_VARS, OPENAI_OPTIONS, JudgeConfigError, JudgeSettings, make_judge


def test_no_variable_is_the_default_local_judge():
    assert JudgeSettings.from_env({}) == JudgeSettings()
    assert (JudgeSettings().backend, JudgeSettings().backend_options()) == ("local", {})


def test_the_openai_variables_of_the_mapping_given_are_read():
    settings = JudgeSettings.from_env(
        {
            "EVAL_PIPELINE_JUDGE_BACKEND": "openai",
            "EVAL_PIPELINE_JUDGE_MODEL": "gpt-x",
            "EVAL_PIPELINE_JUDGE_BASE_URL": "http://127.0.0.1:9/v1",
            "EVAL_PIPELINE_JUDGE_API_KEY_ENV": "MY_KEY",
            "EVAL_PIPELINE_JUDGE_CACHE": "/tmp/cache.sqlite",
            "EVAL_PIPELINE_JUDGE_CONCURRENCY": "3",
            "EVAL_PIPELINE_JUDGE_PRICE_INPUT_PER_1K": "0.5",
            "EVAL_PIPELINE_JUDGE_BATCH": "yes",
        }
    )
    assert settings == JudgeSettings(
        backend="openai",
        model="gpt-x",
        base_url="http://127.0.0.1:9/v1",
        api_key_env="MY_KEY",
        cache_path="/tmp/cache.sqlite",
        concurrency=3,
        price_input_per_1k=0.5,
        batch=True,
    )
    assert set(settings.backend_options()) == set(OPENAI_OPTIONS)
    assert {f"EVAL_PIPELINE_JUDGE_{n}" for n in ("MODEL", "BASE_URL", "API_KEY_ENV", "CACHE", "BATCH")} <= set(ENV_VARS)


def test_only_the_chosen_backends_variables_are_read():
    environ = {"EVAL_PIPELINE_JUDGE_CONCURRENCY": "many", "EVAL_PIPELINE_JUDGE_MODEL_DIR": "/models/nli"}
    assert JudgeSettings.from_env(environ) == JudgeSettings()
    assert JudgeSettings.from_env(environ, backend="model").backend_options() == {"model_dir": "/models/nli"}
    with pytest.raises(JudgeConfigError, match="EVAL_PIPELINE_JUDGE_CONCURRENCY='many' is not a number"):
        JudgeSettings.from_env(environ, backend="openai")


def test_the_openai_judge_takes_only_openai_options_and_the_key_it_is_handed():
    with pytest.raises(JudgeConfigError, match=r"bad openai judge option\(s\): model_dir"):
        make_judge("openai", model="m", model_dir="/models/nli", api_key="sk-test")
    judge = make_judge("openai", model="m", base_url="http://127.0.0.1:9/v1", api_key="sk-test")
    assert judge.config == JudgeSettings(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")
    assert judge.version == "openai:m:grounding-claim-v1"
