"""De-identification (docs/privacy.md): detectors, keyed pseudonyms, columnar replacement and residual scans."""

from eval_pipeline.deid.name_learning import NameCollector, case_names, collect_names, name_words, trace_names
from eval_pipeline.deid.pseudonymize import DEMO_KEY, KEY_ENV_VAR, DeidKeyError, Pseudonymizer, resolve_key
from eval_pipeline.deid.residual import independent_scan
from eval_pipeline.deid.scan import (
    FINDINGS_SCHEMA,
    leak_summary,
    scan_documents,
    scan_frame,
    scan_text,
    scanner_identity,
)
from eval_pipeline.deid.tables import REPORT_SCHEMA, Deidentifier, DeidResult, deidentify, merge_reports

__all__ = [
    "DEMO_KEY",
    "FINDINGS_SCHEMA",
    "KEY_ENV_VAR",
    "REPORT_SCHEMA",
    "DeidKeyError",
    "DeidResult",
    "Deidentifier",
    "NameCollector",
    "Pseudonymizer",
    "case_names",
    "collect_names",
    "deidentify",
    "independent_scan",
    "leak_summary",
    "merge_reports",
    "name_words",
    "resolve_key",
    "scan_documents",
    "scan_frame",
    "scan_text",
    "scanner_identity",
    "trace_names",
]
