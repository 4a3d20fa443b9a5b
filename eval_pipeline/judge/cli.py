"""`eval-pipeline calibrate` and `eval-pipeline judge-estimate`: judge statistics and cost, from the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import polars as pl
from pydantic import ValidationError

from eval_pipeline.contracts.frames import GROUNDING_LABELS_SCHEMA
from eval_pipeline.contracts.models import GroundingLabel
from eval_pipeline.io.loaders import (
    describe_validation_error,
    iter_lines,
    parse_json_line,
)
from eval_pipeline.io.storage import InputError, open_location
from eval_pipeline.judge.base import VERDICTS
from eval_pipeline.settings import ScoringSettings

DEFAULT_ESTIMATE_MODEL = "gpt-4o-mini"


def _read(path: str) -> bytes:
    directory, name = os.path.split(path.rstrip("/"))
    location = open_location(directory or ".")
    if not location.exists(name):
        raise InputError(f"{path} does not exist")
    return location.read_bytes(name)


def _jsonl(path: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; a bad line raises InputError naming it."""
    records = []
    for number, raw in iter_lines(_read(path)):
        if not raw.strip():
            continue
        value, reason = parse_json_line(raw)
        if value is None:
            raise InputError(f"{path}:{number}: {reason}")
        records.append((number, value))
    return records


def read_verdicts(path: str) -> pl.DataFrame:
    """A verdicts JSONL file (trace_id, claim, verdict, optional judge_version) as judged claims."""
    rows = []
    for number, value in _jsonl(path):
        trace_id, claim, verdict = value.get("trace_id"), value.get("claim"), value.get("verdict")
        if not isinstance(trace_id, str) or not isinstance(claim, str) or verdict not in VERDICTS:
            raise InputError(f"{path}:{number}: a verdict line needs string trace_id and claim and a verdict in {', '.join(VERDICTS)}")
        rows.append({"trace_id": trace_id, "claim": claim, "verdict": verdict,
                     "judge_version": str(value.get("judge_version") or "external"), "status": "ok"})
    frame = pl.DataFrame(rows, schema={"trace_id": pl.String, "claim": pl.String, "verdict": pl.String, "judge_version": pl.String, "status": pl.String})
    return frame.with_columns(run_id=pl.lit(None, pl.String), claim_index=pl.int_range(pl.len(), dtype=pl.Int64).over("judge_version", "trace_id"))


def read_labels(path: str) -> pl.DataFrame:
    """A grounding labels JSONL file as a GROUNDING_LABELS_SCHEMA frame."""
    rows = []
    for number, value in _jsonl(path):
        try:
            label = GroundingLabel.model_validate(value)
        except ValidationError as exc:
            raise InputError(f"{path}:{number}: {describe_validation_error(exc)}") from exc
        rows.append({**label.model_dump(), "source_file": path, "source_line": number})
    return pl.DataFrame(rows, schema=GROUNDING_LABELS_SCHEMA)


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _print_calibration(calibration: pl.DataFrame) -> None:
    for row in calibration.iter_rows(named=True):
        print(f"judge {row['judge_version']}  level {row['level']}")
        print(f"  n {row['n']}  agreement {_fmt(row['agreement'])}  balanced_accuracy {_fmt(row['balanced_accuracy'])}")
        print(f"  cohen_kappa {_fmt(row['cohen_kappa'])}  95% CI [{_fmt(row['kappa_ci_low'])}, {_fmt(row['kappa_ci_high'])}]")
        gate = "yes" if row["may_gate"] else "no"
        print(f"  may_gate {gate} (needs kappa >= {row['min_kappa']:g} and n >= {row['min_n']})")
        print(f"  unmatched labels {row['n_unmatched_labels']}  judge incomplete {row['n_judge_incomplete']}")
        confusion = json.loads(row["confusion"])
        columns = list(next(iter(confusion.values()), {}).keys())
        print("  confusion (rows: human, columns: judge)")
        print("    " + " " * 16 + "".join(f"{c:>17}" for c in columns))
        for truth, counts in confusion.items():
            print(f"    {truth:<16}" + "".join(f"{counts.get(c, 0):>17}" for c in columns))


def run_calibrate(args: argparse.Namespace) -> int:
    """Handler of `calibrate`."""
    from eval_pipeline.scoring.calibration import calibrate

    try:
        verdicts, labels = read_verdicts(args.verdicts), read_labels(args.labels)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = ScoringSettings(min_kappa=args.min_kappa, min_n=args.min_n)
    calibration = calibrate(verdicts, labels, settings, n_boot=args.n_boot, seed=args.seed)
    if args.json:
        print(json.dumps(calibration.to_dicts(), indent=2))
    else:
        _print_calibration(calibration)
    return 0


