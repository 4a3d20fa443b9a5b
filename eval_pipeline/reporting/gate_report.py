"""The release-gate report: each gate on its own, in its own unit, with the blocking cases, why and whose they are.

Over 400 lines: the one gate result frame is shown five ways (report sections, verdict banner, terminal table, JSON,
JUnit XML) that must share its units, statuses and wording, so they stay together.
"""

from __future__ import annotations

import json
import unicodedata
import xml.etree.ElementTree as ET

import polars as pl

from eval_pipeline.reporting.render import Section, Verdict
from eval_pipeline.reporting.values import MISSING, format_number
from eval_pipeline.scoring.gate_table import INSUFFICIENT, UNIT_CASES, exit_code

EXIT_MEANING = {
    0: "every gate passed",
    1: "a gate failed: the release is blocked",
    2: "undecided: a gate is incomplete or incomparable",
}
# The machine-readable gate output (`gate --json`); bump on any change of its fields or meanings.
GATE_JSON_SCHEMA_VERSION = 1
GATE_JSON_FIELDS = (
    "gate",
    "lane",
    "metric",
    "segment",
    "min_cases",
    "unit",
    "status",
    "baseline_value",
    "candidate_value",
    "delta",
    "threshold",
    "blocking_cases",
    "blocking_details",
    "excluded_cases",
    "n_cases",
    "owner",
    "reason",
)
CASE_PAGE = "cases/{value}.html"
# statuses that leave the release undecided (exit 2); insufficient: a segmented gate's slice has too few cases
UNDECIDED_STATUSES = ("incomplete", "incomparable", INSUFFICIENT)
INSUFFICIENT_MEANING = "undecided: a gate is incomplete, incomparable or insufficient (too few cases in its slice)"
UNITS_LINE = (
    "- rate gates (unit `fraction`) compare the mean over the cases complete in both runs, flaky cases excluded "
    "(and multi-hop ones where the policy says so): values are fractions in [0, 1], the delta and the limit are "
    "in points (value × 100); a drop equal to the limit passes. Count gates (unit `cases`) count cases."
)


def verdict_status(gate_results: pl.DataFrame) -> str:
    """pass, fail, undecided, or not_gated (no gate applies: an exploratory run, or the run is its own baseline)."""
    statuses = set(gate_results["status"].to_list())
    if not statuses or statuses <= {"not_applicable"}:
        return "not_gated"
    return {0: "pass", 1: "fail", 2: "undecided"}[exit_code(gate_results)]


def baseline_words(gate_results: pl.DataFrame, candidate: str, baseline: str | None) -> str:
    """What a run was gated against, to follow its name: " against baseline `X`", " not gated (why)", ", no
    baseline"."""
    if baseline and baseline != candidate:
        return f" against baseline `{baseline}`"
    reason = not_gated_reason(gate_results)
    return f" not gated ({reason})" if reason else ", no baseline"


def not_gated_reason(gate_results: pl.DataFrame) -> str | None:
    """Why no gate applies to a run (its own baseline, an exploratory run), when none does and the rows say why."""
    if gate_results.height and set(gate_results["status"]) == {"not_applicable"} and "reason" in gate_results.columns:
        return gate_results["reason"][0] or None
    return None


def exit_meaning(gate_results: pl.DataFrame) -> str:
    """The exit status of a gate table in words (a run no gate applies to is "not gated", not "undecided")."""
    if verdict_status(gate_results) == "not_gated":
        return "not gated: no gate applies to this run"
    code = exit_code(gate_results)
    return INSUFFICIENT_MEANING if code == 2 and _has_insufficient(gate_results) else EXIT_MEANING[code]


def _has_insufficient(gate_results: pl.DataFrame) -> bool:
    return INSUFFICIENT in gate_results["status"].to_list()


def _segmented(gate_results: pl.DataFrame) -> bool:
    """Whether any gate is computed on a slice (then tables show the segment and its min_cases)."""
    return "segment" in gate_results.columns and gate_results["segment"].is_not_null().any()


