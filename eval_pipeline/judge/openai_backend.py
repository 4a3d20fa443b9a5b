"""The OpenAI-compatible judge: the `openai` client against OpenAI, vLLM, Ollama or any compatible server.

One chat completion per distinct (claim, evidence) input, temperature 0 and a fixed seed, structured JSON
output (`response_format` json_schema; a server that ignores it is tolerated: the reply is parsed and
validated, and a malformed reply is retried like a transient error). Calls run on a bounded thread pool;
429, 5xx, timeouts and connection errors are retried with exponential backoff (base·2^attempt, capped), a
`Retry-After`/`retry-after-ms` header replacing the backoff when present. The client's own retries are
off, so every attempt is ours and counted. A call that still fails leaves its requests `incomplete`.
Tokens, cost and latency are recorded per call (every billed attempt counts, malformed ones included);
verdicts are cached by (model, prompt version, input hash), so unchanged inputs cost no call. With
`batch=True` the uncached inputs go through the Batch API (files + batches) instead, for nightly runs. Its options
are JudgeSettings (judge/settings.py), its prompts judge/prompts.py; the caller reads the API key and passes it in.
Over 400 lines: the live path and the Batch API path share the retry, cache and cost code kept here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Any

import openai
import polars as pl

from eval_pipeline.contracts.frames import canonical_json
from eval_pipeline.judge.base import VERDICTS, Judge, JudgeConfigError
from eval_pipeline.judge.cache import CachedVerdict, VerdictCache, input_hash
from eval_pipeline.judge.prompts import CLAIM_PROMPT_VERSION, CLAIM_SCHEMA, PAIR_SCHEMA, SYSTEM_PROMPTS
from eval_pipeline.judge.settings import JudgeSettings

RETRYABLE_STATUS = frozenset({408, 409, 429})
BATCH_TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
CHARS_PER_TOKEN = 4


@dataclass
class CallOutcome:
    """What one judged input came to: a parsed payload or a reason, and what it cost."""

    payload: dict[str, Any] | None
    reason: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    latency_ms: float | None = None
    attempts: int = 0
    cached: bool = False


@dataclass
class JudgeStats:
    """Counters of one judge instance: HTTP attempts, retries, the waits slept, cache hits, batches."""

    attempts: int = 0
    retries: int = 0
    waits_s: list[float] = field(default_factory=list)
    cache_hits: int = 0
    batches: list[str] = field(default_factory=list)


class _Retryable(Exception):
    """A failed attempt worth another try; `wait_s` is the server's Retry-After when it gave one."""

    def __init__(self, reason: str, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait_s = wait_s


class _Fatal(Exception):
    """A failed attempt that another try will not fix (400, 401, 404 …)."""


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a response asks the client to wait: `retry-after-ms`, `retry-after` in seconds or as an HTTP date."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def _json_object(content: str | None) -> tuple[dict[str, Any] | None, str | None]:
    if content is None:
        return None, "empty message content"
    text = content.strip()
    # Servers that ignore response_format often wrap JSON in a markdown fence.
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, flags=re.DOTALL)
    if fenced:
        text = fenced.group(1)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at column {exc.colno})"
    if not isinstance(value, dict):
        return None, f"JSON {type(value).__name__}, not an object"
    return value, None


