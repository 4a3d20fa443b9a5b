"""Grounding judges behind one interface, and JudgeSettings, the one definition of their configuration.

The deterministic local judge (default), an NLI model from a local directory, and any OpenAI-compatible server.
"""

from __future__ import annotations

from typing import Any

from eval_pipeline.judge.base import Judge, JudgeConfigError
from eval_pipeline.judge.profile import JudgeProfile, resolve_profile
from eval_pipeline.judge.settings import BACKENDS, ENV_PREFIX, ENV_VARS, OPENAI_OPTIONS, JudgeSettings


def make_judge(
    backend: str = "local", profile: str | JudgeProfile | None = None, *, api_key: str | None = None, **config: Any
) -> Judge:
    """A judge for `backend`; `profile`: a judge profile or its path (local and model backends; default: shipped).

    local: option contradiction_overlap; model: model_dir, max_length, batch_size; openai: the JudgeSettings fields
    of OPENAI_OPTIONS, and `api_key`, the value of the variable `api_key_env` names, which the caller reads.
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
        from eval_pipeline.judge.openai_backend import OpenAIJudge

        if profile:
            raise JudgeConfigError(
                "the openai judge gives verdicts, not scores: a judge profile applies to the local and model backends"
            )
        unknown = set(config) - set(OPENAI_OPTIONS)
        if unknown:
            raise JudgeConfigError(f"bad openai judge option(s): {', '.join(sorted(unknown))}")
        return OpenAIJudge(JudgeSettings(backend="openai", **config), api_key=api_key)
    raise JudgeConfigError(f"unknown judge backend {backend!r}; choose one of {', '.join(BACKENDS)}")


__all__ = [
    "BACKENDS",
    "ENV_PREFIX",
    "ENV_VARS",
    "OPENAI_OPTIONS",
    "Judge",
    "JudgeConfigError",
    "JudgeSettings",
    "make_judge",
]
