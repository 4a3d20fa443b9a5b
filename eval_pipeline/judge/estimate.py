"""Run estimation (`judge-estimate`): the judge calls, tokens and cost a run's grounding and citation checks need.

Counted through the pipeline's own judging path with a judge that answers nothing; the CLI passes in what comes from
the layers above judge/ (the run's EvalConfig, the scorers, the judge a pipeline run would build) and the environment.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

from eval_pipeline.io.storage import Location
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.judge.base import REQUEST_SCHEMA, Judge, JudgeConfigError
from eval_pipeline.judge.cache import VerdictCache
from eval_pipeline.judge.openai_backend import estimate_calls, judge_version
from eval_pipeline.judge.prompts import CLAIM_PROMPT_VERSION
from eval_pipeline.judge.reuse import VERDICT_STORE, ReusingJudge
from eval_pipeline.judge.settings import JudgeSettings
from eval_pipeline.settings import ScoringSettings


class RunConfig(Protocol):
    """Where a run's inputs, gate policy and warehouse are: the Dagster layer's EvalConfig, which the CLI passes in."""

    def location(self) -> Location: ...

    def settings(self, manifest: dict | None = None) -> ScoringSettings: ...

    def warehouse(self) -> Warehouse: ...


@dataclass(frozen=True)
class Scorers:
    """The scoring layer's functions a run's rag answers go through in a pipeline run; judge/ sits below scoring, so
    the CLI passes them in (scoring.common.lane_traces, scoring.claims.extract_claims and judge_claims,
    scoring.citations.score_citations)."""

    lane_traces: Callable[..., pl.DataFrame]
    extract_claims: Callable[..., pl.DataFrame]
    judge_claims: Callable[..., pl.DataFrame]
    score_citations: Callable[..., Any]


def estimate_judge(
    model: str | None, environ: Mapping[str, str], run_judge: Callable[[JudgeSettings], Judge]
) -> tuple[str, str | None]:
    """(judge version, openai model or None) of the judge estimated: the openai judge of `model` when given, else the
    judge a pipeline run would use: the EVAL_PIPELINE_JUDGE_* variables of `environ`, built by `run_judge` (which
    applies the gate policy's profile)."""
    if model:
        return judge_version(model), model
    settings = JudgeSettings.from_env(environ)
    if settings.backend == "openai":
        # Not built: the openai judge asks for its API key, which a dry run must not need; its version is model and
        # prompt.
        if not settings.model:
            raise JudgeConfigError("the openai judge needs EVAL_PIPELINE_JUDGE_MODEL; or pass --model")
        return judge_version(settings.model, settings.prompt_version), settings.model
    return run_judge(settings).version, None


def _run_inputs(location, run_id: str, warehouse) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, str]:
    """(traces, cases, corpus, where from): the de-identified inputs of the run's last materialization, which are
    what its judge saw, else the raw inputs under the data root."""
    from eval_pipeline.io.ingest import parse_traces, read_raw_lines
    from eval_pipeline.io.inputs import load_cases, load_corpus
    from eval_pipeline.io.loaders import load_manifest

    if warehouse is not None:
        tables = [warehouse.read(name, run_id) for name in ("deid_traces", "deid_cases", "deid_corpus")]
        if all(t is not None and t.height for t in tables):
            return (*tables, "warehouse")
    manifest = load_manifest(location, run_id)
    cases = load_cases(location, manifest.dataset_version).frame
    corpus = load_corpus(location, manifest.corpus_version).frame
    return parse_traces(read_raw_lines(location, run_id), cases, run_id).traces, cases, corpus, "data"


class _DryRun(Judge):
    """A judge that answers nothing: every verdict is incomplete, and the requests that reach it are the calls a real
    judge would get, kept per phase."""

    def __init__(self, version: str, model: str | None) -> None:
        self.version = version
        self.model = model or version
        self.phase = "grounding"
        self.asked: dict[str, list[pl.DataFrame]] = {}

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        self.asked.setdefault(self.phase, []).append(
            requests.select("request_key", "claim", "evidence", "evidence_key")
        )
        return requests.select("request_key", status=pl.lit("incomplete"), reason=pl.lit("dry run: not judged"))

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        return requests.select("request_key", status=pl.lit("incomplete"), reason=pl.lit("dry run: not judged"))