def beside_table(gate_results: pl.DataFrame) -> pl.DataFrame:
    """What a gate reports beside itself (pass^k), one row per (gate, measure) with both runs' values."""
    rows = []
    for gate, beside in gate_results.filter(pl.col("beside").is_not_null()).select("gate", "beside").iter_rows():
        values = json.loads(beside)
        candidate, baseline = values.get("candidate") or {}, values.get("baseline") or {}
        for measure in sorted(set(candidate) | set(baseline), key=lambda m: (len(m), m)):
            rows.append(
                {
                    "gate": gate,
                    "measure": measure,
                    "baseline": baseline.get(measure),
                    "candidate": candidate.get(measure),
                }
            )
    return pl.DataFrame(
        rows, schema={"gate": pl.String, "measure": pl.String, "baseline": pl.Float64, "candidate": pl.Float64}
    )


def _number(value: float | None, unit: str) -> str:
    return format_number(value, 0 if unit == UNIT_CASES else 4)


def _delta(row: dict) -> str:
    if row["delta"] is None:
        return MISSING
    if row["unit"] != UNIT_CASES:
        return f"{row['delta']:+.2f} points"
    what = "newly failing" if row["metric"] == "no_new_failures" else "new"
    return f"{row['delta']:.0f} {what}"


def _limit(row: dict) -> str:
    if row["threshold"] is None:
        return MISSING
    if row["unit"] != UNIT_CASES:
        return f"drop ≤ {row['threshold']:g} points"
    return f"≤ {row['threshold']:g} new"


def gate_table(gate_results: pl.DataFrame) -> pl.DataFrame:
    """The gate table as shown: each value in its gate's unit, the scope (cases compared, cases excluded), owner and
    reason."""
    rows = []
    for row in gate_results.iter_rows(named=True):
        unit = row.get("unit") or "fraction"
        row = {**row, "unit": unit}
        rows.append(
            {
                "gate": row["gate"],
                "lane": row["lane"],
                "metric": row["metric"],
                "segment": row.get("segment"),
                "min_cases": row.get("min_cases"),
                "status": row["status"],
                "unit": unit,
                "baseline": _number(row["baseline_value"], unit),
                "candidate": _number(row["candidate_value"], unit),
                "delta": _delta(row),
                "limit": _limit(row),
                "cases": row["n_cases"],
                "excluded": row["excluded_cases"] or [],
                "owner": row["owner"],
                "reason": row["reason"],
            }
        )
    # what a reader acts on first (status, owner, reason), then the values, then the scope
    schema = {
        "gate": pl.String,
        "status": pl.String,
        "owner": pl.String,
        "reason": pl.String,
        "baseline": pl.String,
        "candidate": pl.String,
        "delta": pl.String,
        "limit": pl.String,
        "unit": pl.String,
        "cases": pl.Int64,
        "segment": pl.String,
        "min_cases": pl.Int64,
        "excluded": pl.List(pl.String),
        "lane": pl.String,
        "metric": pl.String,
    }
    table = pl.DataFrame(rows, schema=schema)
    # a policy without segmented gates shows no segment columns
    return table if _segmented(gate_results) else table.drop("segment", "min_cases")


def blocking_table(gate_results: pl.DataFrame) -> pl.DataFrame:
    """One row per blocking case: the gates it blocks, why (its values), and the owners."""
    failed = gate_results.filter(pl.col("status") == "fail")
    if failed.height == 0:
        return pl.DataFrame(
            schema={
                "case_id": pl.String,
                "owners": pl.List(pl.String),
                "gates": pl.List(pl.String),
                "why": pl.List(pl.String),
            }
        )
    rows = []
    for row in failed.iter_rows(named=True):
        details = dict(zip(row["blocking_cases"], row.get("blocking_details") or [], strict=False))
        for case in row["blocking_cases"] or []:
            why = details.get(case, f"{case}: blocks {row['gate']}").split(": ", 1)[-1]
            rows.append({"case_id": case, "gate": row["gate"], "why": f"{row['gate']}: {why}", "owner": row["owner"]})
    frame = pl.DataFrame(rows, schema={"case_id": pl.String, "gate": pl.String, "why": pl.String, "owner": pl.String})
    # the owners before the long why, so they show without scrolling
    return (
        frame.group_by("case_id", maintain_order=True)
        .agg(pl.col("owner").unique(maintain_order=True).alias("owners"), pl.col("gate").alias("gates"), pl.col("why"))
        .sort("case_id")
    )


