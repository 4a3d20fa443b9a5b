"""Grounding judges behind one interface: the deterministic local judge (default), an NLI model from a local
directory, and any OpenAI-compatible server."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from eval_pipeline.judge.base import Judge, JudgeConfigError
from eval_pipeline.judge.profile import JudgeProfile, resolve_profile

BACKENDS = ("local", "openai", "model")
ENV_PREFIX = "EVAL_PIPELINE_JUDGE_"


def make_judge(backend: str = "local", profile: str | JudgeProfile | None = None, **config: Any) -> Judge:
    """A judge for `backend`; `profile`: a judge profile or its path (local and model backends; default: shipped).

    local: option contradiction_overlap; model: model_dir, max_length, batch_size; openai: OpenAIJudgeConfig fields.
    """
    # Backends import lazily: only the chosen backend's dependencies (openai, numpy) load.
    if backend == "local":
        from eval_pipeline.judge.local import LocalJudge

        unknown = set(config) - {"contradiction_overlap"}
        if unknown:
            raise JudgeConfigError(f"bad local judge option(s): {', '.join(sorted(unknown))}")
        return LocalJudge(resolve_profile("local", profile), **config)
    if backend == "model":
        from eval_pipeline.judge.model_backend import ModelJudge

        return ModelJudge(profile=resolve_profile("model", profile), **config)
    if backend == "openai":
        from eval_pipeline.judge.openai_backend import OpenAIJudge, OpenAIJudgeConfig

        if profile:
            raise JudgeConfigError(
                "the openai judge gives verdicts, not scores: a judge profile applies to the local and model backends"
            )
        try:
            settings = OpenAIJudgeConfig(**config)
        except TypeError as exc:
            raise JudgeConfigError(f"bad openai judge option: {exc}") from exc
        return OpenAIJudge(settings)
    raise JudgeConfigError(f"unknown judge backend {backend!r}; choose one of {', '.join(BACKENDS)}")


def judge_options_from_env(
    env: Mapping[str, str] | None = None, backend: str | None = None
) -> tuple[str, str | None, dict[str, Any]]:
    """(backend, profile path, options) from the EVAL_PIPELINE_JUDGE_* variables, as make_judge takes them;
    `backend` overrides EVAL_PIPELINE_JUDGE_BACKEND."""
    env = os.environ if env is None else env

    def get(name: str) -> str:
        return env.get(ENV_PREFIX + name, "")

    backend = backend or get("BACKEND") or "local"
    profile = get("PROFILE") or None
    options: dict[str, Any] = {}
    if backend == "model":
        options["model_dir"] = get("MODEL_DIR")
    elif backend == "openai":
        options = {
            "model": get("MODEL"),
            "base_url": get("BASE_URL") or None,
            "api_key_env": get("API_KEY_ENV") or "OPENAI_API_KEY",
        }
        if get("CACHE"):
            options["cache_path"] = get("CACHE")
        for name, key, kind in (
            ("CONCURRENCY", "concurrency", int),
            ("PRICE_INPUT_PER_1K", "price_input_per_1k", float),
            ("PRICE_OUTPUT_PER_1K", "price_output_per_1k", float),
        ):
            if get(name):
                try:
                    options[key] = kind(get(name))
                except ValueError as exc:
                    raise JudgeConfigError(f"{ENV_PREFIX}{name}={get(name)!r} is not a number") from exc
        options["batch"] = get("BATCH").lower() in {"1", "true", "yes"}
    return backend, profile, options


__all__ = ["BACKENDS", "Judge", "JudgeConfigError", "judge_options_from_env", "make_judge"]
