"""The index page across runs: each run's release verdict, failed gates and reports, and the gated rates over runs."""

from __future__ import annotations

import polars as pl

from eval_pipeline.io.storage import Location
from eval_pipeline.io.warehouse import Warehouse
from eval_pipeline.reporting import charts
from eval_pipeline.reporting.publish import ReportFile, publish_or_raise
from eval_pipeline.reporting.render import Section, Verdict, render_html, render_markdown

TITLE = "Evaluation runs"
# Gated metrics whose values are fractions 0–1, drawn on one axis; where gate_results has a unit, unit `fraction`.
RATE_METRICS = ("recall_at_10", "args_valid_rate", "pass_at_1", "grounding_rate")
RATE_UNIT = "fraction"
REPORT_ORDER = ("gate", "rag", "agent")
RUN_COLUMNS = {
    "run_id": "run_id",
    "created_at": "created_at",
    "candidate": "candidate",
    "model": "model",
    "dataset_version": "dataset",
    "mode": "mode",
}
GATE_COLUMNS = ("run_id", "gate", "metric", "baseline_run_id", "baseline_value", "candidate_value", "status", "unit")
TREND_NOTE = (
    "Each line is one gate's candidate value per run; a run with no candidate value of its own that served as "
    "another run's baseline shows the baseline value recorded by the first run compared against it."
)
VERDICT_MEANING = (
    "- verdict: **fail** a gate failed, the release is blocked; **undecided** a gate is incomplete, "
    "incomparable or insufficient; **not_gated** no gate applied (no baseline); **pass** every applicable gate passed"
)


def run_verdict(statuses: list[str]) -> str:
    """pass, fail, undecided or not_gated for one run's gate statuses."""
    present = set(statuses)
    if "fail" in present:
        return "fail"
    if present & {"incomplete", "incomparable", "insufficient"}:
        return "undecided"
    if not present - {"not_applicable"}:
        return "not_gated"
    return "pass"