def parse_claim_verdict(content: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(verdict payload, None) for a valid claim reply, (None, why) otherwise."""
    value, why = _json_object(content)
    if value is None:
        return None, why
    verdict = value.get("verdict")
    if not isinstance(verdict, str) or verdict.strip().upper() not in VERDICTS:
        return None, f"verdict {verdict!r} is not one of {', '.join(VERDICTS)}"
    quote, doc_id = value.get("evidence_quote"), value.get("evidence_doc_id")
    if quote is not None and not isinstance(quote, str):
        return None, "evidence_quote is not a string"
    if doc_id is not None and not isinstance(doc_id, str):
        return None, "evidence_doc_id is not a string"
    return {"verdict": verdict.strip().upper(), "evidence_quote": quote, "evidence_doc_id": doc_id}, None


def parse_pair_preference(content: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(preference payload, None) for a valid pairwise reply, (None, why) otherwise."""
    value, why = _json_object(content)
    if value is None:
        return None, why
    preference = value.get("preference")
    normalized = (
        {"a": "A", "b": "B", "tie": "tie"}.get(preference.strip().lower()) if isinstance(preference, str) else None
    )
    if normalized is None:
        return None, f"preference {preference!r} is not A, B or tie"
    reason = value.get("reason")
    return {"preference": normalized, "reason": reason if isinstance(reason, str) else None}, None


def claim_payload(claim: str | None, evidence: list[dict[str, Any]] | None) -> dict[str, Any]:
    """What the judge is shown for one claim (and what its cache key hashes)."""
    return {
        "claim": claim or "",
        "evidence": [{"doc_id": e.get("doc_id"), "text": e.get("text")} for e in evidence or []],
    }


def pair_payload(row: Mapping[str, Any]) -> dict[str, Any]:
    """What the judge is shown for one pairwise comparison."""
    return {
        "question": row.get("question") or "",
        "evidence": [{"doc_id": e.get("doc_id"), "text": e.get("text")} for e in row.get("evidence") or []],
        "answer_a": row.get("answer_a") or "",
        "answer_b": row.get("answer_b") or "",
    }


def _messages(prompt_version: str, payload: Mapping[str, Any]) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM_PROMPTS[prompt_version]},
        {"role": "user", "content": canonical_json(payload)},
    ]


def estimate_calls(
    requests: pl.DataFrame,
    cache: VerdictCache | None,
    model: str,
    prices: Mapping[str, float],
    prompt_version: str = CLAIM_PROMPT_VERSION,
    output_tokens_per_call: int = 60,
) -> dict[str, Any]:
    """Dry run: how many calls a set of claim requests needs after the cache, and their estimated tokens and cost.

    Input tokens are estimated at one token per 4 characters of the messages; output at
    `output_tokens_per_call`. `prices`: {"input_per_1k": …, "output_per_1k": …} in USD.
    """
    payloads: dict[str, dict[str, Any]] = {}
    for claim, evidence in requests.select("claim", "evidence").iter_rows():
        payload = claim_payload(claim, evidence)
        payloads.setdefault(input_hash({"kind": "claim", **payload}), payload)
    cached = cache.get_many(model, prompt_version, payloads) if cache is not None else {}
    needed = [payload for key, payload in payloads.items() if key not in cached]
    input_tokens = sum(
        math.ceil(sum(len(m["content"]) for m in _messages(prompt_version, p)) / CHARS_PER_TOKEN) for p in needed
    )
    output_tokens = len(needed) * output_tokens_per_call
    cost = input_tokens / 1000 * prices.get("input_per_1k", 0.0) + output_tokens / 1000 * prices.get(
        "output_per_1k", 0.0
    )
    return {
        "model": model,
        "prompt_version": prompt_version,
        "requests": requests.height,
        "unique_inputs": len(payloads),
        "cached": len(cached),
        "calls": len(needed),
        "est_input_tokens": input_tokens,
        "est_output_tokens": output_tokens,
        "est_cost_usd": round(cost, 6),
    }


def judge_version(model: str, prompt_version: str = CLAIM_PROMPT_VERSION) -> str:
    """The version of the OpenAI-compatible judge with this model and claim prompt."""
    return f"openai:{model}:{prompt_version}"


