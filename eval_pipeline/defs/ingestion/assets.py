"""Ingestion: the run manifest, raw lines into the restricted area, validated traces, cases, corpus, tools, rejects."""

import dagster as dg
import polars as pl

from eval_pipeline.contracts import frames
from eval_pipeline.defs.privacy import ids_deidentifier
from eval_pipeline.defs.recording import materialized
from eval_pipeline.defs.resources import RESTRICTED_METADATA_KEY, EvalConfig
from eval_pipeline.defs.run_assets import manifest_of, run_table, run_tables, table_out
from eval_pipeline.deid.inputs import (
    REJECT_PATHS,
    TOOL_PATHS,
    deidentify_leaves,
    deidentify_manifest,
    manifest_refusals,
)
from eval_pipeline.io import ingest, loaders
from eval_pipeline.io.inputs import load_cases, load_corpus, load_tools
from eval_pipeline.io.labels import load_grounding_labels, load_judgments
from eval_pipeline.io.storage import InputError
from eval_pipeline.io.warehouse import FrameBatches

GROUP = "ingestion"
CODE_VERSION = "ingest-1"
RESTRICTED = {RESTRICTED_METADATA_KEY: True}

NOTHING_LOST_CHECK = "every_line_accounted_for"
ANY_VALID_TRACE_CHECK = "has_a_valid_trace"
REJECTS_SCHEMA_CHECK = "rejects_have_reasons"


def _input_error(exc: InputError) -> dg.Failure:
    return dg.Failure(description=str(exc))


@run_table(GROUP, CODE_VERSION)
def run_manifest(context: dg.AssetExecutionContext, eval_config: EvalConfig):
    """The run's manifest (run.yaml): candidate, model and every version its rows are computed under."""
    try:
        manifest = eval_config.manifest(context.partition_key)
    except InputError as exc:
        raise _input_error(exc) from exc
    row = frames.manifest_row(manifest)
    # Fields naming folders and partitions cannot take a token: a run whose manifest holds personal data there is
    # refused, naming field and kind; candidate, model and the other free text are de-identified.
    refusals = manifest_refusals(row, row.get("locale"))
    if refusals:
        raise dg.Failure(description="; ".join(refusals))
    row = deidentify_manifest(row, ids_deidentifier(eval_config, row.get("locale")))
    return materialized(pl.DataFrame([row]), versions=row)


@run_table(GROUP, CODE_VERSION, metadata=RESTRICTED, deps=[run_manifest])
def raw_traces(context: dg.AssetExecutionContext, eval_config: EvalConfig):
    """Every line of the run's trace files as written, kept only in the restricted area."""
    location, run_id = eval_config.location(), context.partition_key
    try:
        ingest.require_run(location, run_id)
    except InputError as exc:
        raise _input_error(exc) from exc
    files = loaders.trace_files(location, run_id)
    context.log.info(f"copying {len(files)} trace files of run {run_id} into the restricted area")
    return materialized(
        FrameBatches(ingest.iter_raw_lines(location, run_id), ingest.RAW_LINES_SCHEMA), headline={"files": len(files)}
    )


@run_tables(
    GROUP,
    CODE_VERSION,
    can_subset=True,
    outs={
        "cases": table_out(
            metadata=RESTRICTED,
            is_required=False,
            description="The run's golden cases (its dataset version); fixtures may hold personal data.",
        ),
        "corpus": table_out(
            metadata=RESTRICTED,
            is_required=False,
            description="The documents of the run's corpus version, as written (deid_corpus is "
            "the de-identified copy).",
        ),
        "tools": table_out(is_required=False, description="The tool registry of the run's environment version."),
        "input_rejects": table_out(is_required=False, description="Rejected lines of case, corpus and label files."),
    },
)
def run_inputs(context: dg.AssetExecutionContext, eval_config: EvalConfig, run_manifest: pl.DataFrame):
    """Load the cases, corpus, tools and labels a run is scored against; bad lines become reject rows."""
    manifest = manifest_of(run_manifest)
    location = eval_config.location()
    run_id = context.partition_key
    selected = context.selected_output_names
    try:
        cases = load_cases(location, manifest["dataset_version"])
        corpus = load_corpus(location, manifest["corpus_version"])
        tools = load_tools(location, manifest["environment_version"])
    except InputError as exc:
        raise _input_error(exc) from exc
    judgments = load_judgments(location)
    labels = load_grounding_labels(location)
    ids = ids_deidentifier(eval_config, manifest.get("locale"))
    if "cases" in selected:
        yield materialized(
            cases.frame,
            asset_key="cases",
            versions=manifest,
            preview=False,
            headline={"cases": cases.frame.height, "rejected": len(cases.rejects)},
        )
    if "corpus" in selected:
        yield materialized(
            corpus.frame,
            asset_key="corpus",
            versions=manifest,
            preview=False,
            headline={"documents": corpus.frame.height},
        )
    if "tools" in selected:
        tools, _ = deidentify_leaves(tools, TOOL_PATHS, "tools", ids)
        yield materialized(tools, asset_key="tools", versions=manifest, headline={"tools": tools.height})
    if "input_rejects" in selected:
        rows = [{**r, "run_id": run_id} for r in [*cases.rejects, *corpus.rejects, *judgments.rejects, *labels.rejects]]
        rejects, _ = deidentify_leaves(loaders.rejects_frame(rows), REJECT_PATHS, "input_rejects", ids)
        if rejects.height:
            context.log.warning(f"{rejects.height} input lines rejected (cases, corpus, labels); see input_rejects")
        yield materialized(rejects, asset_key="input_rejects", versions=manifest, headline={"rejected": rejects.height})


