"""Retrieval lane: frozen qrels, the judging queue, retrieval and context-assembly scores."""

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.privacy import ids_deidentifier
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import (
    AGENT_COLUMNS,
    ONLY_COLUMNS_METADATA_KEY,
    EvalConfig,
    OtherRuns,
    traces_without,
)
from eval_pipeline.defs.retrieval import earlier
from eval_pipeline.defs.reuse import replaced
from eval_pipeline.defs.run_assets import expected_traces, manifest_of, run_table
from eval_pipeline.deid.inputs import JUDGMENT_PATHS, deidentify_leaves
from eval_pipeline.io.labels import load_judgments
from eval_pipeline.quality import tables
from eval_pipeline.scoring import context as context_scoring
from eval_pipeline.scoring import qrels as qrels_scoring
from eval_pipeline.scoring import retrieval as retrieval_scoring

GROUP = "retrieval"
QRELS_CODE_VERSION = "qrels-1"
RETRIEVAL_CODE_VERSION = "retrieval-1"
CONTEXT_CODE_VERSION = "context-2"


def sibling_traces(other_runs: OtherRuns, manifest: dict, run_id: str) -> pl.DataFrame | None:
    """Retrieval hits of the other scored runs sharing this run's dataset version (the pool spans them)."""
    runs = other_runs.read("run_manifest", columns=["run_id", "dataset_version"])
    if runs is None:
        return None
    siblings = runs.filter((pl.col("dataset_version") == manifest["dataset_version"]) & (pl.col("run_id") != run_id))[
        "run_id"
    ]
    frames = [
        other_runs.read("deid_traces", run, columns=["run_id", "trace_id", "case_id", "retrieval"]) for run in siblings
    ]
    frames = [f for f in frames if f is not None and f.height]
    return pl.concat(frames, how="vertical_relaxed") if frames else None


def frozen_qrels(eval_config: EvalConfig, manifest: dict, deid_cases: pl.DataFrame) -> pl.DataFrame:
    """The run's frozen qrels: its cases' seeds and the human judgments (which always win), with `qrels_version`."""
    judgments = load_judgments(eval_config.location())
    # query and doc ids take the pseudonyms deid_cases and deid_traces hold; annotators and files are de-identified
    judged, _ = deidentify_leaves(
        judgments.frame, JUDGMENT_PATHS, "qrels", ids_deidentifier(eval_config, manifest.get("locale"))
    )
    return qrels_scoring.freeze_qrels(qrels_scoring.seed_qrels(deid_cases), judged)


def _version(frozen: pl.DataFrame) -> str:
    return frozen["qrels_version"][0] if frozen.height else qrels_scoring.qrels_version(frozen)


@run_table(GROUP, QRELS_CODE_VERSION)
def qrels(
    context: dg.AssetExecutionContext, eval_config: EvalConfig, run_manifest: pl.DataFrame, deid_cases: pl.DataFrame
):
    """Frozen relevance judgments: case seeds, human judgments (always win), model pre-grades."""
    manifest = manifest_of(run_manifest)
    frozen = frozen_qrels(eval_config, manifest, deid_cases)
    version = _version(frozen)
    context.log.info(f"qrels {version}: {frozen.height} judgments")
    return materialized(
        with_versions(frozen, manifest, QRELS_CODE_VERSION),
        versions={**manifest, "qrels_version": version},
        headline={"judgments": frozen.height},
        extra={"qrels_version": version},
    )


@run_table(
    GROUP,
    QRELS_CODE_VERSION,
    ins={
        "deid_traces": dg.AssetIn(metadata={ONLY_COLUMNS_METADATA_KEY: ["run_id", "trace_id", "case_id", "retrieval"]})
    },
)
def judging_queue(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    deid_cases: pl.DataFrame,
    deid_traces: pl.DataFrame,
):
    """Pooled (query, doc) pairs that still need a human judgment."""
    manifest = manifest_of(run_manifest)
    # The qrels are frozen here as `qrels` freezes them, not read from its table: the queue is then computed beside
    # retrieval and context scoring, which do read it (a re-score after a judgment runs the two at the same time).
    frozen = frozen_qrels(eval_config, manifest, deid_cases)
    pooled_traces = [deid_traces.select("run_id", "trace_id", "case_id", "retrieval")]
    other_runs = eval_config.other_runs(context)
    siblings = sibling_traces(other_runs, manifest, context.partition_key)
    if siblings is not None:
        pooled_traces.append(siblings)
    pooled = qrels_scoring.pool(pl.concat(pooled_traces, how="vertical_relaxed"), eval_config.settings().pool_depth)
    queue = qrels_scoring.judging_queue(pooled, frozen)
    version = _version(frozen)
    context.log.info(f"judging queue against qrels {version}: {queue.height} pooled pairs await judgment")
    return materialized(
        with_versions(queue, manifest, QRELS_CODE_VERSION),
        versions=manifest,
        headline={"pairs": queue.height},
        extra={"qrels_version": version, **other_runs.metadata()},
    )


