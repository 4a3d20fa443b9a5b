"""The per-lane reports: what failed first, whose it is, what to review first, and what moved against the baseline."""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from eval_pipeline.reporting import charts
from eval_pipeline.reporting.gate_report import CASE_PAGE, UNITS_LINE, blocking_table, gate_table, release_verdict
from eval_pipeline.reporting.render import Section, Verdict
from eval_pipeline.scoring.attribution import UNSUPPORTED_CORRECT, contingency, pareto

RECALL_KS = (1, 3, 5, 10, 20)


@dataclass
class LaneData:
    """Every table a lane report reads; None when the lane has no such table."""

    lane: str
    run_id: str
    manifest: dict
    stage_results: pl.DataFrame
    outcomes: pl.DataFrame
    rollup: pl.DataFrame
    rejects: pl.DataFrame | None = None
    reliability: pl.DataFrame | None = None
    quarantine: pl.DataFrame | None = None
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    baseline_run_id: str | None = None
    baseline_outcomes: pl.DataFrame | None = None
    baseline_rollup: pl.DataFrame | None = None
    # why there is no baseline comparison (exploratory run, another dataset, not scored)
    baseline_note: str | None = None
    # this lane's gates, computed as the gate asset computes them (gate_results rows)
    gates: pl.DataFrame | None = None
    # the run's cases (criticality, tags) and this lane's slice_rollup (docs/slices.md)
    cases: pl.DataFrame | None = None
    slices: pl.DataFrame | None = None


LINKS = {"case_id": CASE_PAGE}
# where a lane report's own mean of a gated metric comes from (per trace or per case, every complete one)
OWN_MEANS = {
    "recall_at_10": ("retrieval_scores", "recall_at_10"),
    "grounding_rate": ("grounding_scores", "grounding_rate"),
    "args_valid_rate": ("tool_scores", "args_valid_rate"),
}


def lane_verdict(data: LaneData) -> Verdict | None:
    """The banner of a lane report: this lane's gates, and where the whole release decision is."""
    if data.gates is None or data.gates.height == 0:
        return None
    verdict = release_verdict(data.gates, data.run_id, data.gates["baseline_run_id"][0])
    label = "RAG lane" if data.lane == "rag" else "Agent lane"
    details = [
        *high_criticality_banner(data),
        *verdict.details,
        "- the release decision over every gate, both lanes and `no_new_failures` included: [gate report](gate.html)",
    ]
    decision, _, rest = verdict.headline.partition(": ")
    headline = f"{decision}: {label} gates — {rest}" if rest and decision.startswith("Release") else verdict.headline
    return Verdict(status=verdict.status, headline=headline, details=details)


def _failed_high_criticality(data: LaneData) -> pl.DataFrame:
    """The failed-cases table (failures_section) narrowed to the cases of high criticality."""
    table = failures_section(data).table
    if data.cases is None or "criticality" not in data.cases.columns:
        return table.head(0)
    high = data.cases.filter(pl.col("criticality") == "high").select("case_id")
    return table.join(high, on="case_id", how="semi", maintain_order="left")


def high_criticality_banner(data: LaneData) -> list[str]:
    """The banner line naming every failed high-criticality case of the lane, when there is one."""
    failed = _failed_high_criticality(data)
    if failed.height == 0:
        return []
    return [
        f"- failed high-criticality cases ({failed.height}): "
        + ", ".join(
            f"{row['case_id']} ({', '.join(s for s in row['first_failing_stages'] if s)}, {row['attempts_failed']})"
            for row in failed.iter_rows(named=True)
        )
    ]


def failed_high_criticality_section(data: LaneData) -> Section:
    """Every failed case of high criticality by name, with its first failing stages and attempts: read before any mean."""
    failed = _failed_high_criticality(data)
    if data.cases is None:
        return Section("Failed high-criticality cases", ["- the run's cases were not available: criticality unknown"])
    n_high = (
        data.outcomes.filter(pl.col("lane") == data.lane)
        .join(data.cases.filter(pl.col("criticality") == "high").select("case_id"), on="case_id", how="semi")["case_id"]
        .n_unique()
    )
    lines = [
        f"- {failed.height} of {n_high} high-criticality case(s) of this lane failed; each is listed here by name, "
        "whatever the means below say"
    ]
    return Section(
        f"Failed high-criticality cases ({failed.height})",
        lines,
        failed.select("case_id", "attempts_failed", "first_failing_stages", "owners", "reasons"),
        links=LINKS,
    )