@run_tables(
    GROUP,
    CODE_VERSION,
    deps=[raw_traces],
    outs={
        "traces": table_out(metadata=RESTRICTED, description="Validated traces of the run, before de-identification."),
        "trace_rejects": table_out(description="Every rejected input line with file, line and reason."),
    },
    check_specs=[
        dg.AssetCheckSpec(
            NOTHING_LOST_CHECK,
            asset="traces",
            blocking=True,
            description="Every non-blank raw line is a trace or a reject row.",
        ),
        dg.AssetCheckSpec(
            ANY_VALID_TRACE_CHECK,
            asset="traces",
            blocking=True,
            description="The run holds at least one valid trace; a run whose every line was rejected "
            "is not scored (its reasons are in trace_rejects).",
        ),
        dg.AssetCheckSpec(
            REJECTS_SCHEMA_CHECK,
            asset="trace_rejects",
            blocking=True,
            description="Every reject row names its file, line and reason.",
        ),
    ],
)
def parsed_traces(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    cases: pl.DataFrame,
    input_rejects: pl.DataFrame,
):
    """Validate the run's lines (the raw_traces copy, read in file order a chunk at a time) against the trace contract
    and the run's cases; bad lines become trace_rejects rows."""
    manifest = manifest_of(run_manifest)
    run_id = context.partition_key
    revisions = ingest.case_revisions(cases)
    seen: set[str] = set()
    rejects: list[pl.DataFrame] = []
    counts = {"lines": 0, "blank": 0}

    def parsed_chunks():
        for chunk in ingest.iter_raw_lines(eval_config.location(), run_id):
            parsed = ingest.parse_traces(chunk, revisions, run_id, seen=seen)
            counts["lines"] += chunk.height
            counts["blank"] += parsed.blank_lines
            rejects.append(parsed.rejects)
            context.log.info(f"{counts['lines']} lines read, {len(seen)} traces accepted")
            yield parsed.traces

    yield materialized(
        FrameBatches(parsed_chunks(), frames.TRACES_SCHEMA), asset_key="traces", versions=manifest, preview=False
    )
    line_rejects = pl.concat(rejects) if rejects else loaders.rejects_frame([])
    # a reject row keeps no raw value: ids, file names and reasons (which quote ids) are de-identified
    line_rejects, _ = deidentify_leaves(
        line_rejects, REJECT_PATHS, "trace_rejects", ids_deidentifier(eval_config, manifest.get("locale"))
    )
    accounted, non_blank = len(seen) + line_rejects.height, counts["lines"] - counts["blank"]
    if not seen:
        context.log.error(
            f"run {run_id}: no valid trace; {line_rejects.height} lines rejected, {counts['blank']} blank "
            "lines skipped (see trace_rejects)"
        )
    context.log.info(
        f"{len(seen)} traces accepted, {line_rejects.height} trace lines rejected, "
        f"{counts['blank']} blank lines skipped"
    )
    yield dg.AssetCheckResult(
        check_name=NOTHING_LOST_CHECK,
        asset_key="traces",
        passed=non_blank == accounted,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "non_blank_lines": non_blank,
            "traces": len(seen),
            "rejects": line_rejects.height,
            "blank_lines": counts["blank"],
        },
    )
    yield dg.AssetCheckResult(
        check_name=ANY_VALID_TRACE_CHECK,
        asset_key="traces",
        passed=bool(seen),
        severity=dg.AssetCheckSeverity.ERROR,
        description=None if seen else f"no valid trace: {line_rejects.height} lines rejected, {counts['blank']} blank",
        metadata={"traces": len(seen), "rejects": line_rejects.height},
    )
    rejects_frame = pl.concat([line_rejects, input_rejects.select(line_rejects.columns)], how="vertical_relaxed")
    missing = rejects_frame.filter(
        pl.col("source_file").is_null() | pl.col("line").is_null() | pl.col("reason").is_null()
    ).height
    reasons = rejects_frame.group_by("reason").len().sort("len", descending=True).head(10)
    yield materialized(
        rejects_frame,
        asset_key="trace_rejects",
        versions=manifest,
        headline={"rejected": rejects_frame.height, "traces": len(seen), "blank_lines": counts["blank"]},
        extra={
            "top_reasons": dg.MetadataValue.md(
                "\n".join(f"- {r} ({n})" for r, n in reasons.iter_rows()) or "no rejected line"
            )
        },
        check_results=[
            dg.AssetCheckResult(
                check_name=REJECTS_SCHEMA_CHECK,
                asset_key="trace_rejects",
                passed=missing == 0,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"rows_missing_file_line_or_reason": missing},
            )
        ],
    )


defs = dg.Definitions(assets=[run_manifest, raw_traces, run_inputs, parsed_traces])