def release_verdict(gate_results: pl.DataFrame, candidate: str, baseline: str | None) -> Verdict:
    """The release decision of a gate table, as the banner atop every report of the run."""
    status = verdict_status(gate_results)
    n = gate_results.height
    failed = gate_results.filter(pl.col("status") == "fail")
    undecided = gate_results.filter(pl.col("status").is_in(UNDECIDED_STATUSES))
    against = f"`{candidate}` against `{baseline}`" if baseline and baseline != candidate else f"`{candidate}`"
    if status == "fail":
        cases = blocking_table(gate_results).height
        headline = f"Release blocked: {failed.height} of {n} gates failed, {cases} blocking case(s) — {against}"
    elif status == "undecided":
        words = (
            "incomplete, incomparable or insufficient"
            if _has_insufficient(gate_results)
            else "incomplete or incomparable"
        )
        headline = f"Release undecided: {undecided.height} of {n} gates {words} — {against}"
    elif status == "not_gated":
        reason = gate_results["reason"][0] if n else "no gate in the policy"
        headline = f"Not gated — {against}: {reason}"
    else:
        headline = f"Release passes: every gate passed ({n}) — {against}"
    details = []
    for row in gate_results.filter(pl.col("status").is_in(["fail", *UNDECIDED_STATUSES])).iter_rows(named=True):
        unit = row.get("unit") or "fraction"
        row = {**row, "unit": unit}
        values = (
            f"{_number(row['baseline_value'], unit)} → {_number(row['candidate_value'], unit)}, {_delta(row)} "
            f"(limit: {_limit(row)}); "
            if row["baseline_value"] is not None
            else ""
        )
        where = f" on slice `{row['segment']}`" if row.get("segment") else ""
        owner = f" (owner {row['owner']})" if row.get("owner") else ""
        details.append(f"- **{row['gate']}**{where} {row['status']}{owner}: {values}{row['reason'] or ''}")
    return Verdict(status=status, headline=headline, details=details)


def pairwise_section(pairs: pl.DataFrame) -> Section:
    """Candidate vs baseline answers judged in both orders: wins, losses, ties and position consistency."""
    complete = pairs.filter(pl.col("status") == "scored") if "status" in pairs.columns else pairs.head(0)
    if complete.height == 0:
        return Section("Pairwise answers (baseline vs candidate)", ["- no pair of complete answers to compare"])
    counts = dict(complete.group_by("outcome").len().iter_rows())
    consistent = complete["position_consistent"].cast(pl.Float64).mean()
    lines = [
        f"- {complete.height} answer pairs judged twice with positions swapped (a win counts only in both orders): "
        + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        + f"; position consistency {consistent:.4f}; incomplete {pairs.height - complete.height}",
        "- reported beside the gates, never averaged into them",
    ]
    changed = (
        complete.filter(pl.col("outcome") != "tie")
        .select("case_id", "attempt", "outcome", "order1_preference", "order2_preference")
        .sort("case_id", "attempt")
    )
    return Section("Pairwise answers (baseline vs candidate)", lines, changed)


_EVIDENCE_ORDER = {"ignored": 0, "broken": 1, "incomplete": 2, "responsive": 3}