SLICE_ROWS_SHOWN = 40
SLICE_COLUMNS = {
    "value": "value",
    "n_cases": "cases",
    "n_traces": "traces",
    "traces_failed": "failed",
    "traces_incomplete": "incomplete",
    "pass_rate": "pass_rate",
    "pass_at_1": "pass_at_1",
    "top_failing_stage": "top_first_failing_stage",
    "failed_case_ids": "failed_cases",
}


PROCESS_FAILED = "failed_process_stage"
RELIABILITY_NOTE = (
    "- pass@1 and pass^k count an attempt a success when its verified outcome (the world state) passed, "
    "not every stage: `failed_process_stage` counts the attempts that failed a process stage (policy, tool "
    "selection, arguments, order, loop, recovery), so a case may read pass@1 1.0000 and still fail every "
    "attempt in Failed cases"
)


def process_failures(stage_results: pl.DataFrame | None, lane: str) -> pl.DataFrame | None:
    """Per case, the attempts (traces) that failed a stage other than the verified outcome; None without stage results."""
    needed = {"case_id", "trace_id", "lane", "stage", "status"}
    if stage_results is None or not needed <= set(stage_results.columns):
        return None
    failed = (
        stage_results.filter((pl.col("lane") == lane) & (pl.col("stage") != "outcome") & (pl.col("status") == "fail"))
        .group_by("case_id")
        .agg(pl.col("trace_id").n_unique().cast(pl.Int64).alias(PROCESS_FAILED))
    )
    return failed


def reliability_section(data: LaneData) -> Section:
    """pass@1 and pass^k per case, beside the attempts that failed a process stage (which pass@1 does not count)."""
    reliability = data.reliability
    ks = sorted((c for c in reliability.columns if c.startswith("pass_hat_")), key=lambda c: int(c.rsplit("_", 1)[1]))
    curve = [reliability[c].drop_nulls().mean() for c in ks]
    lines = [
        f"- pass@1 {_fmt(reliability['pass_at_1'].drop_nulls().mean())}; "
        + ", ".join(f"pass^{c.rsplit('_', 1)[1]} {_fmt(v)}" for c, v in zip(ks, curve, strict=True))
    ]
    failed = process_failures(data.stage_results, data.lane) if data.lane == "agent" else None
    if failed is not None:
        # a display column only: the stored reliability table keeps its columns and numbers
        reliability = reliability.join(failed, on="case_id", how="left", maintain_order="left").with_columns(
            pl.col(PROCESS_FAILED).fill_null(0)
        )
        lines.append(RELIABILITY_NOTE)
    columns = [
        c
        for c in ("case_id", "n_attempts", "n_incomplete", "n_success", PROCESS_FAILED, "pass_at_1", *ks, "flaky")
        if c in reliability.columns
    ]
    return Section(
        "Reliability over repeated attempts",
        lines,
        reliability.sort("case_id").select(columns),
        charts.line_chart("pass^k (all k attempts succeed)", [c.rsplit("_", 1)[1] for c in ks], curve),
    )


def slice_note(lane: str) -> str:
    """Why a slice's pass_rate and pass_at_1 differ."""
    if lane == "agent":
        return (
            "- pass_rate counts a trace passed only when every stage passed; pass_at_1 counts an attempt a success when "
            "its verified outcome passed (process stages such as tool order or arguments aside), per case and then "
            "averaged: a slice whose attempts reach the right world state the wrong way reads pass_at_1 above pass_rate"
        )
    return (
        "- pass_rate counts a trace passed when every stage passed; pass_at_1 counts the same, per case and then "
        "averaged, so the two differ when the slice's cases have different numbers of attempts"
    )


def slices_sections(data: LaneData) -> list[Section]:
    """Per slice dimension (criticality, tool risk, each tag, corpus family): each value's cases, pass rate, pass@1 and
    top first failing stage."""
    if data.slices is None or data.slices.height == 0:
        return [Section("Slices", ["- no slice: the lane has no trace of a case with a slice"])]
    lines = [
        "- case results by decision slice (docs/slices.md), never only the suite mean: pass rate over the complete "
        "traces of the slice (incomplete ones counted apart), pass@1 the mean over its cases, and where its failures "
        "start first",
        slice_note(data.lane),
        "- a case may be in several values of one dimension (several corpus families) and in no tag slice",
    ]
    sections = [Section("Slices", lines)]
    for dimension in data.slices["dimension"].unique(maintain_order=True).to_list():
        rows = data.slices.filter(pl.col("dimension") == dimension)
        more = []
        if rows.height > SLICE_ROWS_SHOWN:
            # thousands of corpus families would bury the report: the worst slices, the rest in slice_rollup
            more = [
                f"- the {SLICE_ROWS_SHOWN} of {rows.height} values with the lowest pass rate; every value is in "
                f"the table `slice_rollup`"
            ]
            rows = rows.sort(pl.col("pass_rate").fill_null(2.0), "value").head(SLICE_ROWS_SHOWN)
        table = rows.select([pl.col(c).alias(name) for c, name in SLICE_COLUMNS.items()])
        sections.append(Section(f"By {dimension}", more, table, level=3, links={"failed_cases": CASE_PAGE}))
    return sections