class _CountedReuse(ReusingJudge):
    """ReusingJudge over a dry run that counts, per phase, the requests it is given and the verdicts it reuses."""

    def __init__(self, inner: _DryRun, known: pl.LazyFrame | None) -> None:
        super().__init__(inner, known)
        self.requests: dict[str, int] = {}
        self.reused_in: dict[str, int] = {}

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        phase, before = self.inner.phase, self.reused
        result = super()._judge_claims(requests)
        self.requests[phase] = self.requests.get(phase, 0) + requests.height
        self.reused_in[phase] = self.reused_in.get(phase, 0) + self.reused - before
        return result


def estimate_run(
    config: RunConfig,
    run_id: str,
    scorers: Scorers,
    *,
    model: str | None,
    environ: Mapping[str, str],
    run_judge: Callable[[JudgeSettings], Judge],
    prices: Mapping[str, float],
    cache_path: str | None,
    output_tokens_per_call: int = 60,
) -> dict[str, Any]:
    """Calls and cost the grounding and citation checks of one run would need, before spending anything.

    The run's claims go through the pipeline's own judging path (`scorers`) with a judge that answers nothing: a
    request whose verdict judge_verdicts (in `config`'s warehouse, default DATA/warehouse) holds for the judge version
    (estimate_judge of `model`, `environ` and `run_judge`) is reused as in a run, every other one is a call, unless the
    openai judge's cache at `cache_path` has it. A citation pair that a reused grounding verdict settles needs no
    call; the pairs of claims not judged yet are counted as if none were settled.
    """
    from eval_pipeline.io.loaders import load_manifest

    location = config.location()
    settings = config.settings(load_manifest(location, run_id).model_dump())
    version, openai_model = estimate_judge(model, environ, run_judge)
    store = config.warehouse()
    known = store.scan(VERDICT_STORE)
    traces, cases, corpus, inputs = _run_inputs(location, run_id, store if store.exists("deid_traces") else None)
    rag = scorers.lane_traces(traces, cases, "rag").select(traces.columns)
    claims = scorers.extract_claims(rag, settings.refusal_phrases)
    dry = _DryRun(version, openai_model)
    judge = _CountedReuse(dry, known)
    judged = scorers.judge_claims(claims, rag, judge)
    dry.phase = "citations"
    scorers.score_citations(judged, rag, corpus, judge, settings, cases=cases)
    # Only the openai judge keeps a call cache; the local and model judges are reused through judge_verdicts alone.
    cache = VerdictCache(cache_path) if openai_model and cache_path and os.path.exists(cache_path) else None
    parts = {}
    for name, phase in (("grounding", "grounding"), ("citations_at_most", "citations")):
        asked = pl.concat(dry.asked.get(phase) or [pl.DataFrame(schema=REQUEST_SCHEMA)], how="vertical_relaxed")
        part = estimate_calls(
            asked, cache, openai_model or version, prices, CLAIM_PROMPT_VERSION, output_tokens_per_call
        )
        reused = judge.reused_in.get(phase, 0)
        parts[name] = {
            **part,
            "requests": judge.requests.get(phase, 0),
            "unique_inputs": part["unique_inputs"] + reused,
            "in_judge_verdicts": reused,
        }
    total = {
        k: parts["grounding"][k] + parts["citations_at_most"][k]
        for k in ("calls", "est_input_tokens", "est_output_tokens", "est_cost_usd")
    }
    return {
        "run_id": run_id,
        "judge_version": version,
        "model": openai_model,
        "inputs": inputs,
        "traces": rag.height,
        "claims": claims.height,
        "judge_verdicts": store.uri(VERDICT_STORE) if known is not None else None,
        "cache": cache_path if cache is not None else None,
        **parts,
        "total_at_most": {**total, "est_cost_usd": round(total["est_cost_usd"], 6)},
    }
