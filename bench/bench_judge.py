"""Benchmark of the grounding judge (not a test).

1. Local judge throughput: synthetic RAG traces (default 100,000 answers over a 2,000-document corpus, five
   context chunks each; answers mix copied, number-changed, plan-swapped and invented sentences, inline
   citations and pleasantries), timed through extract_claims → judge_claims → score_grounding. Reports
   claims per second of the judge step and of the whole path.
2. OpenAI backend concurrency: the real `openai` client against the loopback server with a fixed latency per
   completion (default 200 ms); achieved calls/s against the ideal concurrency ÷ latency.

    python bench/bench_judge.py                      # both parts, defaults
    python bench/bench_judge.py --answers 10000 --skip-openai
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import resource
import subprocess
import sys
import time

import polars as pl

from eval_pipeline.contracts.frames import CASES_SCHEMA, TRACES_SCHEMA
from eval_pipeline.judge import make_judge
from eval_pipeline.scoring.claims import extract_claims, judge_claims
from eval_pipeline.scoring.grounding import score_grounding
from eval_pipeline.settings import ScoringSettings
from eval_pipeline_harness.loopback_server import LoopbackServer, quoting_responder

SYLLABLES = ["ka", "lo", "mi", "ter", "van", "sul", "dor", "pe", "ri", "nax", "bel", "cu", "fro", "gin", "hal", "jus"]
PLANS = ["Annual", "Monthly", "Quarterly"]
TIERS = ["Pro", "Basic", "Enterprise", "Starter"]
UNITS = ["days", "business days", "hours", "seats", "percent"]
PLEASANTRIES = ["Thanks for reaching out!", "Let me know if you need anything else.", "Happy to help!"]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def _sentence(rng: random.Random, vocab: list[str]) -> str:
    words = [rng.choice(vocab) for _ in range(rng.randint(5, 10))]
    plan, tier = rng.choice(PLANS), rng.choice(TIERS)
    number, unit = rng.randint(2, 90), rng.choice(UNITS)
    return f"{plan} {tier} {' '.join(words[:3])} {number} {unit} {' '.join(words[3:])}."


def synthetic_run(n_answers: int, n_docs: int = 2000, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(traces, cases): n_answers rag traces over a synthetic corpus, deterministic for a seed."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 4000)
    docs = [(f"doc-{i}", [_sentence(rng, vocab) for _ in range(rng.randint(4, 8))]) for i in range(n_docs)]
    traces = []
    for t in range(n_answers):
        chosen = rng.sample(docs, 5)
        parts = []
        for _ in range(rng.randint(2, 4)):
            doc_id, sentences = rng.choice(chosen)
            sentence = rng.choice(sentences)[:-1]
            kind = rng.random()
            if kind < 0.15:  # another number: a contradiction
                sentence = " ".join(str(int(w) + 7) if w.isdigit() else w for w in sentence.split())
            elif kind < 0.25:  # another plan
                sentence = sentence.replace(
                    sentence.split()[0], rng.choice([p for p in PLANS if p != sentence.split()[0]]), 1
                )
            elif kind < 0.40:  # invented
                sentence = _sentence(rng, vocab)[:-1]
            parts.append(f"{sentence} [doc:{doc_id}]." if rng.random() < 0.5 else f"{sentence}.")
        if rng.random() < 0.5:
            parts.append(rng.choice(PLEASANTRIES))
        traces.append(
            {
                "run_id": "bench",
                "trace_id": f"bench-{t}",
                "case_id": f"case-{t % 1000}",
                "attempt": 1 + t // 1000 % 3,
                "status": "ok",
                "has_answer": True,
                "answer_text": " ".join(parts),
                "context": [
                    {"doc_id": doc_id, "text": " ".join(sentences), "tokens": None} for doc_id, sentences in chosen
                ],
            }
        )
    trace_frame = (
        pl.DataFrame(traces, schema={k: TRACES_SCHEMA[k] for k in traces[0]})
        .with_columns(
            [pl.lit(None, dtype).alias(name) for name, dtype in TRACES_SCHEMA.items() if name not in traces[0]]
        )
        .select(list(TRACES_SCHEMA))
    )
    cases = (
        pl.DataFrame({"case_id": [f"case-{i}" for i in range(1000)]})
        .with_columns(lanes=pl.lit(["rag"]), expect_refusal=pl.lit(False))
        .with_columns(
            [
                pl.lit(None, dtype).alias(name)
                for name, dtype in CASES_SCHEMA.items()
                if name not in ("case_id", "lanes", "expect_refusal")
            ]
        )
    )
    return trace_frame, cases.select(list(CASES_SCHEMA)).cast(CASES_SCHEMA)


def bench_local(n_answers: int, seed: int) -> dict:
    """Time claim extraction, the local judge and grounding scores on n_answers synthetic answers."""
    started = time.perf_counter()
    traces, cases = synthetic_run(n_answers, seed=seed)
    generated = time.perf_counter() - started
    judge = make_judge("local")
    t0 = time.perf_counter()
    claims = extract_claims(traces)
    t1 = time.perf_counter()
    judged = judge_claims(claims, traces, judge)
    t2 = time.perf_counter()
    scores = score_grounding(judged, traces, cases, ScoringSettings())
    t3 = time.perf_counter()
    verdicts = judged["verdict"].value_counts().sort("verdict")
    return {
        "answers": n_answers,
        "claims": claims.height,
        "generate_s": round(generated, 2),
        "extract_s": round(t1 - t0, 2),
        "judge_s": round(t2 - t1, 2),
        "score_s": round(t3 - t2, 2),
        "judge_claims_per_s": round(claims.height / (t2 - t1)),
        "end_to_end_claims_per_s": round(claims.height / (t3 - t0)),
        "verdicts": dict(verdicts.iter_rows()),
        "grounding_pass_rate": round((scores["grounding_stage"] == "pass").mean(), 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }


@contextlib.contextmanager
def loopback_process(latency_s: float):
    """The loopback server in its own process (so server and client threads do not share one interpreter lock)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "eval_pipeline_harness.loopback_server", "--latency-ms", str(latency_s * 1000)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield process.stdout.readline().strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def bench_openai(concurrency: int, latency_s: float, calls_per_worker: int, separate_process: bool = True) -> dict:
    """Achieved calls/s of the openai backend against the loopback server, vs concurrency / latency."""
    os.environ.setdefault("BENCH_JUDGE_KEY", "sk-loopback")
    n = concurrency * calls_per_worker
    evidence = [{"doc_id": "doc-1", "text": "Annual Pro plans have a 14 day refund window."}]
    requests = pl.DataFrame(
        {
            "request_key": [f"k{i}" for i in range(n)],
            "claim": [f"Claim number {i}." for i in range(n)],
            "evidence": [evidence] * n,
        }
    )
    with contextlib.ExitStack() as stack:
        if separate_process:
            base_url = stack.enter_context(loopback_process(latency_s))
        else:
            base_url = stack.enter_context(LoopbackServer(quoting_responder, latency_s=latency_s)).base_url
        judge = make_judge(
            "openai",
            model="bench-model",
            base_url=base_url,
            api_key_env="BENCH_JUDGE_KEY",
            api_key=os.environ["BENCH_JUDGE_KEY"],
            concurrency=concurrency,
            timeout_s=30.0,
        )
        # One warm-up call per worker opens the connections, as a long run would have them open.
        judge.judge_claims(requests.head(concurrency).with_columns(pl.format("warm-{}", "claim").alias("claim")))
        started = time.perf_counter()
        results = judge.judge_claims(requests)
        wall = time.perf_counter() - started
    calls = judge.stats.attempts - concurrency
    ideal = concurrency / latency_s
    achieved = calls / wall
    return {
        "concurrency": concurrency,
        "latency_ms": round(latency_s * 1000),
        "server": "separate process" if separate_process else "same process",
        "calls": calls,
        "wall_s": round(wall, 2),
        "ideal_calls_per_s": round(ideal, 1),
        "achieved_calls_per_s": round(achieved, 1),
        "efficiency": round(achieved / ideal, 3),
        "all_ok": bool((results["status"] == "ok").all()),
        "median_call_latency_ms": round(results["latency_ms"].median(), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--answers", type=int, default=100_000, help="synthetic answers for the local judge (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 16, 32], help="openai backend thread counts")
    parser.add_argument(
        "--latency-ms", type=float, default=200.0, help="loopback latency per completion (default %(default)s)"
    )
    parser.add_argument("--calls-per-worker", type=int, default=25, help="calls per thread (default %(default)s)")
    parser.add_argument(
        "--same-process", action="store_true", help="run the loopback server in this process (GIL shared)"
    )
    parser.add_argument("--skip-local", action="store_true")
    parser.add_argument("--skip-openai", action="store_true")
    parser.add_argument("--json-out", help="also write the figures as JSON here")
    args = parser.parse_args(argv)
    figures: dict = {"polars": pl.__version__, "cpus": os.cpu_count()}
    if not args.skip_local:
        figures["local"] = bench_local(args.answers, args.seed)
        print(json.dumps({"local": figures["local"]}, indent=2), flush=True)
    if not args.skip_openai:
        figures["openai"] = [
            bench_openai(c, args.latency_ms / 1000, args.calls_per_worker, not args.same_process)
            for c in args.concurrency
        ]
        print(json.dumps({"openai": figures["openai"]}, indent=2), flush=True)
    if args.json_out:
        with open(args.json_out, "w") as handle:
            json.dump(figures, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