def gated_section(data: LaneData) -> list[Section]:
    """This lane's gates exactly as the gate computes them: same values, units, cases compared and exclusions."""
    if data.gates is None or data.gates.height == 0:
        return []
    lines = [UNITS_LINE]
    for row in data.gates.iter_rows(named=True):
        if row.get("segment"):
            lines.extend(_segment_line(data, row))
            continue
        own = _own_mean(data, row["metric"])
        if row["candidate_value"] is None or own is None:
            continue
        excluded = ", ".join(row["excluded_cases"] or []) or "none"
        lines.append(
            f"- {row['gate']}: the gate compares {row['n_cases']} cases complete in both runs (excluded: "
            f"{excluded}): candidate {row['candidate_value']:.4f}; this report's mean over every complete "
            f"{own[1]} of the run is {own[0]:.4f}"
        )
    sections = [Section("Release gates of this lane", lines, gate_table(data.gates))]
    blocking = blocking_table(data.gates)
    if blocking.height:
        sections.append(
            Section(f"Cases that block this lane's gates ({blocking.height})", [], blocking, level=3, links=LINKS)
        )
    return sections


def _segment_line(data: LaneData, row: dict) -> list[str]:
    """A segmented gate's scope: its slice, the cases compared against min_cases, and the slice's own pass@1 beside."""
    if row["candidate_value"] is None:
        return []
    excluded = ", ".join(row["excluded_cases"] or []) or "none"
    own = ""
    if row["metric"] == "pass_at_1" and data.slices is not None and data.slices.height:
        found = data.slices.filter(pl.col("slice") == row["segment"])
        if found.height and found["pass_at_1"][0] is not None:
            own = (
                f"; this report's mean over the slice's {found['pass_at_1_cases'][0]} complete case(s) is "
                f"{found['pass_at_1'][0]:.4f}"
            )
    return [
        f"- {row['gate']}: on slice `{row['segment']}` the gate compares {row['n_cases']} cases complete in both runs "
        f"(min_cases {row['min_cases']}; excluded: {excluded}): candidate {row['candidate_value']:.4f}{own}"
    ]


def _own_mean(data: LaneData, metric: str) -> tuple[float, str] | None:
    if metric == "pass_at_1" and data.reliability is not None and "pass_at_1" in data.reliability.columns:
        value = data.reliability["pass_at_1"].drop_nulls().mean()
        return (value, "case") if value is not None else None
    table, column = OWN_MEANS.get(metric, (None, None))
    value = _mean(data.tables.get(table), column) if table else None
    return (value, "trace") if value is not None else None


def _mean(frame: pl.DataFrame | None, column: str) -> float | None:
    if frame is None or column not in frame.columns:
        return None
    scored = frame.filter(pl.col("status") == "scored") if "status" in frame.columns else frame
    values = scored[column].drop_nulls()
    if values.dtype == pl.Boolean:
        values = values.cast(pl.Float64)
    return values.mean() if len(values) else None


def incomplete_lines(frame: pl.DataFrame | None, stage: str) -> list[str]:
    """One line counting the traces whose `stage` is incomplete, by reason: kept apart from every mean, never a zero."""
    if frame is None or f"{stage}_stage" not in frame.columns:
        return []
    reasons = (
        frame.filter(pl.col(f"{stage}_stage") == "incomplete")
        .group_by(f"{stage}_reason")
        .len()
        .sort(["len", f"{stage}_reason"], descending=[True, False], nulls_last=True)
    )
    if reasons.height == 0:
        return [f"- incomplete {stage}: 0 traces"]
    detail = "; ".join(f"{reason or 'no reason given'}: {n}" for reason, n in reasons.iter_rows())
    return [
        f"- incomplete {stage}: {int(reasons['len'].sum())} of {frame.height} traces, left out of the means ({detail})"
    ]


