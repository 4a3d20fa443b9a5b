"""The checks of the de-identified tables: schema, unique keys and no residual personal data, over every batch."""

import dagster as dg

from eval_pipeline.defs import checks
from eval_pipeline.quality.contracts import NO_PERSONAL_DATA, SCHEMA, TableContract

DEID_TRACES_CONTRACT = TableContract(
    columns=("run_id", "trace_id", "case_id", "attempt", "status"), unique=("trace_id",), per_trace=False
)
DEID_CASES_CONTRACT = TableContract(
    columns=("case_id", "case_revision", "lanes"), unique=("case_id",), per_trace=False, independent_scan=True
)


def batch_checks(
    findings: int, sample: dict[str, int], duplicates: int, rows: int, missing_columns: list[str]
) -> list[dg.AssetCheckResult]:
    """The deid_traces checks, gathered over every batch (the table is never held whole)."""
    key = dg.AssetKey("deid_traces")
    return [
        dg.AssetCheckResult(
            asset_key=key,
            check_name=SCHEMA,
            passed=not missing_columns,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"missing_columns": ", ".join(missing_columns) or "no column missing"},
        ),
        dg.AssetCheckResult(
            asset_key=key,
            check_name="value_ranges",
            passed=duplicates == 0,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"rows": rows, "duplicate_trace_ids": duplicates},
        ),
        dg.AssetCheckResult(
            asset_key=key,
            check_name=NO_PERSONAL_DATA,
            passed=findings == 0,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"{findings} residual personal data finding(s)"
            + "".join(f"; {where} x{n}" for where, n in list(sample.items())[:10]),
            metadata={
                "findings": findings,
                "where": "\n".join(f"{where} x{n}" for where, n in sample.items()) or "nothing found",
            },
        ),
    ]


TRACE_CHECKS = [
    dg.AssetCheckSpec(name, asset="deid_traces", blocking=True, description=checks.CHECK_DESCRIPTIONS[name])
    for name in (SCHEMA, "value_ranges", NO_PERSONAL_DATA)
]