def _frames(runs: pl.DataFrame | None, gates: pl.DataFrame | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The run and gate columns the index reads, nulls where a table or column is missing; runs in created_at order."""
    runs = runs if runs is not None else pl.DataFrame(schema={"run_id": pl.String})
    runs = runs.select(
        pl.col(c).cast(pl.String) if c in runs.columns else pl.lit(None, dtype=pl.String).alias(c) for c in RUN_COLUMNS
    )
    gates = gates if gates is not None else pl.DataFrame(schema={"run_id": pl.String})
    types = {"baseline_value": pl.Float64, "candidate_value": pl.Float64}
    gates = gates.select(
        pl.col(c).cast(types.get(c, pl.String))
        if c in gates.columns
        else pl.lit(None, dtype=types.get(c, pl.String)).alias(c)
        for c in GATE_COLUMNS
    )
    unlisted = gates.select("run_id").unique().join(runs.select("run_id"), on="run_id", how="anti")
    runs = (
        pl.concat([runs, unlisted], how="diagonal")
        .unique("run_id", keep="first", maintain_order=True)
        .sort("created_at", "run_id", nulls_last=True)
    )
    return runs, gates


def _report_names(files: list[str], suffix: str) -> list[str]:
    stems = {f.removesuffix(suffix) for f in files if f.endswith(suffix)}
    known = [s for s in REPORT_ORDER if s in stems]
    return known + sorted(stems - set(known))


def run_table(runs: pl.DataFrame, gates: pl.DataFrame, report_files: dict[str, list[str]], suffix: str) -> pl.DataFrame:
    """One row per run in order: versions, verdict, failed gates, baseline and report names (stems with `suffix`)."""
    runs, gates = _frames(runs, gates)
    rows = []
    for run in runs.iter_rows(named=True):
        own = gates.filter(pl.col("run_id") == run["run_id"])
        statuses = own["status"].to_list()
        baselines = [b for b in own["baseline_run_id"].to_list() if b and b != run["run_id"]]
        rows.append(
            {
                **{RUN_COLUMNS[k]: run[k] for k in RUN_COLUMNS},
                "verdict": run_verdict(statuses),
                "failed_gates": statuses.count("fail"),
                "gates": len(statuses),
                "baseline": baselines[0] if baselines else None,
                "reports": _report_names(report_files.get(run["run_id"], []), suffix),
            }
        )
    schema = {
        **{v: pl.String for v in RUN_COLUMNS.values()},
        "verdict": pl.String,
        "failed_gates": pl.Int64,
        "gates": pl.Int64,
        "baseline": pl.String,
        "reports": pl.List(pl.String),
    }
    return pl.DataFrame(rows, schema=schema)


def trend_series(runs: pl.DataFrame, gates: pl.DataFrame) -> dict[str, list[float | None]]:
    """Per rate gate with any value, its value per run in order: candidate value, else the first comparing run's
    baseline value."""
    runs, gates = _frames(runs, gates)
    order = runs["run_id"].to_list()
    rank = {run_id: i for i, run_id in enumerate(order)}
    rates = gates.filter(
        pl.when(pl.col("unit").is_not_null())
        .then(pl.col("unit") == RATE_UNIT)
        .otherwise(pl.col("metric").is_in(RATE_METRICS))
    )
    series = {}
    for gate in sorted(rates["gate"].drop_nulls().unique().to_list()):
        rows = sorted(
            rates.filter(pl.col("gate") == gate).iter_rows(named=True), key=lambda r: rank.get(r["run_id"], len(order))
        )
        values = []
        for run_id in order:
            own = next(
                (r["candidate_value"] for r in rows if r["run_id"] == run_id and r["candidate_value"] is not None), None
            )
            if own is None:
                own = next(
                    (
                        r["baseline_value"]
                        for r in rows
                        if r["baseline_run_id"] == run_id and r["run_id"] != run_id and r["baseline_value"] is not None
                    ),
                    None,
                )
            values.append(own)
        if any(v is not None for v in values):
            series[gate] = values
    return series


def _verdict(table: pl.DataFrame) -> Verdict | None:
    """The latest run's verdict, for the banner."""
    if table.height == 0:
        return None
    latest = table.row(table.height - 1, named=True)
    run, failed, total = latest["run_id"], latest["failed_gates"], latest["gates"]
    headline = {
        "fail": f"latest run `{run}`: {failed} of {total} gates failed",
        "undecided": f"latest run `{run}`: a gate is incomplete, incomparable or insufficient",
        "not_gated": f"latest run `{run}` has no applicable gate",
        "pass": f"latest run `{run}`: every applicable gate passed",
    }[latest["verdict"]]
    return Verdict(latest["verdict"], headline)


HIGH_CRITICALITY = "criticality=high"


def failed_high_criticality(runs: pl.DataFrame | None, slices: pl.DataFrame | None) -> pl.DataFrame:
    """Per run (in order of creation) and lane: the failed cases of high criticality, from slice_rollup."""
    schema = {"run_id": pl.String, "lane": pl.String, "failed_high_criticality_cases": pl.List(pl.String)}
    if slices is None or "failed_case_ids" not in slices.columns:
        return pl.DataFrame(schema=schema)
    order = _frames(runs, None)[0].with_row_index("order").select("run_id", "order")
    failed = (
        slices.filter((pl.col("slice") == HIGH_CRITICALITY) & (pl.col("failed_case_ids").list.len() > 0))
        .join(order, on="run_id", how="left")
        .sort("order", "run_id", "lane", nulls_last=True)
        .select("run_id", "lane", pl.col("failed_case_ids").alias("failed_high_criticality_cases"))
    )
    return failed.cast(schema)


def index_sections(
    runs: pl.DataFrame | None,
    gates: pl.DataFrame | None,
    report_files: dict[str, list[str]],
    suffix: str,
    slices: pl.DataFrame | None = None,
) -> tuple[list[Section], Verdict | None]:
    """Sections of the index (report links to files ending in `suffix`) and the latest run's verdict; `slices`: the
    slice_rollup rows of the runs, whose failed high-criticality cases come first."""
    failed = failed_high_criticality(runs, slices)
    runs, gates = _frames(runs, gates)
    table = run_table(runs, gates, report_files, suffix)
    series = trend_series(runs, gates)
    order = runs["run_id"].to_list()
    sections = (
        []
        if slices is None
        else [
            Section(
                f"Failed high-criticality cases ({failed['failed_high_criticality_cases'].list.len().sum()})",
                ["- every failed case of high criticality, per run and lane, before any rate; a case opens its page"]
                if failed.height
                else ["- no high-criticality case failed in any run"],
                # case pages are HTML only: the Markdown index names the cases without links
                failed if failed.height else None,
                links={"failed_high_criticality_cases": "{run_id}/cases/{value}.html"} if suffix == ".html" else {},
            )
        ]
    )
    sections += [
        Section(
            f"Runs ({table.height})",
            [VERDICT_MEANING, "- runs in order of creation; reports open from the last column"],
            table,
            links={"reports": "{run_id}/{value}" + suffix},
        )
    ]
    if series:
        values = pl.DataFrame(
            {"run_id": order, **series}, schema={"run_id": pl.String, **{g: pl.Float64 for g in series}}
        )
        sections.append(
            Section(
                "Gated rates over runs",
                [],
                values,
                charts.trend_chart("gated rate metrics over runs", order, series, y_max=1.0),
                caption=TREND_NOTE,
            )
        )
    else:
        sections.append(Section("Gated rates over runs", ["- no gated rate metric has a value yet"]))
    return sections, _verdict(table)


def index_html(
    runs: pl.DataFrame, gates: pl.DataFrame, report_files: dict[str, list[str]], slices: pl.DataFrame | None = None
) -> str:
    """The index page as self-contained HTML, linking each run's HTML reports."""
    sections, verdict = index_sections(runs, gates, report_files, ".html", slices)
    return render_html(TITLE, sections, verdict)


def index_markdown(
    runs: pl.DataFrame, gates: pl.DataFrame, report_files: dict[str, list[str]], slices: pl.DataFrame | None = None
) -> str:
    """The index page as Markdown, linking each run's Markdown reports."""
    sections, verdict = index_sections(runs, gates, report_files, ".md", slices)
    return render_markdown(TITLE, sections, verdict)


def index_files(warehouse: Warehouse, reports: Location) -> list[ReportFile]:
    """index.html and index.md at the root of the reports location, from every run in the warehouse, not yet written."""
    runs, gates = _frames(warehouse.read("run_manifest"), warehouse.read("gate_results"))
    slices = (
        warehouse.read("slice_rollup", columns=["run_id", "lane", "slice", "failed_case_ids"])
        if warehouse.exists("slice_rollup")
        else None
    )
    files = {run_id: reports.files(run_id) for run_id in runs["run_id"].to_list()}
    return [
        ReportFile(("index.html",), index_html(runs, gates, files, slices)),
        ReportFile(("index.md",), index_markdown(runs, gates, files, slices)),
    ]


def write_index(warehouse: Warehouse, reports: Location) -> list[str]:
    """Write index.html and index.md (index_files) only when neither holds personal data (publish: ReportLeakError
    otherwise, and neither written); their URIs."""
    return publish_or_raise(reports, index_files(warehouse, reports), "index")