def _fmt(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _metric_table(frame: pl.DataFrame | None, columns: list[str]) -> pl.DataFrame:
    # scored_traces counts the rows each mean is taken over: incomplete traces are in neither.
    scored = frame.filter(pl.col("status") == "scored") if frame is not None and "status" in frame.columns else frame
    rows = [
        {"metric": c, "mean": _mean(frame, c), "scored_traces": scored.filter(pl.col(c).is_not_null()).height}
        for c in columns
        if frame is not None and c in frame.columns
    ]
    return pl.DataFrame(rows, schema={"metric": pl.String, "mean": pl.Float64, "scored_traces": pl.Int64})


def summary_section(data: LaneData) -> Section:
    lane = data.outcomes.filter(pl.col("lane") == data.lane)
    counts = {k: lane.filter(pl.col("outcome") == k).height for k in ("pass", "fail", "incomplete", "not_applicable")}
    versions = {
        k: data.manifest.get(k)
        for k in (
            "candidate",
            "model",
            "prompt_version",
            "index_version",
            "dataset_version",
            "corpus_version",
            "environment_version",
            "mode",
        )
    }
    # an importer writes the version "none" where the source has no corpus: said in words, not as a value
    lines = [
        f"- run `{data.run_id}`: "
        + ", ".join(
            f"{k} `{v}`" if v != "none" else f"no {k.removesuffix('_version')}" for k, v in versions.items() if v
        ),
        f"- traces in this lane: {lane.height} — passed {counts['pass']}, failed {counts['fail']}, "
        f"incomplete {counts['incomplete']} (owner: harness), not applicable {counts['not_applicable']}",
    ]
    if data.rejects is not None:
        lines.append(f"- rejected input lines (whole run): {data.rejects.height}")
    if data.lane == "rag":
        lines.append(
            "- lanes are never blended: this report covers retrieval, context, grounding, citations and answers only"
        )
    else:
        lines.append(
            "- lanes are never blended: this report covers tool calls, verified world state, recovery and reliability only"
        )
    return Section("Summary", lines)


def pareto_sections(data: LaneData) -> list[Section]:
    ranked = pareto(data.rollup)
    total = int(data.rollup["failures"].sum()) if data.rollup.height else 0
    lane_failures = int(data.rollup["lane_failures"].max()) if data.rollup.height else 0
    baseline = None
    if data.baseline_rollup is not None and data.baseline_rollup.height:
        before = dict(data.baseline_rollup.select("stage", "failures").iter_rows())
        baseline = [float(before.get(stage) or 0) for stage in ranked["stage"].to_list()]
    chart = charts.bar_chart(
        f"{data.lane}: failures by first failing stage",
        ranked["stage"].to_list(),
        [float(v) for v in ranked["failures"].to_list()],
        ranked["cumulative_share"].to_list(),
        baseline=baseline,
    )
    lines = [
        f"- stage counts sum to {total}; the lane has {lane_failures} failed traces"
        + (" ✔" if total == lane_failures else " ✘ (mismatch)")
    ]
    table = data.rollup.select("stage", "failures", "share", "hazards", "owner")
    sections = [
        Section(
            "First failing stage (Pareto)",
            lines,
            ranked.select("stage", "failures", "share", "cumulative_share", "owner"),
            chart,
        ),
        Section("All stages", [], table, level=3),
    ]
    return sections


def hazard_section(data: LaneData) -> Section:
    hazards = (
        data.outcomes.filter(pl.col("hazard") == UNSUPPORTED_CORRECT)
        .sort("trace_id")
        .select("trace_id", "case_id", "reason")
    )
    lines = [
        "- retrieval failed but the answer is right: counted as a pass on a dashboard, a hazard here — it fails the day "
        "the policy changes. Review these first."
    ]
    return Section(f"Review first: {UNSUPPORTED_CORRECT} ({hazards.height})", lines, hazards, links=LINKS)


def failures_section(data: LaneData) -> Section:
    """Failed traces grouped per case: attempts failed of attempts made, the first failing stages and their reasons."""
    lane = data.outcomes.filter(pl.col("lane") == data.lane)
    failed = lane.filter(pl.col("outcome") == "fail")
    attempts = lane.group_by("case_id").agg(pl.len().alias("attempts"))
    grouped = (
        failed.sort("trace_id")
        .group_by("case_id", maintain_order=True)
        .agg(
            pl.len().alias("failed"),
            pl.col("first_failing_stage").unique(maintain_order=True).alias("first_failing_stages"),
            pl.col("owner").unique(maintain_order=True).alias("owners"),
            pl.col("hazard").drop_nulls().first(),
            pl.col("reason").unique(maintain_order=True).alias("reasons"),
        )
        .join(attempts, on="case_id", how="left")
        .with_columns(pl.format("{} of {}", "failed", "attempts").alias("attempts_failed"))
        .sort(pl.col("hazard").is_null(), pl.col("first_failing_stages").list.first(), "case_id")
        .select("case_id", "attempts_failed", "first_failing_stages", "owners", "hazard", "reasons")
    )
    lines = [
        f"- {failed.height} failed traces in {grouped.height} cases; identical reasons of a case's attempts shown once"
    ]
    return Section(f"Failed cases ({grouped.height})", lines, grouped, links=LINKS)


def incomplete_section(data: LaneData) -> Section:
    incomplete = (
        data.outcomes.filter((pl.col("lane") == data.lane) & (pl.col("outcome") == "incomplete"))
        .sort("trace_id")
        .select("trace_id", "case_id", "owner", "reason")
    )
    lines = ["- an evaluation that could not complete is never a zero, a pass, or dropped: it is counted here"]
    return Section(f"Incomplete ({incomplete.height}, owner: harness)", lines, incomplete, links=LINKS)


def quarantine_section(data: LaneData) -> Section:
    frame = data.quarantine if data.quarantine is not None else pl.DataFrame()
    lines = ["- flaky cases (both passed and failed across identical attempts) stop gating and are always listed"]
    return Section(
        f"Quarantine ({frame.height} flaky cases)",
        lines,
        frame.sort("case_id").select([c for c in ("case_id", "reason", "flipped_trace_ids") if c in frame.columns])
        if frame.height
        else frame,
    )


def rejects_sections(data: LaneData) -> list[Section]:
    if data.rejects is None:
        return [Section("Rejected input lines", ["- no reject table"])]
    by_reason = (
        data.rejects.with_columns(pl.col("reason").str.replace_all(r"'[^']*'", "'…'"))
        .group_by("input_kind", "reason")
        .len()
        .sort(["len", "reason", "input_kind"], descending=[True, False, False])
        .rename({"len": "lines"})
    )
    detail = data.rejects.select("input_kind", "source_file", "line", "reason").sort(
        "source_file", "line", "input_kind", "reason"
    )
    return [
        Section(
            f"Rejected input lines ({data.rejects.height})",
            ["- nothing is dropped silently: every rejected line, with its reason"],
            by_reason,
        ),
        Section("Each rejected line", [], detail, level=3),
    ]


def baseline_sections(data: LaneData) -> list[Section]:
    if data.baseline_run_id is None or data.baseline_outcomes is None:
        return (
            [Section("Against a baseline", [f"- no baseline comparison: {data.baseline_note}"])]
            if data.baseline_note
            else []
        )
    lane = data.lane

    def case_status(outcomes: pl.DataFrame) -> pl.DataFrame:
        return (
            outcomes.filter(pl.col("lane") == lane)
            .group_by("case_id")
            .agg(
                (pl.col("outcome") == "fail").any().alias("failed"), (pl.col("outcome") == "pass").any().alias("passed")
            )
        )

    base, cand = case_status(data.baseline_outcomes), case_status(data.outcomes)
    newly = (
        base.filter(~pl.col("failed") & pl.col("passed"))
        .select("case_id")
        .join(cand.filter(pl.col("failed")).select("case_id"), on="case_id")
        .join(
            data.outcomes.filter((pl.col("lane") == lane) & (pl.col("outcome") == "fail"))
            .group_by("case_id")
            .agg(pl.col("first_failing_stage").unique().sort().alias("first_failing_stages")),
            on="case_id",
            how="left",
        )
        .sort("case_id")
    )
    shift = pl.DataFrame()
    if data.baseline_rollup is not None and data.baseline_rollup.height:
        shift = (
            data.baseline_rollup.select(
                "stage",
                "stage_order",
                pl.col("failures").alias("baseline_failures"),
                pl.col("share").alias("baseline_share"),
            )
            .join(
                data.rollup.select(
                    "stage", pl.col("failures").alias("candidate_failures"), pl.col("share").alias("candidate_share")
                ),
                on="stage",
                how="full",
                coalesce=True,
            )
            .sort("stage_order")
            .drop("stage_order")
            .with_columns(
                (pl.col("candidate_share").fill_null(0) - pl.col("baseline_share").fill_null(0)).alias("share_shift")
            )
        )
    flaky = (
        set(data.quarantine["case_id"].to_list()) if data.quarantine is not None and data.quarantine.height else set()
    )
    newly = newly.with_columns(pl.col("case_id").is_in(sorted(flaky)).alias("flaky"))
    lines = [
        f"- newly failing cases (passed in `{data.baseline_run_id}`, fail here): {newly.height}"
        + (
            f", of which flaky (quarantined, left out of the `no_new_failures` gate): {newly['flaky'].sum()}"
            if newly["flaky"].any()
            else ""
        )
    ]
    return [
        Section(f"Against baseline {data.baseline_run_id}", lines, newly, links=LINKS),
        Section(
            "Shift in the attribution mix",
            ["- share of the lane's failures per first failing stage, baseline → this run"],
            shift if shift.height else None,
            level=3,
        ),
    ]


# ---------------------------------------------------------------- RAG


def rag_sections(data: LaneData) -> list[Section]:
    """Sections of the RAG lane report."""
    t = data.tables
    sections = [
        failed_high_criticality_section(data),
        summary_section(data),
        *gated_section(data),
        hazard_section(data),
        *pareto_sections(data),
    ]
    sections.append(
        Section(
            "Retrieval × grounding × answer",
            ["- each cell is a diagnosis: the combination says which component to open first"],
            contingency(data.stage_results),
        )
    )

    retrieval = t.get("retrieval_scores")
    recall_curve = [_mean(retrieval, f"recall_at_{k}") for k in RECALL_KS]
    lines = [
        f"- mrr {_fmt(_mean(retrieval, 'mrr'))}, ndcg@10 {_fmt(_mean(retrieval, 'ndcg_at_10'))}, "
        f"context precision {_fmt(_mean(retrieval, 'context_precision'))}, judged@10 {_fmt(_mean(retrieval, 'judged_at_10'))}"
    ]
    if retrieval is not None and "qrels_version" in retrieval.columns and retrieval.height:
        lines.append(f"- qrels version `{retrieval['qrels_version'][0]}`")
    classes = (
        (
            retrieval.filter(pl.col("failure_class").is_not_null())
            .group_by("failure_class")
            .len()
            .sort(["len", "failure_class"], descending=[True, False])
            .rename({"len": "failed_traces"})
        )
        if retrieval is not None
        else None
    )
    sections.append(
        Section(
            "Retrieval", lines, classes, charts.line_chart("mean recall@k", [str(k) for k in RECALL_KS], recall_curve)
        )
    )
    sections.append(
        Section(
            "Retrieval metrics",
            [],
            _metric_table(
                retrieval,
                [
                    *[f"recall_at_{k}" for k in RECALL_KS],
                    "precision_at_1",
                    "precision_at_5",
                    "precision_at_10",
                    "mrr",
                    "ndcg_at_3",
                    "ndcg_at_5",
                    "ndcg_at_10",
                    "context_precision",
                    "judged_at_10",
                ],
            ),
            level=3,
        )
    )
    sections.append(
        Section(
            "Context assembly",
            [],
            _metric_table(t.get("context_scores"), ["context_recall", "context_precision", "context_tokens"]),
        )
    )
    sections.extend(grounding_sections(data))
    sections.append(
        Section(
            "Citations",
            incomplete_lines(t.get("citation_scores"), "citation"),
            _metric_table(
                t.get("citation_scores"),
                ["citation_precision", "citation_recall", "citation_resolution_rate", "quotes_found_rate"],
            ),
        )
    )
    sections.extend(evidence_diversity_sections(data))
    sections.append(
        Section(
            "Answers", [], _metric_table(t.get("answer_scores"), ["contains_all", "exact_match", "token_f1", "refused"])
        )
    )
    sections.extend([quarantine_section(data), failures_section(data), incomplete_section(data)])
    sections.extend(slices_sections(data))
    sections.extend(baseline_sections(data))
    sections.extend(rejects_sections(data))
    return sections


def grounding_sections(data: LaneData) -> list[Section]:
    grounding = data.tables.get("grounding_scores")
    calibration = data.tables.get("judge_calibration")
    review = data.tables.get("review_queue")
    lines = [
        f"- grounding rate {_fmt(_mean(grounding, 'grounding_rate'))} (supported claims / claims, per trace)",
        *incomplete_lines(grounding, "grounding"),
    ]
    chart = None
    if calibration is not None and calibration.height:
        claim = calibration.filter(pl.col("level") == "claim") if "level" in calibration.columns else calibration
        if claim.height:
            row = claim.row(0, named=True)
            may_gate = bool(row.get("may_gate"))
            lines.append(
                f"- judge `{row.get('judge_version')}`: n {row.get('n')}, agreement {_fmt(row.get('agreement'))}, "
                f"Cohen's κ {_fmt(row.get('cohen_kappa'))} (95% CI {_fmt(row.get('kappa_ci_low'))}–"
                f"{_fmt(row.get('kappa_ci_high'))}), balanced accuracy {_fmt(row.get('balanced_accuracy'))}, "
                f"may gate: {'yes' if may_gate else 'no'}"
            )
            if row.get("self_consistency_note"):
                lines.append(
                    f"- self-consistency: flip rate {_fmt(row.get('self_consistency_flip_rate'))} "
                    f"({row.get('self_consistency_note')})"
                )
            if not may_gate:
                lines.append(
                    f"- the judge is not calibrated: grounding does not gate; {review.height if review is not None else 0} "
                    "trace(s) went to the review queue instead"
                )
            chart = charts.interval_chart(
                "judge calibration: Cohen's κ with 95% CI",
                row.get("cohen_kappa"),
                row.get("kappa_ci_low"),
                row.get("kappa_ci_high"),
                0.6,
            )
    sections = [
        Section("Grounding", lines, _metric_table(grounding, ["grounding_rate", "n_claims", "n_supported"]), chart)
    ]
    if calibration is not None and calibration.height:
        columns = [
            c
            for c in (
                "level",
                "judge_version",
                "may_gate",
                "n",
                "agreement",
                "cohen_kappa",
                "kappa_ci_low",
                "kappa_ci_high",
                "balanced_accuracy",
                "self_consistency_flip_rate",
                "confusion",
            )
            if c in calibration.columns
        ]
        lines = (
            ["- confusion: rows are the human labels, columns the judge's verdicts"] if "confusion" in columns else []
        )
        sections.append(Section("Judge calibration", lines, calibration.select(columns), level=3))
    if review is not None and review.height:
        sections.append(Section(f"Review queue ({review.height})", [], review, level=3, links=LINKS))
    return sections


REDUNDANCY_BINS = ((0.0, "0"), (0.25, "≤ 0.25"), (0.5, "≤ 0.5"), (0.75, "≤ 0.75"), (1.0, "> 0.75"))


def _counts_by(frame: pl.DataFrame, column: str) -> tuple[list[str], list[float]]:
    """Labels and trace counts of each value of an integer column (nulls left out), in value order."""
    counts = frame.filter(pl.col(column).is_not_null()).group_by(column).len().sort(column)
    return [str(v) for v in counts[column].to_list()], [float(n) for n in counts["len"].to_list()]


def _scored(frame: pl.DataFrame | None, column: str) -> pl.DataFrame:
    if frame is None or column not in frame.columns:
        return pl.DataFrame({column: []}, schema={column: pl.Int64})
    return (
        frame.filter((pl.col("status") == "scored") & pl.col(column).is_not_null())
        if "status" in frame.columns
        else frame
    )


def evidence_diversity_sections(data: LaneData) -> list[Section]:
    """Independent document families behind the context, the citations and the supported claims (docs/evidence_diversity.md)."""
    t = data.tables
    context, citations, grounding = t.get("context_scores"), t.get("citation_scores"), t.get("grounding_scores")
    if context is None or "context_families" not in context.columns:
        return []
    spread = _scored(context, "context_families")
    one = spread.filter(pl.col("context_families") == 1).height
    lines = [
        f"- context families per trace: mean {_fmt(_mean(context, 'context_families'), 2)} over {spread.height} scored "
        f"traces; {one} draw on a single family (ten chunks of one page are one source)",
        f"- redundant-chunk share (chunks of a family beyond its first / chunks): mean "
        f"{_fmt(_mean(context, 'redundant_chunk_share'))}",
    ]
    cited = _scored(citations, "cited_families")
    if cited.height:
        lines.append(
            f"- cited families per citing trace: mean {_fmt(_mean(citations, 'cited_families'), 2)} over {cited.height} "
            f"traces; {cited.filter(pl.col('cited_families') == 1).height} cite a single family"
        )
    claims = _scored(grounding, "n_triangulated")
    supported, triangulated = (
        int(claims["n_supported"].sum() or 0) if claims.height else 0,
        int(claims["n_triangulated"].sum() or 0),
    )
    if supported:
        lines.append(
            f"- supported claims triangulated (two or more independent families support them): {triangulated} of "
            f"{supported} ({_fmt(triangulated / supported)})"
        )
    table = pl.concat(
        [
            _metric_table(context, ["context_families", "context_sources", "redundant_chunk_share"]),
            _metric_table(citations, ["cited_families", "cited_sources"]),
            _metric_table(grounding, ["n_triangulated"]),
        ]
    )
    labels, values = _counts_by(spread, "context_families")
    sections = [
        Section("Evidence diversity", lines, table, charts.bar_chart("traces by context families", labels, values))
    ]
    shares = _scored(context, "redundant_chunk_share")
    if shares.height:
        share = pl.col("redundant_chunk_share")
        binned = shares.select(
            pl.coalesce([pl.when(share <= top).then(pl.lit(label)) for top, label in REDUNDANCY_BINS]).alias("bin")
        )
        counts = dict(binned.group_by("bin").len().iter_rows())
        sections.append(
            Section(
                "Redundant chunks",
                [],
                None,
                charts.bar_chart(
                    "traces by redundant-chunk share",
                    [label for _, label in REDUNDANCY_BINS],
                    [float(counts.get(label, 0)) for _, label in REDUNDANCY_BINS],
                ),
                level=3,
            )
        )
    if cited.height:
        labels, values = _counts_by(cited, "cited_families")
        sections.append(
            Section(
                "Cited families", [], None, charts.bar_chart("citing traces by cited families", labels, values), level=3
            )
        )
    if supported:
        sections.append(
            Section(
                "Triangulated claims",
                [],
                None,
                charts.bar_chart(
                    "supported claims by independent support",
                    ["triangulated (≥ 2 families)", "one family or fewer"],
                    [float(triangulated), float(supported - triangulated)],
                ),
                level=3,
            )
        )
    return sections


# ---------------------------------------------------------------- agent


def agent_sections(
    data: LaneData, fault_rates: pl.DataFrame | None = None, efficiency: pl.DataFrame | None = None
) -> list[Section]:
    """Sections of the agent lane report."""
    t = data.tables
    tools, outcomes = t.get("tool_scores"), t.get("outcome_scores")
    sections = [
        failed_high_criticality_section(data),
        summary_section(data),
        *gated_section(data),
        *pareto_sections(data),
    ]
    tool_lines = []
    if tools is not None:
        violations = tools.filter(pl.col("policy_violation").fill_null(False))
        loops = tools.filter(pl.col("loop_detected").fill_null(False))
        divergent = tools.filter(pl.col("adapter_divergence").is_not_null())
        tool_lines = [
            f"- policy violations: {violations.height} trace(s); loops: {loops.height}; "
            f"adapter divergences (harness defects, incomplete): {divergent.height}"
        ]
    sections.append(
        Section(
            "Tool calls",
            tool_lines,
            _metric_table(
                tools,
                [
                    "tool_call_f1",
                    "tool_call_precision",
                    "tool_call_recall",
                    "strict_order_accuracy",
                    "args_valid_rate",
                    "unnecessary_call_rate",
                ],
            ),
        )
    )
    if tools is not None:
        columns = [
            c
            for c in (
                "trace_id",
                "case_id",
                "policy_violations",
                "order_violations",
                "missing_calls",
                "unexpected_calls",
                "adapter_divergence",
            )
            if c in tools.columns
        ]
        flagged = tools.filter(
            pl.col("policy_violation").fill_null(False)
            | pl.col("adapter_divergence").is_not_null()
            | pl.col("loop_detected").fill_null(False)
        ).sort("trace_id")
        sections.append(
            Section("Policy violations, loops and adapter divergences", [], flagged.select(columns), level=3)
        )
    out_lines = []
    if outcomes is not None:
        scored = outcomes.filter(pl.col("status") == "scored")
        rate = scored["success"].cast(pl.Float64).mean() if scored.height else None
        out_lines.append(
            f"- success (verified world state, never the final message): {_fmt(rate)} over {scored.height} scored traces"
        )
        if "milestones_failed" in outcomes.columns:
            failed = (
                outcomes.select(pl.col("milestones_failed").explode().alias("milestone"))
                .drop_nulls()
                .group_by("milestone")
                .len()
                .sort(["len", "milestone"], descending=[True, False])
                .rename({"len": "failed_traces"})
            )
            sections.append(Section("Outcome", out_lines, failed))
        else:
            sections.append(Section("Outcome", out_lines))
    if efficiency is not None and efficiency.height:
        sections.append(
            Section(
                "Efficiency on successes",
                ["- cost, tokens and steps per successful attempt"],
                efficiency.drop("run_id", strict=False),
                level=3,
            )
        )
    if fault_rates is not None and fault_rates.height:
        sections.append(
            Section(
                "Injected faults",
                ["- recovery, escalation and unsafe continuation per fault kind"],
                fault_rates.drop("run_id", strict=False),
            )
        )
    if data.reliability is not None and data.reliability.height:
        sections.append(reliability_section(data))
    sections.extend([quarantine_section(data), failures_section(data), incomplete_section(data)])
    sections.extend(slices_sections(data))
    sections.extend(baseline_sections(data))
    sections.extend(rejects_sections(data))
    return sections