def counterfactual_section(pairs: pl.DataFrame) -> Section:
    """Counterfactual pairs of this run: did the decision change with the decision-bearing fact? Ignored pairs first."""
    title = "Evidence use (counterfactual pairs)"
    if pairs.height == 0:
        return Section(
            title, ["- the dataset has no counterfactual pairs (a case with counterfactual_of and changed_fact)"]
        )
    counts = dict(pairs.group_by("evidence_use").len().iter_rows())
    lines = [
        f"- {pairs.height} pair(s): " + ", ".join(f"{value} {counts.get(value, 0)}" for value in _EVIDENCE_ORDER),
        "- responsive: both cases pass; ignored: the same behaviour with and without the changed fact although the "
        "expectations differ; broken: the behaviour changed but a case fails; incomplete: a case has no complete "
        "attempt",
    ]
    table = pairs.sort(pl.col("evidence_use").replace_strict(_EVIDENCE_ORDER, default=9), "case_id").select(
        "case_id", "evidence_use", "reason", "original_case_id", "changed_fact"
    )
    return Section(title, lines, table)


def gate_sections(
    gate_results: pl.DataFrame,
    candidate: str,
    baseline: str | None,
    pairs: pl.DataFrame | None = None,
    counterfactual: pl.DataFrame | None = None,
) -> list[Section]:
    """Sections of the gate report."""
    code = exit_code(gate_results)
    lines = [
        f"- candidate `{candidate}`{baseline_words(gate_results, candidate, baseline)}: exit code {code} "
        f"({exit_meaning(gate_results)})",
        "- each gate stands on its own; nothing is averaged.",
        UNITS_LINE,
    ]
    blocking = blocking_table(gate_results)
    sections = [Section("Gates", lines, gate_table(gate_results))]
    sections.append(
        Section(
            f"Blocking cases ({blocking.height})",
            ["- every case that blocks a failed gate, with its values in both runs; click a case for its whole story"]
            if blocking.height
            else [],
            blocking,
            links={"case_id": CASE_PAGE},
        )
    )
    beside = beside_table(gate_results)
    if beside.height:
        sections.append(
            Section(
                "Reported beside the gates",
                ["- over every case of each run with a complete attempt (not the gate's scope), never gated"],
                beside,
                level=3,
            )
        )
    if counterfactual is not None:
        sections.append(counterfactual_section(counterfactual))
    if pairs is not None:
        sections.append(pairwise_section(pairs))
    return sections


def _one_line(value) -> str:
    """A cell as one terminal line: – for null, line breaks and tabs as spaces."""
    return MISSING if value is None else " ".join(str(value).split())


