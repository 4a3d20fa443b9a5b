"""`eval-pipeline judge`, `calibrate` and `judge-estimate`: judge verdicts, statistics and cost, from the command line.

The commands parse their arguments, read their files and print; run estimation itself is judge/estimate.py.
Over 400 lines: three commands' argument definitions and help texts, and the verdict and label file readers of
calibrate.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import ValidationError

from eval_pipeline.contracts.frames import GROUNDING_LABELS_SCHEMA
from eval_pipeline.contracts.identifiers import identifier_arg
from eval_pipeline.contracts.labels import GroundingLabel
from eval_pipeline.io.loaders import (
    describe_validation_error,
    iter_lines,
    parse_json_line,
)
from eval_pipeline.io.storage import InputError, open_location
from eval_pipeline.judge.base import VERDICTS, JudgeConfigError
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


def _line_id(value: dict[str, Any]) -> str | None:
    """The id a verdict or label line is matched by: trace_id, else id (a number as its JSON text)."""
    ident = value.get("trace_id", value.get("id"))
    if isinstance(ident, str):
        return ident
    if isinstance(ident, (int, float)) and not isinstance(ident, bool):
        return json.dumps(ident)
    return None


def _score(value: dict[str, Any], path: str, number: int) -> float | None:
    score = value.get("score")
    if score is None:
        return None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0.0 <= score <= 1.0:
        raise InputError(f"{path}:{number}: score must be a number in [0, 1]")
    return float(score)


CLAIM_VERDICT_SCHEMA = {
    "judge_version": pl.String,
    "trace_id": pl.String,
    "claim": pl.String,
    "verdict": pl.String,
    "score": pl.Float64,
    "status": pl.String,
}
ANSWER_VERDICT_SCHEMA = {
    "judge_version": pl.String,
    "trace_id": pl.String,
    "judge_grounded": pl.Boolean,
    "score": pl.Float64,
    "n_claims": pl.Int64,
}


def read_verdicts(paths: str | list[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Verdict JSONL files as (judged claims, judged answers).

    Claim lines: {trace_id or id, claim, verdict[, score, judge_version, status]}; answer lines: {trace_id or id,
    answer_grounded or grounded[, score, judge_version, n_claims]}. `eval-pipeline judge` output at either level
    reads as is: its line with a null claim is an answer without claims (n_claims 0), which calibration reads as the
    pipeline does (scoring.calibration.given_answers).
    """
    claims, answers = [], []
    for path in [paths] if isinstance(paths, str) else paths:
        for number, value in _jsonl(path):
            ident = _line_id(value)
            if ident is None:
                raise InputError(f"{path}:{number}: a verdict line needs a trace_id or id")
            version = str(value.get("judge_version") or "external")
            score = _score(value, path, number)
            grounded = value.get("answer_grounded", value.get("grounded"))
            if "answer_grounded" in value or "grounded" in value:
                if grounded is not None and not isinstance(grounded, bool):
                    raise InputError(f"{path}:{number}: answer_grounded/grounded must be true, false or null")
                n_claims = value.get("n_claims")
                n_claims = n_claims if isinstance(n_claims, int) and not isinstance(n_claims, bool) else None
                answers.append(
                    {
                        "judge_version": version,
                        "trace_id": ident,
                        "judge_grounded": grounded,
                        "score": score,
                        "n_claims": n_claims,
                    }
                )
                continue
            claim, verdict, status = value.get("claim"), value.get("verdict"), value.get("status") or "ok"
            if claim is None and verdict is None and "claim" in value:
                answers.append(
                    {"judge_version": version, "trace_id": ident, "judge_grounded": None, "score": None, "n_claims": 0}
                )
                continue
            if not isinstance(claim, str) or (verdict not in VERDICTS and not (verdict is None and status != "ok")):
                raise InputError(
                    f"{path}:{number}: a verdict line needs a string claim and a verdict in {', '.join(VERDICTS)} "
                    "(or answer_grounded / grounded for an answer-level verdict)"
                )
            claims.append(
                {
                    "judge_version": version,
                    "trace_id": ident,
                    "claim": claim,
                    "verdict": verdict,
                    "score": score,
                    "status": "ok" if verdict is not None else status,
                }
            )
    claim_frame = pl.DataFrame(claims, schema=CLAIM_VERDICT_SCHEMA).with_columns(
        run_id=pl.lit(None, pl.String),
        claim_index=pl.int_range(pl.len(), dtype=pl.Int64).over("judge_version", "trace_id"),
    )
    return claim_frame, pl.DataFrame(answers, schema=ANSWER_VERDICT_SCHEMA)


