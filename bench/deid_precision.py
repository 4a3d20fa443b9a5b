"""Precision of both de-identification detectors on real and generated traces (a benchmark, not a test).

    .venv/bin/python bench/deid_precision.py --sample data --tau RESULTS.json --synthetic 100000

For each data set, every string leaf of the raw traces is read by the replacement pass's detectors (detectors.py,
on folded text) and by the independent scan (residual.py); each finding is judged against the personal values the
data set holds (see `Truth`): a finding that is none of them is a false positive. Prints, per data set and detector,
the findings, the false positives and false positives per 10k traces, and lists every distinct false positive.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import polars as pl

from eval_pipeline.deid.candidates import classify
from eval_pipeline.deid.columns import COUNT, VALUE, distinct_values, string_paths
from eval_pipeline.deid.detectors import EMAIL, PERSON, combined_pattern, normalize
from eval_pipeline.deid.folding import NON_ASCII_EMAIL, folded_values
from eval_pipeline.deid.name_learning import collect_names
from eval_pipeline.deid.residual import residual_spans, values_with_findings

# JSON keys whose string values are personal data in these data sets (customer records, passengers, contacts).
PERSONAL_KEYS = re.compile(r"(?i)(e-?mail|phone|mobile|number|iban|ssn|nino|national_id|passport|tax_id|ip|ips)$")


class Truth:
    """The personal values of one data set: e-mails and names of people wherever they are (they are personal in every
    data set here), every value held under a personal key of its records (PERSONAL_KEYS), and every value a case's
    input (the customer's own words) holds."""

    def __init__(self, records: Iterable[dict], inputs: Iterable[str]) -> None:
        self.values: set[str] = set()
        for record in records:
            self._walk(record)
        self.inputs = [re.sub(r"[^0-9A-Za-z@.]", "", text).upper() for text in inputs]

    def _walk(self, node: object, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                self._walk(v, str(k))
        elif isinstance(node, list):
            for v in node:
                self._walk(v, key)
        elif isinstance(node, str):
            if key and PERSONAL_KEYS.search(key):
                self.values.add(re.sub(r"[^0-9A-Za-z@.]", "", node).upper())
            elif node[:1] in "{[":
                try:
                    self._walk(json.loads(node), key)  # tool arguments and results held as JSON text
                except ValueError:
                    pass

    def holds(self, entity_type: str, value: str) -> bool:
        """Whether a finding is one of the data set's personal values."""
        if entity_type in (EMAIL, PERSON):
            return True
        compact = re.sub(r"[^0-9A-Za-z@.]", "", normalize(entity_type, value)).upper()
        return any(compact and (compact in v or v in compact) for v in self.values if len(v) >= 6) or any(
            compact in text for text in self.inputs
        )


def _leaves(traces: pl.DataFrame) -> pl.DataFrame:
    """Every distinct string of every leaf of the traces, with its occurrences."""
    frames = [distinct_values(traces, path) for path in string_paths(traces.schema)]
    return pl.concat(frames).group_by(VALUE).agg(pl.col(COUNT).sum())


def replacement_findings(values: pl.DataFrame, names: list[str]) -> Counter[tuple[str, str]]:
    """(type, value) -> occurrences, as the replacement pass's detectors read the folded values."""
    wide = pl.col("folded").str.contains(NON_ASCII_EMAIL)
    frame = values.with_columns(folded_values(values[VALUE]).alias("folded"))
    found: Counter[tuple[str, str]] = Counter()
    name_set = frozenset(names)
    for rows, unicode in ((~wide, False), (wide, True)):
        pattern = combined_pattern(person_words=bool(name_set), unicode=unicode)
        matched = frame.filter(rows).select(pl.col("folded").str.extract_all(pattern).alias("m"), COUNT).explode("m")
        counts = matched.drop_nulls("m").group_by("m").agg(pl.col(COUNT).sum())
        for match, n in counts.iter_rows():
            for finding in classify(match, name_set):
                found[(finding.entity_type, finding.value)] += n
    return found


def independent_findings(values: pl.DataFrame) -> Counter[tuple[str, str]]:
    """(type, value) -> occurrences, as the independent scan reads the values."""
    flagged = values_with_findings(values[VALUE])
    found: Counter[tuple[str, str]] = Counter()
    for value, n in values.filter(pl.col(VALUE).is_in(flagged.implode())).iter_rows():
        for kind, found_value, _, _ in residual_spans(value):
            found[(kind, found_value)] += n
    return found


def _records(paths: Iterable[Path]) -> Iterator[dict]:
    """The JSON records of some JSONL files (lines that are no JSON object skipped: ingestion rejects them)."""
    for path in paths:
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    yield record


def load_root(root: Path) -> tuple[pl.DataFrame, pl.DataFrame, Iterator[dict]]:
    """(traces, cases, raw records read lazily) of every run of a data root, the traces and cases as ingestion
    accepts them."""
    import yaml

    from eval_pipeline.io import ingest, inputs, storage

    location = storage.open_location(str(root))
    traces, cases = [], []
    for run in sorted(p for p in (root / "traces").iterdir() if (p / "run.yaml").is_file()):
        dataset = yaml.safe_load((run / "run.yaml").read_text())["dataset_version"]
        loaded = inputs.load_cases(location, dataset).frame
        cases.append(loaded)
        traces.append(ingest.parse_traces(ingest.read_raw_lines(location, run.name), loaded, run.name).traces)
    records = _records([*sorted((root / "traces").glob("*/*.jsonl")), *sorted((root / "cases").glob("*/*.jsonl"))])
    return (
        pl.concat(traces, how="vertical_relaxed"),
        pl.concat(cases, how="diagonal_relaxed").unique("case_id"),
        records,
    )


def measure(name: str, traces: pl.DataFrame, cases: pl.DataFrame, records: Iterable[dict]) -> dict:
    """Findings and false positives of both detectors over one data set's traces."""
    started = time.perf_counter()
    names = collect_names(traces, cases)
    truth = Truth(records, cases["input"].drop_nulls().to_list())
    values = _leaves(traces)
    result: dict = {"data": name, "traces": traces.height}
    for detector, found in (
        ("replacement", replacement_findings(values, names)),
        ("independent", independent_findings(values)),
    ):
        false = {k: n for k, n in found.items() if not truth.holds(*k)}
        result[detector] = {
            "findings": sum(found.values()),
            "false_positives": sum(false.values()),
            "fp_per_10k_traces": round(sum(false.values()) * 10_000 / max(traces.height, 1), 2),
            "false_by_type": dict(Counter(t for (t, _), n in false.items() for _ in range(n))),
            "distinct_false": sorted(f"{t} {v!r} x{n}" for (t, v), n in false.items())[:40],
        }
    result["seconds"] = round(time.perf_counter() - started, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, help="a data root (the bundled sample: data)")
    parser.add_argument("--tau", type=Path, help="a τ-bench results file, imported with import tau-bench")
    parser.add_argument(
        "--synthetic", type=int, help="traces of a generated data root (eval-pipeline bench's generator)"
    )
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    results = []
    if args.sample:
        results.append(measure(f"sample {args.sample}", *load_root(args.sample)))
    if args.tau:
        from eval_pipeline.importers import ImportRun, import_tau_bench

        root = Path(tempfile.mkdtemp(prefix="deid-precision-tau-"))
        import_tau_bench(args.tau, ImportRun(run_id="tau", data_root=root))
        results.append(measure(f"tau-bench {args.tau.name}", *load_root(root)))
    if args.synthetic:
        from eval_pipeline_harness.sample_data.synthetic import write_synthetic

        root = Path(tempfile.mkdtemp(prefix="deid-precision-synth-"))
        write_synthetic(root, args.synthetic, seed=args.seed)
        results.append(measure(f"synthetic {args.synthetic}", *load_root(root)))
    for result in results:
        print(json.dumps(result, ensure_ascii=False, indent=1))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