def text_width(text: str) -> int:
    """Terminal columns a text takes: wide (East Asian) characters two, combining marks none."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(width - text_width(text), 0)
    return fill + text if right else text + fill


# (column, header, right-aligned) of the terminal gate table; the reason, of any length, comes last
_TEXT_COLUMNS = (
    ("gate", "gate", False),
    ("status", "status", False),
    ("unit", "unit", False),
    ("baseline", "baseline", True),
    ("candidate", "candidate", True),
    ("delta", "delta", True),
    ("limit", "limit", False),
    ("owner", "owner", False),
)


def gate_text_table(gate_results: pl.DataFrame) -> str:
    """A plain-text gate table for the terminal (each column as wide as its widest cell), then each blocking case and
    why it blocks."""
    table = gate_table(gate_results)
    rows = [
        {key: _one_line(row[key]) for key, _, _ in _TEXT_COLUMNS} | {"reason": _one_line(row["reason"] or "")}
        for row in table.iter_rows(named=True)
    ]
    widths = {key: max([text_width(title), *(text_width(r[key]) for r in rows)]) for key, title, _ in _TEXT_COLUMNS}

    def line(cells: dict[str, str]) -> str:
        return (
            "  ".join(_pad(cells[key], widths[key], right) for key, _, right in _TEXT_COLUMNS) + "  " + cells["reason"]
        ).rstrip()

    header = line({**{key: title for key, title, _ in _TEXT_COLUMNS}, "reason": "reason"})
    lines = [header, "-" * text_width(header)]
    lines.extend(line(r) for r in rows)
    if _segmented(gate_results):
        lines += [
            "",
            "segmented gates (computed on their slice only; fewer complete cases than min_cases: insufficient):",
        ]
        segmented = list(gate_results.filter(pl.col("segment").is_not_null()).iter_rows(named=True))
        width = max(24, *(text_width(_one_line(row["gate"])) for row in segmented))
        for row in segmented:
            lines.append(
                f"  {_pad(_one_line(row['gate']), width)} slice {_one_line(row['segment'])}: "
                f"{_one_line(row['n_cases'])} case(s), min_cases {_one_line(row['min_cases'])}"
            )
    blocking = blocking_table(gate_results)
    if blocking.height:
        lines += ["", f"blocking cases ({blocking.height}):"]
        width = max(14, *(text_width(_one_line(case)) for case in blocking["case_id"].to_list()))
        for row in blocking.iter_rows(named=True):
            owners = ", ".join(_one_line(o) for o in row["owners"] or [])
            lines.append(
                f"  {_pad(_one_line(row['case_id']), width)} {'; '.join(_one_line(w) for w in row['why'])}"
                f"  (owner: {owners or MISSING})"
            )
    return "\n".join(lines)


def _json_value(value):
    return round(value, 6) if isinstance(value, float) else value


def gate_json(gate_results: pl.DataFrame, candidate: str, baseline: str | None, policy_version: str | None) -> str:
    """`gate --json`: one object with the verdict, the exit code and a `gates` list (schema in docs/gate_json.md)."""
    gates = []
    for row in gate_results.iter_rows(named=True):
        row = {**row, "unit": row.get("unit") or "fraction"}
        gates.append(
            {
                key: _json_value(row.get(key)) if not isinstance(row.get(key), list) else row.get(key)
                for key in GATE_JSON_FIELDS
            }
        )
    code = exit_code(gate_results)
    document = {
        "schema_version": GATE_JSON_SCHEMA_VERSION,
        "candidate": candidate,
        "baseline": baseline,
        "policy_version": policy_version,
        "verdict": verdict_status(gate_results),
        "exit_code": code,
        "exit_meaning": exit_meaning(gate_results),
        "gates": gates,
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def gate_junit(gate_results: pl.DataFrame, candidate: str, baseline: str | None) -> str:
    """`gate --junit`: JUnit XML, one test case per gate (fail → failure, incomplete/incomparable/insufficient → error,
    not applicable → skipped)."""
    failures = gate_results.filter(pl.col("status") == "fail").height
    errors = gate_results.filter(pl.col("status").is_in(UNDECIDED_STATUSES)).height
    skipped = gate_results.filter(pl.col("status").is_in(["not_applicable", "not_gating"])).height
    suites = ET.Element("testsuites", name="eval-pipeline gate")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=f"release gates: {candidate} vs {baseline or 'no baseline'}",
        tests=str(gate_results.height),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
    )
    for row in gate_results.iter_rows(named=True):
        unit = row.get("unit") or "fraction"
        row = {**row, "unit": unit}
        case = ET.SubElement(suite, "testcase", classname=f"gates.{row['lane']}", name=row["gate"])
        values = (
            f"baseline {_number(row['baseline_value'], unit)}, candidate {_number(row['candidate_value'], unit)}, "
            f"delta {_delta(row)}, limit {_limit(row)}"
        )
        if row.get("segment"):
            n_cases = MISSING if row["n_cases"] is None else row["n_cases"]
            values += f", slice {row['segment']} ({n_cases} cases, min_cases {row['min_cases']})"
        details = "\n".join(row.get("blocking_details") or row["blocking_cases"] or [])
        if row["status"] == "fail":
            failure = ET.SubElement(
                case, "failure", message=f"{row['reason']} (owner {row['owner']})", type="gate_failed"
            )
            failure.text = f"{values}\nblocking cases:\n{details}"
        elif row["status"] in UNDECIDED_STATUSES:
            error = ET.SubElement(case, "error", message=row["reason"] or row["status"], type=row["status"])
            error.text = f"{values}\n{details}".strip()
        elif row["status"] in ("not_applicable", "not_gating"):
            ET.SubElement(case, "skipped", message=row["reason"] or row["status"])
        ET.SubElement(case, "system-out").text = values
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
