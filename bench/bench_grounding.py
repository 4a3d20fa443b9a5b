"""Agreement of the grounding judge with human labels on the development sets (a benchmark, not a test).

Reads ../shared/data/grounding (WiCE dev: Wikipedia claims with the sentences they cite; BEGIN dev: knowledge-grounded
dialogue responses, `Generic` responses left out), writes them as `eval-pipeline judge` input and label files, runs
the judge through the command line as a user would, fits the support threshold with `calibrate --fit`, judges again
with the fitted profile and reports balanced accuracy (bootstrap 95% interval), Cohen's κ and claims/s.

    python bench/bench_grounding.py
        # fit on both sets, report, keep files in .bench/grounding
    python bench/bench_grounding.py --write-default
        # also install the fitted profile as the shipped default
    python bench/bench_grounding.py --profile eval_pipeline/judge/profiles/local.yaml --no-fit
        # report a given profile
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

from eval_pipeline.cli import main as cli

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "grounding"
DEFAULT_PROFILE = ROOT / "eval_pipeline" / "judge" / "profiles" / "local.yaml"
BEGIN_FILES = {
    "wow": "wow/begin_dev_wow.tsv",
    "cmu-dog": "cmu-dog/begin_dev_cmu.tsv",
    "topicalchat": "topicalchat/begin_dev_tc.tsv",
}


def write_sets(data: Path, out: Path) -> dict[str, tuple[Path, Path, str]]:
    """name → (judge input, labels, level): WiCE claims and BEGIN responses as judge input and label JSONL."""
    out.mkdir(parents=True, exist_ok=True)
    sets = {}
    with (out / "wice.jsonl").open("w") as judge_in, (out / "wice.labels.jsonl").open("w") as labels:
        for number, line in enumerate((data / "wice" / "claims_dev.jsonl").read_text().splitlines()):
            row = json.loads(line)
            ident = f"wice-{number}"
            judge_in.write(json.dumps({"id": ident, "context": row["evidence"], "claim": row["claim"]}) + "\n")
            labels.write(json.dumps({"id": ident, "grounded": row["label"] == "supported"}) + "\n")
    sets["wice"] = (out / "wice.jsonl", out / "wice.labels.jsonl", "claim")
    with (out / "begin.jsonl").open("w") as judge_in, (out / "begin.labels.jsonl").open("w") as labels:
        for name, path in BEGIN_FILES.items():
            with (data / "begin" / path).open(newline="") as handle:
                for number, row in enumerate(csv.DictReader(handle, delimiter="\t")):
                    if row["begin_label"] == "Generic":
                        continue
                    ident = f"begin-{name}-{number}"
                    judge_in.write(
                        json.dumps({"id": ident, "context": row["knowledge"], "answer": row["response"]}) + "\n"
                    )
                    labels.write(
                        json.dumps({"id": ident, "grounded": row["begin_label"] == "Fully attributable"}) + "\n"
                    )
    sets["begin"] = (out / "begin.jsonl", out / "begin.labels.jsonl", "answer")
    return sets


def _judge(source: Path, target: Path, level: str, profile: Path | None) -> float:
    started = time.perf_counter()
    code = cli(
        [
            "judge",
            str(source),
            "--output",
            str(target),
            "--level",
            level,
            "--quiet",
            *(["--profile", str(profile)] if profile else []),
        ]
    )
    if code != 0:
        raise SystemExit(f"judge failed on {source} (exit {code})")
    return time.perf_counter() - started


def _agreement(verdicts: Path, labels: Path, n_boot: int, seed: int) -> dict:
    truth = {json.loads(line)["id"]: json.loads(line)["grounded"] for line in labels.read_text().splitlines()}
    rows = [json.loads(line) for line in verdicts.read_text().splitlines()]
    predicted = {row["id"]: bool(row["grounded"]) for row in rows}
    ids = sorted(truth)
    y = np.array([truth[i] for i in ids])
    p = np.array([predicted[i] for i in ids])

    def ba(y_: np.ndarray, p_: np.ndarray) -> float:
        return float(((p_ & y_).sum() / y_.sum() + (~p_ & ~y_).sum() / (~y_).sum()) / 2)

    rng = np.random.default_rng(seed)
    boot = []
    for _ in range(n_boot):
        index = rng.integers(0, len(ids), len(ids))
        if y[index].all() or not y[index].any():
            continue
        boot.append(ba(y[index], p[index]))
    agreement = float((y == p).mean())
    expected = y.mean() * p.mean() + (1 - y.mean()) * (1 - p.mean())
    return {
        "n": len(ids),
        "grounded": int(y.sum()),
        "predicted_grounded": int(p.sum()),
        "balanced_accuracy": round(ba(y, p), 4),
        "ci95": [round(float(np.percentile(boot, 2.5)), 4), round(float(np.percentile(boot, 97.5)), 4)],
        "agreement": round(agreement, 4),
        "cohen_kappa": round(float((agreement - expected) / (1 - expected)), 4),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="grounding development data (default: ../shared/data/grounding)"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / ".bench" / "grounding", help="working folder (default: .bench/grounding)"
    )
    parser.add_argument("--profile", type=Path, help="profile to report (with --no-fit); default: the one fitted here")
    parser.add_argument(
        "--no-fit", action="store_true", help="report --profile (default: the shipped one) without fitting"
    )
    parser.add_argument(
        "--write-default", action="store_true", help="install the fitted profile as the shipped default"
    )
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"no development data at {args.data}", file=sys.stderr)
        return 2
    sets = write_sets(args.data, args.out)
    profile = args.profile or (DEFAULT_PROFILE if args.no_fit else None)
    if not args.no_fit:
        # Claim-level scores of an unfitted run are what the fit reads; the threshold does not change them.
        for name, (source, _, _) in sets.items():
            _judge(source, args.out / f"{name}.claims.jsonl", "claim", args.profile)
        profile = args.out / "local.fitted.yaml"
        fit_args = [
            "calibrate",
            "--fit",
            "--output",
            str(profile),
            "--n-boot",
            str(args.n_boot),
            "--seed",
            str(args.seed),
        ]
        for name, (_, labels, _) in sets.items():
            fit_args += ["--verdicts", str(args.out / f"{name}.claims.jsonl"), "--labels", str(labels)]
        if cli(fit_args) != 0:
            return 1
        if args.write_default:
            shutil.copyfile(profile, DEFAULT_PROFILE)
            print(f"installed {profile} as {DEFAULT_PROFILE}")
    report = {"profile": str(profile), "sets": {}}
    for name, (source, labels, _) in sets.items():
        seconds = _judge(source, args.out / f"{name}.answers.jsonl", "answer", profile)
        claims_seconds = _judge(source, args.out / f"{name}.claims.final.jsonl", "claim", profile)
        n_claims = sum(
            1
            for line in (args.out / f"{name}.claims.final.jsonl").read_text().splitlines()
            if json.loads(line)["claim"] is not None
        )
        result = _agreement(args.out / f"{name}.answers.jsonl", labels, args.n_boot, args.seed)
        result.update(claims=n_claims, seconds=round(seconds, 2), claims_per_s=round(n_claims / claims_seconds))
        report["sets"][name] = result
    versions = {
        json.loads(line)["judge_version"] for line in (args.out / "wice.answers.jsonl").read_text().splitlines()[:1]
    }
    report["judge_version"] = versions.pop() if versions else None
    print(json.dumps(report, indent=2))
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
