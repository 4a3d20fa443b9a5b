"""JudgeSettings, the one definition of the judge's configuration, and how EVAL_PIPELINE_JUDGE_* variables map to it.

The OpenAI judge takes it, the Dagster `judge` resource (defs/resources.JudgeConfig) converts to it and the CLI reads
it with `from_env`. Nothing here reads the process environment: the edge (the CLI, a Dagster resource through
`EnvVar`) passes the variables in, and reads the API key that `api_key_env` names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from eval_pipeline.judge.base import JudgeConfigError
from eval_pipeline.judge.prompts import CLAIM_PROMPT_VERSION, PAIR_PROMPT_VERSION, SYSTEM_PROMPTS

BACKENDS = ("local", "openai", "model")
ENV_PREFIX = "EVAL_PIPELINE_JUDGE_"
_OPENAI = {"backend": "openai"}

# The EVAL_PIPELINE_JUDGE_<NAME> variables of the openai backend, in the order they are read: (NAME, field, type).
_OPENAI_VARIABLES: tuple[tuple[str, str, type], ...] = (
    ("MODEL", "model", str),
    ("BASE_URL", "base_url", str),
    ("API_KEY_ENV", "api_key_env", str),
    ("CACHE", "cache_path", str),
    ("CONCURRENCY", "concurrency", int),
    ("PRICE_INPUT_PER_1K", "price_input_per_1k", float),
    ("PRICE_OUTPUT_PER_1K", "price_output_per_1k", float),
)
# Every variable `JudgeSettings.from_env` reads, for an edge that reads them one by one (Dagster's EnvVar).
ENV_VARS = tuple(
    ENV_PREFIX + name for name in ("BACKEND", "PROFILE", "MODEL_DIR", *(v[0] for v in _OPENAI_VARIABLES), "BATCH")
)


def _openai(default: Any) -> Any:
    """A field of the openai backend (OPENAI_OPTIONS)."""
    return field(default=default, metadata=_OPENAI)


@dataclass(frozen=True)
class JudgeSettings:
    """Which judge grades claims and how: the offline local judge (default), an NLI model in a local folder
    (`model_dir`), or any OpenAI-compatible server (the fields of OPENAI_OPTIONS); `profile`: the path of a judge
    profile for the local and model backends."""

    backend: str = "local"
    profile: str | None = None
    model_dir: str = ""
    model: str = _openai("")
    base_url: str | None = _openai(None)
    # the name of the variable holding the API key; the edge reads it and hands the judge the value
    api_key_env: str = _openai("OPENAI_API_KEY")
    prompt_version: str = _openai(CLAIM_PROMPT_VERSION)
    pair_prompt_version: str = _openai(PAIR_PROMPT_VERSION)
    concurrency: int = _openai(8)
    max_retries: int = _openai(4)
    timeout_s: float = _openai(60.0)
    backoff_base_s: float = _openai(1.0)
    backoff_max_s: float = _openai(60.0)
    max_retry_after_s: float = _openai(300.0)
    price_input_per_1k: float = _openai(0.0)
    price_output_per_1k: float = _openai(0.0)
    cache_path: str | None = _openai(None)
    seed: int = _openai(0)
    max_output_tokens: int = _openai(400)
    batch: bool = _openai(False)
    batch_poll_s: float = _openai(30.0)
    batch_timeout_s: float = _openai(24 * 3600.0)
    batch_price_factor: float = _openai(0.5)
    # how a pipeline run uses its judge: earlier runs' verdicts reused, claims asked again for self-consistency
    reuse_verdicts: bool = True
    self_consistency_sample: int = 50

    @classmethod
    def from_env(cls, environ: Mapping[str, str], backend: str | None = None) -> JudgeSettings:
        """The settings the EVAL_PIPELINE_JUDGE_* variables of `environ` describe (unset or empty: the default);
        `backend` overrides EVAL_PIPELINE_JUDGE_BACKEND. Only the chosen backend's variables are read."""

        def get(name: str) -> str:
            return environ.get(ENV_PREFIX + name, "")

        backend = backend or get("BACKEND") or "local"
        values: dict[str, Any] = {"backend": backend, "profile": get("PROFILE") or None}
        if backend == "model":
            values["model_dir"] = get("MODEL_DIR")
        elif backend == "openai":
            for name, key, kind in _OPENAI_VARIABLES:
                if get(name):
                    try:
                        values[key] = kind(get(name))
                    except ValueError as exc:
                        raise JudgeConfigError(f"{ENV_PREFIX}{name}={get(name)!r} is not a number") from exc
            values["batch"] = get("BATCH").lower() in {"1", "true", "yes"}
        return cls(**values)

    def backend_options(self) -> dict[str, Any]:
        """The options make_judge takes for this backend: the model folder, the openai fields, or none (local)."""
        if self.backend == "model":
            return {"model_dir": self.model_dir}
        if self.backend == "openai":
            return {name: getattr(self, name) for name in OPENAI_OPTIONS}
        return {}

    def check_openai(self) -> None:
        """JudgeConfigError unless these settings make an openai judge."""
        if not self.model:
            raise JudgeConfigError("the openai judge needs a model name")
        for version in (self.prompt_version, self.pair_prompt_version):
            if version not in SYSTEM_PROMPTS:
                raise JudgeConfigError(f"unknown prompt version {version!r}; known: {', '.join(SYSTEM_PROMPTS)}")
        if self.concurrency < 1 or self.max_retries < 0:
            raise JudgeConfigError("concurrency must be >= 1 and max_retries >= 0")


# The fields the openai backend takes, in their order.
OPENAI_OPTIONS = tuple(f.name for f in fields(JudgeSettings) if f.metadata.get("backend") == "openai")
