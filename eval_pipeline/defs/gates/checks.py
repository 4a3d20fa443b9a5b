"""The release decision as an asset check: failed gates and the cases that block, where people look."""

import dagster as dg
import polars as pl

from eval_pipeline.reporting.gate_report import blocking_table, release_verdict
from eval_pipeline.reporting.render import markdown_table
from eval_pipeline.scoring.gate_table import exit_code

RELEASE_CHECK = "release_is_not_blocked"
# A blocked release is a result of the evaluation, not an error in it (docs/gates.md#exit-codes-and-checks): the check
# turns red with the failed gates and blocking cases, and stops nothing, so every report is still written and the
# Dagster run succeeds. `eval-pipeline gate` is what stops a release in CI (exit 1).
RELEASE_CHECK_DESCRIPTION = (
    "The release decision: red when a release gate fails, with the failed gates and blocking "
    "cases in its metadata. Not blocking: the reports are still written and the run succeeds; "
    "`eval-pipeline gate` exits 1."
)


def release_check(asset: str, gate_results: pl.DataFrame, run_id: str) -> dg.AssetCheckResult:
    """The release decision as an ERROR check: failed gates and blocking cases in the metadata."""
    failed = gate_results.filter(pl.col("status") == "fail")
    baseline = gate_results["baseline_run_id"][0] if gate_results.height else None
    verdict = release_verdict(gate_results, run_id, baseline)
    blocking = blocking_table(gate_results)
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=RELEASE_CHECK,
        passed=failed.height == 0,
        severity=dg.AssetCheckSeverity.ERROR,
        # plain text: the UI and the command line show a check's description as it is, Markdown unrendered
        description=verdict.headline.replace("`", ""),
        metadata={
            "verdict": dg.MetadataValue.text(verdict.status),
            "exit_code": dg.MetadataValue.int(exit_code(gate_results)),
            "failed_gates": dg.MetadataValue.json(
                failed.select(
                    "gate",
                    "metric",
                    "unit",
                    "baseline_value",
                    "candidate_value",
                    "delta",
                    "threshold",
                    "owner",
                    "reason",
                ).to_dicts()
            ),
            "blocking_cases": dg.MetadataValue.md(markdown_table(blocking) if blocking.height else "no blocking case"),
            "baseline_run_id": dg.MetadataValue.text(baseline or "no baseline"),
        },
    )