def estimate_run(data: str, run_id: str, model: str, prices: dict[str, float], cache_path: str | None,
                 output_tokens_per_call: int = 60) -> dict[str, Any]:
    """Calls and cost the grounding and citation checks of one run would need, before spending anything."""
    from eval_pipeline.io.ingest import parse_traces, read_raw_lines
    from eval_pipeline.io.loaders import load_cases, load_corpus, load_manifest
    from eval_pipeline.judge.cache import VerdictCache
    from eval_pipeline.judge.openai_backend import CLAIM_PROMPT_VERSION, estimate_calls
    from eval_pipeline.scoring.citations import citation_requests, live_citation_pairs
    from eval_pipeline.scoring.claims import extract_claims, grounding_requests
    from eval_pipeline.scoring.common import lane_traces

    location = open_location(data)
    manifest = load_manifest(location, run_id)
    cases = load_cases(location, manifest.dataset_version).frame
    corpus = load_corpus(location, manifest.corpus_version).frame
    traces = parse_traces(read_raw_lines(location, run_id), cases, run_id).traces
    rag = lane_traces(traces, cases, "rag").select(traces.columns)
    claims = extract_claims(rag)
    cache = VerdictCache(cache_path) if cache_path and os.path.exists(cache_path) else None
    pairs = live_citation_pairs(claims, rag, corpus).filter(pl.col("exists")).select("run_id", "trace_id", "claim_index", "doc_id")
    grounding = estimate_calls(grounding_requests(claims, rag), cache, model, prices, CLAIM_PROMPT_VERSION, output_tokens_per_call)
    citation = estimate_calls(citation_requests(pairs, claims, rag, corpus), cache, model, prices, CLAIM_PROMPT_VERSION, output_tokens_per_call)
    total = {k: grounding[k] + citation[k] for k in ("calls", "est_input_tokens", "est_output_tokens", "est_cost_usd")}
    return {"run_id": run_id, "model": model, "traces": rag.height, "claims": claims.height,
            "cache": cache_path if cache is not None else None, "grounding": grounding, "citations_at_most": citation,
            "total_at_most": {**total, "est_cost_usd": round(total["est_cost_usd"], 6)}}


def run_estimate(args: argparse.Namespace) -> int:
    """Handler of `judge-estimate`."""
    prices = {"input_per_1k": args.price_input_per_1k, "output_per_1k": args.price_output_per_1k}
    cache_path = args.cache or os.path.join(args.data, ".judge_cache", "verdicts.sqlite")
    try:
        report = estimate_run(args.data, args.run, args.model, prices, cache_path, args.output_tokens_per_call)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"run {report['run_id']}: {report['traces']} rag traces, {report['claims']} claims; model {report['model']}")
    print(f"cache: {report['cache'] or 'none found (every input needs a call)'}")
    for label, key in (("grounding", "grounding"), ("citations (at most)", "citations_at_most")):
        part = report[key]
        print(f"{label}: {part['unique_inputs']} distinct inputs, {part['cached']} cached, {part['calls']} calls, "
              f"~{part['est_input_tokens']} input + {part['est_output_tokens']} output tokens, ~${part['est_cost_usd']:.4f}")
    total = report["total_at_most"]
    print(f"total (at most): {total['calls']} calls, ~${total['est_cost_usd']:.4f}")
    if not (args.price_input_per_1k or args.price_output_per_1k):
        print("note: no prices given (--price-input-per-1k, --price-output-per-1k): costs read 0")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `calibrate` and `judge-estimate` to an argparse subparsers object."""
    calibrate = subparsers.add_parser(
        "calibrate",
        help="agreement, Cohen's kappa (bootstrap 95%% CI), balanced accuracy and confusion of judge verdicts vs human labels",
        description=(
            "Compare judge verdicts produced anywhere with human grounding labels, as the judge_calibration table does. "
            "--verdicts: JSONL lines {trace_id, claim, verdict[, judge_version]} with verdict SUPPORTED, CONTRADICTED or "
            "NOT_IN_EVIDENCE. --labels: labels/grounding JSONL lines {trace_id, claim, verdict} or {trace_id, "
            "answer_grounded}. Claims match on trace_id and claim text (markers, case, white space and end punctuation "
            "ignored). Prints one block per judge version and level; exits 0, or 2 when a file is missing or malformed."
        ),
    )
    calibrate.add_argument("--verdicts", required=True, metavar="FILE", help="judge verdicts, JSONL")
    calibrate.add_argument("--labels", required=True, metavar="FILE", help="human grounding labels, JSONL")
    calibrate.add_argument("--min-kappa", type=float, default=ScoringSettings.min_kappa, help="kappa needed to gate (default %(default)s)")
    calibrate.add_argument("--min-n", type=int, default=ScoringSettings.min_n, help="labels needed to gate (default %(default)s)")
    calibrate.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default %(default)s)")
    calibrate.add_argument("--seed", type=int, default=0, help="bootstrap seed (default %(default)s)")
    calibrate.add_argument("--json", action="store_true", help="print the rows as JSON")
    calibrate.set_defaults(handler=run_calibrate)

    estimate = subparsers.add_parser(
        "judge-estimate",
        help="dry run: calls, tokens and cost the openai judge would need for a run, after the verdict cache",
        description=(
            "Read a run's traces, split the rag answers into claims and count the judge calls the grounding check needs "
            "(distinct claim+context inputs not already in the verdict cache) and, as an upper bound, the citation "
            "checks. Tokens are estimated at 4 characters a token for input and --output-tokens-per-call for output. "
            "Nothing is sent anywhere. Exits 0, or 2 when the data root or run cannot be read."
        ),
    )
    estimate.add_argument("--data", required=True, metavar="DIR", help="data root (local path or object-store URL)")
    estimate.add_argument("--run", required=True, metavar="RUN_ID", help="run id under traces/")
    estimate.add_argument("--model", default=DEFAULT_ESTIMATE_MODEL, help="judge model the cache is keyed by (default %(default)s)")
    estimate.add_argument("--cache", metavar="PATH", help="verdict cache (default DATA/.judge_cache/verdicts.sqlite)")
    estimate.add_argument("--price-input-per-1k", type=float, default=0.0, help="USD per 1000 input tokens")
    estimate.add_argument("--price-output-per-1k", type=float, default=0.0, help="USD per 1000 output tokens")
    estimate.add_argument("--output-tokens-per-call", type=int, default=60, help="output tokens assumed per call (default %(default)s)")
    estimate.add_argument("--json", action="store_true", help="print the estimate as JSON")
    estimate.set_defaults(handler=run_estimate)
