"""De-identification: every scorer and the judge read only these assets; raw data stays in the restricted area."""

from concurrent.futures import ThreadPoolExecutor

import dagster as dg
import polars as pl

from eval_pipeline.contracts import frames
from eval_pipeline.defs import checks
from eval_pipeline.defs.deid.checks import DEID_CASES_CONTRACT, DEID_TRACES_CONTRACT, TRACE_CHECKS, batch_checks
from eval_pipeline.defs.privacy import run_key
from eval_pipeline.defs.recording import materialized
from eval_pipeline.defs.resources import EvalConfig, in_batches
from eval_pipeline.defs.run_assets import manifest_of, run_tables, table_out
from eval_pipeline.deid import Deidentifier, NameCollector, leak_summary, merge_reports, name_words, scan_frame
from eval_pipeline.deid.inputs import CASE_ID_PATHS, CORPUS_ID_PATHS, TRACE_ID_PATHS, deidentify_leaves, id_deidentifier
from eval_pipeline.deid.residual import CandidateMemo
from eval_pipeline.io.warehouse import FrameBatches, TableBatches

GROUP = "deidentification"
CODE_VERSION = "deid-2"
NAME_COLUMNS = ("steps", "final_state_json")


@run_tables(
    GROUP,
    CODE_VERSION,
    can_subset=True,
    ins={"traces": in_batches("traces")},
    outs={
        "deid_traces": table_out(
            is_required=False, description="Traces with personal data replaced by keyed pseudonyms."
        ),
        "deid_cases": table_out(
            is_required=False, description="Cases (fixtures, reference calls) with the same pseudonyms."
        ),
        "deid_corpus": table_out(is_required=False, description="Corpus text with the same pseudonyms."),
        "deid_report": table_out(is_required=False, description="Replacements counted by table, field and type."),
    },
    check_specs=[*TRACE_CHECKS, *checks.specs("deid_cases", DEID_CASES_CONTRACT)],
)
def deidentified(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    traces: TableBatches,
    cases: pl.DataFrame,
    corpus: pl.DataFrame,
):
    """Replace personal data everywhere with HMAC pseudonyms so equal values stay equal (joins and tool \
arguments survive).

    Traces are read and written a batch at a time; the names of people are gathered from every batch first, so the
    same name becomes the same token in every batch."""
    manifest = manifest_of(run_manifest)
    key = run_key(eval_config)
    collector = NameCollector()
    collector.add_cases(cases)
    for batch in traces.select(*NAME_COLUMNS):
        collector.add_traces(batch)
    locale = manifest.get("locale")
    name_keys = collector.name_keys()
    deid = Deidentifier(key, name_words(collector.names()), locale=locale)
    # Ids (trace, case and doc ids, tool names, variants, families) take the name-free pseudonyms that ingestion and
    # the qrels use too, so every join holds across tables (see deid.inputs).
    id_deid = id_deidentifier(key, locale)
    selected = context.selected_output_names
    reports: list[pl.DataFrame] = []
    tally = {"findings": 0, "rows": 0, "duplicates": 0}
    sample: dict[str, int] = {}
    # The trace ids of the batches so far in one column: a quarter of the memory a Python set of them takes.
    seen = [pl.Series(dtype=pl.String)]
    missing_columns: set[str] = set()
    # What the independent scan of the union passes read in a batch, looked up by the blocking check of its output.
    memo = CandidateMemo()

    def inputs() -> tuple[pl.DataFrame, pl.DataFrame, list[pl.DataFrame]]:
        deid_cases, cases_report = deid.cases(cases)
        deid_cases, case_ids_report = deidentify_leaves(deid_cases, CASE_ID_PATHS, "cases", id_deid)
        deid_corpus, corpus_report = deid.corpus(corpus)
        deid_corpus, corpus_ids_report = deidentify_leaves(deid_corpus, CORPUS_ID_PATHS, "corpus", id_deid)
        return deid_cases, deid_corpus, [cases_report, case_ids_report, corpus_report, corpus_ids_report]

    # The cases and corpus are de-identified on a thread of their own while the traces stream: the stream's batches
    # are computed on the writer's producer thread and this one would only wait. Every token depends on the key and
    # the value alone, so what each computes is what it computes alone.
    pending = ThreadPoolExecutor(1, thread_name_prefix="deid-inputs")
    inputs_done = pending.submit(inputs)
    pending.shutdown(wait=False)

    def deid_batches():
        for batch in traces:
            out, report = deid.traces(batch.select(list(frames.TRACES_SCHEMA)), memo)
            out, id_report = deidentify_leaves(out, TRACE_ID_PATHS, "traces", id_deid, memo)
            reports.extend([report, id_report])
            # The blocking check: both scans (the replacement's detectors and the independent one) over the output.
            findings = scan_frame(out, "deid_traces", name_keys=name_keys, locale=locale, memo=memo)
            memo.clear()
            tally["findings"] += findings.height
            for where, n in leak_summary(findings).items():
                sample[where] = sample.get(where, 0) + n
            missing_columns.update(c for c in DEID_TRACES_CONTRACT.columns if c not in out.columns)
            ids = out["trace_id"].unique()
            tally["duplicates"] += out.height - ids.len() + int(ids.is_in(seen[0].implode(), nulls_equal=True).sum())
            seen[0] = pl.concat([seen[0], ids])
            tally["rows"] += out.height
            yield out

    if "deid_traces" in selected:
        yield materialized(
            FrameBatches(deid_batches(), frames.TRACES_SCHEMA), asset_key="deid_traces", versions=manifest
        )
        yield from batch_checks(tally["findings"], sample, tally["duplicates"], tally["rows"], sorted(missing_columns))
    elif "deid_report" in selected:
        for _ in deid_batches():
            pass
    deid_cases, deid_corpus, input_reports = inputs_done.result()
    report = merge_reports([*reports, *input_reports])
    by_type = report.group_by("entity_type").agg(pl.col("replacements").sum()).sort("entity_type")
    context.log.info("replacements by type: " + ", ".join(f"{t}={n}" for t, n in by_type.iter_rows()))
    if "deid_cases" in selected:
        yield materialized(
            deid_cases,
            asset_key="deid_cases",
            versions=manifest,
            headline={"cases": deid_cases.height},
            check_results=checks.results("deid_cases", DEID_CASES_CONTRACT, deid_cases),
        )
    if "deid_corpus" in selected:
        yield materialized(
            deid_corpus, asset_key="deid_corpus", versions=manifest, headline={"documents": deid_corpus.height}
        )
    if "deid_report" in selected:
        yield materialized(
            report,
            asset_key="deid_report",
            versions=manifest,
            headline={"replacements": int(report["replacements"].sum()) if report.height else 0},
        )


defs = dg.Definitions(assets=[deidentified])