def read_labels(path: str) -> pl.DataFrame:
    """A grounding labels JSONL file as a GROUNDING_LABELS_SCHEMA frame (`id` and `grounded` read as trace_id and
    answer_grounded)."""
    rows = []
    for number, value in _jsonl(path):
        value = dict(value)
        if "trace_id" not in value and _line_id(value) is not None:
            value["trace_id"] = _line_id(value)
        value.pop("id", None)
        if "grounded" in value and "answer_grounded" not in value:
            value["answer_grounded"] = value.pop("grounded")
        value.pop("label", None)
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
        print(
            f"  cohen_kappa {_fmt(row['cohen_kappa'])}  "
            f"95% CI [{_fmt(row['kappa_ci_low'])}, {_fmt(row['kappa_ci_high'])}]"
        )
        gate = "yes" if row["may_gate"] else "no"
        print(f"  may_gate {gate} (needs kappa >= {row['min_kappa']:g} and n >= {row['min_n']})")
        print(f"  unmatched labels {row['n_unmatched_labels']}  judge incomplete {row['n_judge_incomplete']}")
        if row.get("self_consistency_note") and row["self_consistency_note"] != "not measured":
            print(
                f"  self-consistency: flip rate {_fmt(row['self_consistency_flip_rate'])} "
                f"({row['self_consistency_note']})"
            )
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
        claims, answers = read_verdicts(args.verdicts)
        label_sets = [read_labels(path) for path in args.labels]
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.fit:
        return _fit(args, claims, answers, label_sets)
    settings = ScoringSettings(min_kappa=args.min_kappa, min_n=args.min_n)
    labels = pl.concat(label_sets)
    calibration = calibrate(claims, labels, settings, n_boot=args.n_boot, seed=args.seed, judged_answers=answers)
    if args.json:
        print(json.dumps(calibration.to_dicts(), indent=2))
    else:
        _print_calibration(calibration)
    return 0


