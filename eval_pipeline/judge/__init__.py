"""Grounding judges behind one interface: the deterministic local judge (default) and any OpenAI-compatible server."""

from __future__ import annotations

from typing import Any

from eval_pipeline.judge.base import Judge, JudgeConfigError

BACKENDS = ("local", "openai")


def make_judge(backend: str = "local", **config: Any) -> Judge:
    """A judge for `backend`: "local" (options: contradiction_overlap) or "openai" (OpenAIJudgeConfig fields)."""
    # Backends import lazily: the local judge needs scoring.claims, which itself imports judge.text.
    if backend == "local":
        from eval_pipeline.judge.local import LocalJudge

        return LocalJudge(**config)
    if backend == "openai":
        from eval_pipeline.judge.openai_backend import OpenAIJudge, OpenAIJudgeConfig

        try:
            settings = OpenAIJudgeConfig(**config)
        except TypeError as exc:
            raise JudgeConfigError(f"bad openai judge option: {exc}") from exc
        return OpenAIJudge(settings)
    raise JudgeConfigError(f"unknown judge backend {backend!r}; choose one of {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "Judge", "JudgeConfigError", "make_judge"]