class OpenAIJudge(Judge):
    """Judge backed by any OpenAI-compatible chat-completions server (module docstring)."""

    def __init__(self, config: JudgeSettings, client: openai.OpenAI | None = None, api_key: str | None = None) -> None:
        """`api_key`: the value of $`config.api_key_env`, which the caller reads (unused when `client` is given)."""
        config.check_openai()
        self.config = config
        self.model = config.model
        self.version = judge_version(config.model, config.prompt_version)
        self.stats = JudgeStats()
        self._lock = threading.Lock()
        if client is None:
            if not api_key:
                raise JudgeConfigError(
                    f"the openai judge reads its API key from ${config.api_key_env}, which is not set "
                    "(local servers such as vLLM or Ollama accept any non-empty value)"
                )
            client = openai.OpenAI(api_key=api_key, base_url=config.base_url, max_retries=0, timeout=config.timeout_s)
        self.client = client
        self.cache = VerdictCache(config.cache_path) if config.cache_path else None

    def uncached(self) -> OpenAIJudge:
        """The same model, prompt and client with no verdict cache: every request is asked again."""
        return OpenAIJudge(dataclasses.replace(self.config, cache_path=None, batch=False), client=self.client)

    # ------------------------------------------------------------ frames in, frames out

    def _judge_claims(self, requests: pl.DataFrame) -> pl.DataFrame:
        items = (
            (key, claim_payload(claim, evidence))
            for key, claim, evidence in requests.select("request_key", "claim", "evidence").iter_rows()
        )

        def columns(payload: dict[str, Any], outcome: CallOutcome) -> dict[str, Any]:
            return {
                "verdict": payload.get("verdict"),
                "evidence_quote": payload.get("evidence_quote"),
                "evidence_doc_id": payload.get("evidence_doc_id"),
                "reason": outcome.reason,
            }

        return self._judge_items("claim", items, self.config.prompt_version, CLAIM_SCHEMA, parse_claim_verdict, columns)

    def _judge_pairs(self, requests: pl.DataFrame) -> pl.DataFrame:
        items = ((row["request_key"], pair_payload(row)) for row in requests.iter_rows(named=True))

        def columns(payload: dict[str, Any], outcome: CallOutcome) -> dict[str, Any]:
            return {
                "preference": payload.get("preference"),
                "reason": payload.get("reason") if outcome.payload is not None else outcome.reason,
            }

        return self._judge_items(
            "pair", items, self.config.pair_prompt_version, PAIR_SCHEMA, parse_pair_preference, columns
        )

    def _judge_items(self, kind, items, prompt_version, schema, parse, columns) -> pl.DataFrame:
        """One row per (request_key, payload) item; identical payloads share one cached or live call."""
        keys, payloads = [], {}
        for request_key, payload in items:
            digest = input_hash({"kind": kind, **payload})
            keys.append((request_key, digest))
            payloads.setdefault(digest, payload)
        outcomes = self._resolve(prompt_version, schema, parse, payloads)
        rows = []
        for request_key, digest in keys:
            outcome = outcomes[digest]
            rows.append(
                {
                    "request_key": request_key,
                    "status": "ok" if outcome.payload is not None else "incomplete",
                    **columns(outcome.payload or {}, outcome),
                    **_cost_columns(outcome),
                }
            )
        return pl.DataFrame(rows, infer_schema_length=None)

    # ------------------------------------------------------------ cache, then calls

    def _resolve(
        self,
        prompt_version: str,
        schema: dict[str, Any],
        parse: Callable[[str | None], tuple[dict[str, Any] | None, str | None]],
        payloads: dict[str, dict[str, Any]],
    ) -> dict[str, CallOutcome]:
        outcomes: dict[str, CallOutcome] = {}
        if self.cache is not None:
            for digest, hit in self.cache.get_many(self.model, prompt_version, payloads).items():
                outcomes[digest] = CallOutcome(
                    hit.payload, input_tokens=0, output_tokens=0, cost_usd=0.0, latency_ms=0.0, cached=True
                )
            self.stats.cache_hits += len(outcomes)
        todo = {digest: payload for digest, payload in payloads.items() if digest not in outcomes}
        if todo:
            run = self._run_batch if self.config.batch else self._run_concurrent
            outcomes.update(run(prompt_version, schema, parse, todo))
        return outcomes

    def _remember(self, prompt_version: str, digest: str, outcome: CallOutcome) -> CallOutcome:
        """Cache a completed verdict as soon as it arrives, so a run that dies later keeps what it paid for."""
        if outcome.payload is not None and self.cache is not None:
            self.cache.put(
                self.model,
                prompt_version,
                digest,
                CachedVerdict(outcome.payload, outcome.input_tokens, outcome.output_tokens, outcome.cost_usd),
            )
        return outcome

    def _run_concurrent(self, prompt_version, schema, parse, todo) -> dict[str, CallOutcome]:
        def one(item: tuple[str, dict[str, Any]]) -> tuple[str, CallOutcome]:
            digest, payload = item
            return digest, self._remember(
                prompt_version, digest, self._complete(_messages(prompt_version, payload), schema, parse)
            )

        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(todo))) as pool:
            return dict(pool.map(one, todo.items()))

    def _cost(self, input_tokens: int, output_tokens: int, factor: float = 1.0) -> float:
        return factor * (
            input_tokens / 1000 * self.config.price_input_per_1k
            + output_tokens / 1000 * self.config.price_output_per_1k
        )

    def _backoff(self, attempt: int) -> float:
        return min(self.config.backoff_base_s * (2**attempt), self.config.backoff_max_s)

    def _with_retries(self, attempt_once: Callable[[], Any]) -> tuple[Any, str | None, int]:
        """(result, None, attempts) once an attempt succeeds; (None, reason, attempts) when retries run out."""
        reason = "no attempt made"
        attempts = 0
        for attempt in range(self.config.max_retries + 1):
            attempts += 1
            with self._lock:
                self.stats.attempts += 1
            try:
                return attempt_once(), None, attempts
            except _Fatal as exc:
                return None, str(exc), attempts
            except _Retryable as exc:
                reason = exc.reason
                if attempt == self.config.max_retries:
                    break
                wait = exc.wait_s if exc.wait_s is not None else self._backoff(attempt)
                wait = min(wait, self.config.max_retry_after_s)
                with self._lock:
                    self.stats.retries += 1
                    self.stats.waits_s.append(wait)
                time.sleep(wait)
        return None, f"failed after {attempts} attempts: {reason}", attempts

    def _api(self, call: Callable[[], Any]) -> Any:
        """Run one client call, translating its errors into retryable or fatal ones."""
        try:
            return call()
        except openai.APITimeoutError as exc:
            raise _Retryable(f"timeout after {self.config.timeout_s:g}s") from exc
        except openai.APIConnectionError as exc:
            raise _Retryable(f"connection error: {exc}") from exc
        except openai.APIStatusError as exc:
            status = exc.status_code
            if status in RETRYABLE_STATUS or status >= 500:
                raise _Retryable(f"HTTP {status}", retry_after_seconds(exc.response.headers)) from exc
            body = exc.body if isinstance(exc.body, dict) else {}
            raise _Fatal(f"HTTP {status}: {body.get('message') or exc.message}") from exc

    def _retry_call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Any, str | None, int]:
        """A client call with our retries: (result, None, attempts) or (None, reason, attempts)."""
        return self._with_retries(lambda: self._api(lambda: method(*args, **kwargs)))

    def _complete(self, messages, schema, parse) -> CallOutcome:
        tokens = {"input": 0, "output": 0, "latency_ms": None}

        def attempt_once() -> dict[str, Any]:
            started = time.perf_counter()
            # The raw response skips building the client's typed models: the reply is parsed and validated
            # here anyway, and the saved CPU is what bounds calls per second on a busy host.
            response = self._api(
                lambda: self.client.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=messages,
                    temperature=0,
                    seed=self.config.seed,
                    max_tokens=self.config.max_output_tokens,
                    response_format={"type": "json_schema", "json_schema": schema},
                )
            )
            tokens["latency_ms"] = (time.perf_counter() - started) * 1000.0
            try:
                body = json.loads(response.text)
            except json.JSONDecodeError as exc:
                raise _Retryable(f"response body is not JSON ({exc.msg})") from exc
            tokens_in, tokens_out, content = _completion_parts(body)
            tokens["input"] += tokens_in
            tokens["output"] += tokens_out
            payload, why = parse(content)
            if payload is None:
                raise _Retryable(f"malformed reply: {why}")
            return payload

        payload, reason, attempts = self._with_retries(attempt_once)
        return CallOutcome(
            payload,
            reason,
            tokens["input"],
            tokens["output"],
            self._cost(tokens["input"], tokens["output"]),
            tokens["latency_ms"],
            attempts,
        )

    # ------------------------------------------------------------ Batch API

    def _run_batch(self, prompt_version, schema, parse, todo) -> dict[str, CallOutcome]:
        lines = [
            canonical_json(
                {
                    "custom_id": digest,
                    "method": "POST",
                    "url": "/v1/chat/completions",
                    "body": {
                        "model": self.model,
                        "messages": _messages(prompt_version, payload),
                        "temperature": 0,
                        "seed": self.config.seed,
                        "max_tokens": self.config.max_output_tokens,
                        "response_format": {"type": "json_schema", "json_schema": schema},
                    },
                }
            )
            for digest, payload in todo.items()
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")

        def failed(reason: str) -> dict[str, CallOutcome]:
            return {digest: CallOutcome(None, reason) for digest in todo}

        upload, reason, _ = self._retry_call(
            self.client.files.create, file=("judge-batch.jsonl", data), purpose="batch"
        )
        if upload is None:
            return failed(f"batch input upload failed: {reason}")
        batch, reason, _ = self._retry_call(
            self.client.batches.create,
            input_file_id=upload.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"judge_version": self.version},
        )
        if batch is None:
            return failed(f"batch creation failed: {reason}")
        with self._lock:
            self.stats.batches.append(batch.id)
        deadline = time.monotonic() + self.config.batch_timeout_s
        while batch.status not in BATCH_TERMINAL:
            if time.monotonic() >= deadline:
                return failed(f"batch {batch.id} still {batch.status} after {self.config.batch_timeout_s:g}s")
            time.sleep(self.config.batch_poll_s)
            polled, reason, _ = self._retry_call(self.client.batches.retrieve, batch.id)
            if polled is None:
                return failed(f"batch {batch.id} could not be polled: {reason}")
            batch = polled
        if batch.status != "completed":
            return failed(f"batch {batch.id} ended {batch.status}")
        outcomes = {}
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content, reason, _ = self._retry_call(self.client.files.content, file_id)
            if content is None:
                return failed(f"batch {batch.id} output {file_id} could not be read: {reason}")
            for raw in content.text.splitlines():
                if raw.strip():
                    digest, outcome = self._batch_line(raw, parse)
                    if digest in todo:
                        outcomes[digest] = outcome
        for digest in todo:
            outcomes.setdefault(digest, CallOutcome(None, f"batch {batch.id} returned no result for this input"))
        return {digest: self._remember(prompt_version, digest, outcome) for digest, outcome in outcomes.items()}

    def _batch_line(self, raw: str, parse) -> tuple[str | None, CallOutcome]:
        try:
            line = json.loads(raw)
        except json.JSONDecodeError:
            return None, CallOutcome(None, "unreadable batch output line")
        digest = line.get("custom_id")
        response = line.get("response") or {}
        body = response.get("body") or {}
        if line.get("error") or response.get("status_code") != 200:
            error = line.get("error") or body.get("error") or {}
            message = error.get("message") if isinstance(error, dict) else str(error)
            return digest, CallOutcome(None, f"batch request failed: HTTP {response.get('status_code')}: {message}")
        tokens_in, tokens_out, content = _completion_parts(body)
        payload, why = parse(content)
        cost = self._cost(tokens_in, tokens_out, self.config.batch_price_factor)
        if payload is None:
            return digest, CallOutcome(None, f"malformed reply in batch: {why}", tokens_in, tokens_out, cost, None, 1)
        return digest, CallOutcome(payload, None, tokens_in, tokens_out, cost, None, 1)


def _completion_parts(body: Any) -> tuple[int, int, str | None]:
    """(prompt tokens, completion tokens, message content) of a chat.completion JSON body; tolerant of gaps."""
    if not isinstance(body, dict):
        return 0, 0, None
    usage = body.get("usage") or {}
    choices = body.get("choices") or [{}]
    message = (choices[0] or {}).get("message") or {}
    return usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0, message.get("content")


def _cost_columns(outcome: CallOutcome) -> dict[str, Any]:
    return {
        "input_tokens": outcome.input_tokens,
        "output_tokens": outcome.output_tokens,
        "cost_usd": outcome.cost_usd,
        "latency_ms": outcome.latency_ms,
        "cached": outcome.cached,
    }