@run_table(
    GROUP,
    RETRIEVAL_CODE_VERSION,
    check_specs=checks.specs("retrieval_scores", tables.RETRIEVAL_SCORES),
    ins={"deid_traces": traces_without(("context", "answer_text", "citations"), AGENT_COLUMNS)},
)
def retrieval_scores(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
    qrels: pl.DataFrame,
    deid_corpus: pl.DataFrame,
):
    """Ranking metrics per trace against the frozen qrels, the stage verdict and, for a failed retrieval, its \
failure class."""
    manifest = manifest_of(run_manifest)
    settings = eval_config.settings(manifest)
    other_runs = eval_config.other_runs(context, own_tables=("retrieval_scores",))
    inputs = earlier.fingerprint(
        RETRIEVAL_CODE_VERSION,
        settings,
        context.partition_key,
        {"deid_traces": deid_traces, "deid_cases": deid_cases, "deid_corpus": deid_corpus},
    )
    before = earlier.earlier_scores(context, other_runs, inputs)
    if before is None:
        scores = retrieval_scoring.score_retrieval(deid_traces, deid_cases, qrels, deid_corpus, settings)
    else:
        changed = retrieval_scoring.changed_cases(before.qrels, qrels).n_unique()
        context.log.info(f"retrieval scores kept but for the traces of the {changed} cases whose qrels changed")
        scores = retrieval_scoring.rescore_retrieval(
            before.scores, deid_traces, deid_cases, qrels, before.qrels, deid_corpus, settings
        )
    scores = with_versions(scores, manifest, RETRIEVAL_CODE_VERSION)
    scored = scores.filter(pl.col("status") == "scored")
    result = materialized(
        scores,
        versions=manifest,
        headline={f"mean_{m}": scored[m].drop_nulls().mean() for m in ("recall_at_10", "mrr", "ndcg_at_10")}
        | {"failed": scores.filter(pl.col("retrieval_stage") == "fail").height},
        check_results=checks.results(
            "retrieval_scores", tables.RETRIEVAL_SCORES, scores, expected_traces(deid_traces, deid_cases, "rag")
        ),
    )
    # the data version is the rows' content hash: what the next re-score checks the stored rows against
    scored_from = earlier.record(inputs, qrels, other_runs, scores.columns, result.data_version.value)
    return replaced(result, metadata={**result.metadata, **scored_from})


@run_table(
    GROUP,
    CONTEXT_CODE_VERSION,
    check_specs=checks.specs("context_scores", tables.CONTEXT_SCORES),
    ins={"deid_traces": traces_without(("answer_text", "citations", "input"), AGENT_COLUMNS)},
)
def context_scores(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
    qrels: pl.DataFrame,
    retrieval_scores: pl.DataFrame,
    deid_corpus: pl.DataFrame,
):
    """Whether the relevant documents that were retrieved reached the model's context, and how many families it \
spans."""
    manifest = manifest_of(run_manifest)
    scores = context_scoring.score_context(
        deid_traces, deid_cases, qrels, retrieval_scores, eval_config.settings(manifest), corpus=deid_corpus
    )
    scores = with_versions(scores, manifest, CONTEXT_CODE_VERSION)
    return materialized(
        scores,
        versions=manifest,
        headline={
            "mean_context_recall": scores["context_recall"].drop_nulls().mean(),
            "failed": scores.filter(pl.col("context_assembly_stage") == "fail").height,
        },
        check_results=checks.results(
            "context_scores", tables.CONTEXT_SCORES, scores, expected_traces(deid_traces, deid_cases, "rag")
        ),
    )


defs = dg.Definitions(assets=[qrels, judging_queue, retrieval_scores, context_scores])