def _fit(args: argparse.Namespace, claims: pl.DataFrame, answers: pl.DataFrame, label_sets: list[pl.DataFrame]) -> int:
    """`calibrate --fit`: the support threshold that maximises balanced accuracy, written as a judge profile."""
    from eval_pipeline.judge.profile import (
        MIN_SUPPORT,
        default_profile,
        fit_support_threshold,
        fitted_profile,
        load_profile,
    )
    from eval_pipeline.scoring.calibration import labelled_scores

    if not args.output:
        print("error: --fit needs --output PROFILE.yaml", file=sys.stderr)
        return 2
    versions = sorted(set(claims["judge_version"].to_list()) | set(answers["judge_version"].to_list()))
    if len(versions) != 1:
        print(
            f"error: --fit needs the verdicts of one judge version, found {', '.join(versions) or 'none'}",
            file=sys.stderr,
        )
        return 2
    backend = "model" if versions[0].startswith("model:") else "local" if versions[0].startswith("local-") else None
    if backend is None:
        print(
            f"error: judge {versions[0]} gives no support scores to fit; fit the local or model judge's verdicts",
            file=sys.stderr,
        )
        return 2
    sets = []
    for path, labels in zip(args.labels, label_sets, strict=True):
        try:
            scores, truth = labelled_scores(claims, answers, labels)
        except ValueError as exc:
            print(f"error: {path}: {exc}", file=sys.stderr)
            return 2
        sets.append((Path(path).name, scores, truth))
    try:
        base = load_profile(args.profile) if args.profile else default_profile(backend)
        fit = fit_support_threshold(sets, minimum=MIN_SUPPORT[backend], n_boot=args.n_boot, seed=args.seed)
    except (ValueError, JudgeConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    provenance = {
        "by": "eval-pipeline calibrate --fit",
        "verdicts": [Path(p).name for p in args.verdicts],
        "judge_version": versions[0],
        "seed": args.seed,
        "n_boot": args.n_boot,
    }
    profile = fitted_profile(base, fit, provenance)
    Path(args.output).write_text(profile.to_yaml(), encoding="utf-8")
    print(
        f"support threshold {fit.threshold:g}: balanced accuracy {fit.balanced_accuracy:.4f} "
        f"(95% CI {fit.ci_low:.4f}-{fit.ci_high:.4f}, mean over {len(sets)} label set(s))"
    )
    for part in fit.per_set:
        print(
            f"  {part['labels']}: n {part['n']} ({part['grounded']} grounded), "
            f"balanced accuracy {part['balanced_accuracy']:.4f}"
        )
    print(f"wrote {args.output} (judge version {versions[0].rsplit('+', 1)[0]}+{profile.digest})")
    return 0


def _cache_line(report: dict[str, Any]) -> str:
    """What the caches hold: `cache: judge_verdicts holds 75 of 80 claims for local-2.0+…; 5 calls needed`."""
    grounding, version = report["grounding"], report["judge_version"]
    if report["judge_verdicts"]:
        held = f"{grounding['in_judge_verdicts']} of {grounding['unique_inputs']}"
        stored = f"judge_verdicts holds {held} claims for {version}"
    else:
        stored = f"no judge_verdicts table yet, so nothing is reused for {version}"
    if report["model"]:
        stored += (
            f"; openai cache {report['cache']} holds {grounding['cached']} more"
            if report["cache"]
            else "; no openai cache found"
        )
    return f"cache: {stored}; {grounding['calls']} calls needed"


def run_estimate(args: argparse.Namespace) -> int:
    """Handler of `judge-estimate`: judge.estimate.estimate_run with the layers above judge/ passed in (the run's
    EvalConfig, the scorers, the judge a pipeline run would build) and this process's environment."""
    from eval_pipeline.defs.resources import EvalConfig, JudgeConfig, make_run_judge
    from eval_pipeline.judge.estimate import Scorers, estimate_run
    from eval_pipeline.scoring.citations import score_citations
    from eval_pipeline.scoring.claims import extract_claims, judge_claims
    from eval_pipeline.scoring.common import lane_traces

    prices = {"input_per_1k": args.price_input_per_1k, "output_per_1k": args.price_output_per_1k}
    cache_path = (
        args.cache
        or os.environ.get("EVAL_PIPELINE_JUDGE_CACHE")
        or os.path.join(args.data, ".judge_cache", "verdicts.sqlite")
    )
    try:
        config = EvalConfig(data_root=args.data, warehouse_root=args.warehouse or "")
        report = estimate_run(
            config,
            args.run,
            Scorers(lane_traces, extract_claims, judge_claims, score_citations),
            model=args.model,
            environ=os.environ,
            run_judge=lambda settings: make_run_judge(JudgeConfig.from_settings(settings), config),
            prices=prices,
            cache_path=cache_path,
            output_tokens_per_call=args.output_tokens_per_call,
        )
    except (InputError, JudgeConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    source = (
        "de-identified inputs of the last materialization"
        if report["inputs"] == "warehouse"
        else "raw inputs under the data root"
    )
    print(
        f"run {report['run_id']}: {report['traces']} rag traces, {report['claims']} claims ({source}); "
        f"judge {report['judge_version']}"
    )
    print(_cache_line(report))
    for label, key in (("grounding", "grounding"), ("citations (at most)", "citations_at_most")):
        part = report[key]
        print(
            f"{label}: {part['unique_inputs']} distinct inputs, {part['in_judge_verdicts']} in judge_verdicts, "
            f"{part['cached']} in the openai cache, {part['calls']} calls, "
            f"~{part['est_input_tokens']} input + {part['est_output_tokens']} output tokens, "
            f"~${part['est_cost_usd']:.4f}"
        )
    total = report["total_at_most"]
    print(f"total (at most): {total['calls']} calls, ~${total['est_cost_usd']:.4f}")
    if not (args.price_input_per_1k or args.price_output_per_1k):
        print("note: no prices given (--price-input-per-1k, --price-output-per-1k): costs read 0")
    return 0


def run_judge(args: argparse.Namespace) -> int:
    """Handler of `judge`."""
    from eval_pipeline.judge import JudgeSettings, make_judge
    from eval_pipeline.judge.jsonl import judge_file

    try:
        settings = JudgeSettings.from_env(os.environ, backend=args.backend)
        options = settings.backend_options()
        if settings.backend == "model" and args.model_dir:
            options["model_dir"] = args.model_dir
        # the API key is read here, from the variable the settings name, and handed to the openai judge alone
        api_key = os.environ.get(settings.api_key_env) if settings.backend == "openai" else None
        judge = make_judge(settings.backend, profile=args.profile or settings.profile, api_key=api_key, **options)
    except JudgeConfigError as exc:
        print(f"eval-pipeline judge: error: {exc}", file=sys.stderr)
        return 2
    source = sys.stdin.buffer if args.input == "-" else None
    try:
        stream = source or open(args.input, "rb")  # noqa: SIM115 - closed below
    except OSError as exc:
        print(f"eval-pipeline judge: error: cannot read {args.input}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        with stream, open(args.output, "wb") as out:
            lines, claims, skipped = judge_file(
                stream,
                out,
                judge,
                args.level,
                batch_lines=args.batch_lines,
                name=args.input,
                progress=None if args.quiet else sys.stderr,
            )
    except OSError as exc:
        print(f"eval-pipeline judge: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"judge {judge.version}: {lines} lines judged ({claims} claims), {len(skipped)} skipped; wrote {args.output}",
        file=sys.stderr,
    )
    return 2 if lines == 0 and skipped else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add `judge`, `calibrate` and `judge-estimate` to an argparse subparsers object."""
    judge = subparsers.add_parser(
        "judge",
        help="judge a JSONL file of answers or claims against their context, without a pipeline run",
        description=(
            'Judge every line of INPUT (JSONL; - for standard input): {"id", "context": STRING or [STRING or '
            '{"doc_id", "text"}], "answer": STRING} or, with claims already split, "claim" instead of "answer". '
            "--level claim writes one line per claim {id, claim_index, claim, verdict, score, evidence_quote, reason, "
            "judge_version, status}; --level answer one line per input {id, grounded, score, n_claims, n_supported, "
            "judge_version, status, reason}, grounded when the answer has a claim and every claim is SUPPORTED. "
            "The backend comes from EVAL_PIPELINE_JUDGE_BACKEND (local by default; openai; model with "
            "EVAL_PIPELINE_JUDGE_MODEL_DIR) or --backend; the profile from --profile or EVAL_PIPELINE_JUDGE_PROFILE, "
            "else the shipped one. Progress goes to standard error; bad lines are reported with their number and "
            "skipped. Exits 0, or 2 when nothing could be judged or the judge cannot be set up."
        ),
    )
    judge.add_argument("input", metavar="INPUT.jsonl", help="lines to judge (- for standard input)")
    judge.add_argument("--output", required=True, metavar="OUT.jsonl", help="where the verdicts go")
    judge.add_argument(
        "--level", choices=["claim", "answer"], default="claim", help="one line per claim (default) or per input"
    )
    judge.add_argument(
        "--backend",
        choices=["local", "openai", "model"],
        help="judge backend (default: EVAL_PIPELINE_JUDGE_BACKEND or local)",
    )
    judge.add_argument(
        "--profile", metavar="PROFILE.yaml", help="judge profile of the local or model backend (default: shipped)"
    )
    judge.add_argument(
        "--model-dir", metavar="DIR", help="model folder of the model backend (default: EVAL_PIPELINE_JUDGE_MODEL_DIR)"
    )
    judge.add_argument(
        "--batch-lines", type=int, default=2000, help="input lines judged at a time (default %(default)s)"
    )
    judge.add_argument("--quiet", action="store_true", help="no progress lines")
    judge.set_defaults(handler=run_judge)

    calibrate = subparsers.add_parser(
        "calibrate",
        help="agreement, Cohen's kappa (bootstrap 95%% CI), balanced accuracy and confusion of judge verdicts vs "
        "human labels",
        description=(
            "Compare judge verdicts produced anywhere with human grounding labels, as the judge_calibration table "
            "does. --verdicts: JSONL lines {trace_id or id, claim, verdict[, score, judge_version]} with verdict "
            "SUPPORTED, CONTRADICTED or NOT_IN_EVIDENCE, or answer-level lines {trace_id or id, answer_grounded or "
            "grounded[, score]}; the output of `eval-pipeline judge` at either level reads as is. --labels: lines "
            "{trace_id or id, claim, verdict} or {trace_id or id, answer_grounded or grounded}. Claims match on id and "
            "claim text (markers, case, white space and end punctuation ignored). Prints one block per judge version "
            "and level. With --fit (verdicts with scores, from the local or model judge): choose the support "
            "threshold that maximises balanced accuracy (mean over the --labels files), report it with a bootstrap "
            "95% interval, and write a judge profile to --output; use it with policy/gates.yaml judge: "
            "{profile: PATH} or EVAL_PIPELINE_JUDGE_PROFILE. "
            "Exits 0, or 2 when a file is missing or malformed or the fit is impossible."
        ),
    )
    calibrate.add_argument(
        "--verdicts",
        required=True,
        action="append",
        metavar="FILE",
        help="judge verdicts, JSONL (repeatable: the files are pooled)",
    )
    calibrate.add_argument(
        "--labels",
        required=True,
        action="append",
        metavar="FILE",
        help="human grounding labels, JSONL (repeatable: with --fit each file is one label set, counted equally)",
    )
    calibrate.add_argument(
        "--fit",
        action="store_true",
        help="choose the support threshold that maximises balanced accuracy and write a judge profile (--output)",
    )
    calibrate.add_argument("--output", metavar="PROFILE.yaml", help="where --fit writes the judge profile")
    calibrate.add_argument(
        "--profile",
        metavar="PROFILE.yaml",
        help="with --fit: the profile whose other thresholds are kept (default: shipped)",
    )
    calibrate.add_argument(
        "--min-kappa", type=float, default=ScoringSettings.min_kappa, help="kappa needed to gate (default %(default)s)"
    )
    calibrate.add_argument(
        "--min-n", type=int, default=ScoringSettings.min_n, help="labels needed to gate (default %(default)s)"
    )
    calibrate.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default %(default)s)")
    calibrate.add_argument("--seed", type=int, default=0, help="bootstrap seed (default %(default)s)")
    calibrate.add_argument("--json", action="store_true", help="print the rows as JSON")
    calibrate.set_defaults(handler=run_calibrate)

    estimate = subparsers.add_parser(
        "judge-estimate",
        help="dry run: judge calls, tokens and cost a run would need, after judge_verdicts and the openai cache",
        description=(
            "Read a run's traces (the de-identified ones of its last materialization when the warehouse has them), "
            "split the rag answers into claims and count the judge calls the grounding check needs: distinct "
            "claim+context inputs whose verdict neither the judge_verdicts table holds for the judge version nor, for "
            "the openai judge, its cache; and, as an upper bound, the citation checks. The judge is the one a pipeline "
            "run would use (EVAL_PIPELINE_JUDGE_* and the gate policy's profile), or the openai judge of --model. "
            "Tokens are estimated at 4 characters a token for input and --output-tokens-per-call for output. Nothing "
            "is sent anywhere. Exits 0, or 2 when the data root, run or judge configuration cannot be read."
        ),
    )
    estimate.add_argument(
        "--data", default="data", metavar="DIR", help="data root, local path or object-store URL (default: data)"
    )
    estimate.add_argument(
        "--run", required=True, metavar="RUN_ID", type=identifier_arg("run id"), help="run id under traces/"
    )
    estimate.add_argument(
        "--warehouse", metavar="DIR", help="Delta warehouse root holding judge_verdicts (default: DATA/warehouse)"
    )
    estimate.add_argument(
        "--model",
        help=f"estimate the openai judge of this model (e.g. {DEFAULT_ESTIMATE_MODEL}) instead of the run's judge",
    )
    estimate.add_argument(
        "--cache",
        metavar="PATH",
        help="openai verdict cache (default EVAL_PIPELINE_JUDGE_CACHE, else DATA/.judge_cache/verdicts.sqlite)",
    )
    estimate.add_argument("--price-input-per-1k", type=float, default=0.0, help="USD per 1000 input tokens")
    estimate.add_argument("--price-output-per-1k", type=float, default=0.0, help="USD per 1000 output tokens")
    estimate.add_argument(
        "--output-tokens-per-call", type=int, default=60, help="output tokens assumed per call (default %(default)s)"
    )
    estimate.add_argument("--json", action="store_true", help="print the estimate as JSON")
    estimate.set_defaults(handler=run_estimate)
