"""Generation lane: claims judged against context, grounding, citations, answers, judge calibration, review queue."""

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.privacy import ids_deidentifier
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import (
    AGENT_COLUMNS,
    RETRIEVAL_COLUMNS,
    EvalConfig,
    JudgeConfig,
    OtherRuns,
    make_run_judge,
    traces_without,
)
from eval_pipeline.defs.run_assets import expected_traces, manifest_of, run_table, run_tables, table_out
from eval_pipeline.deid.inputs import LABEL_PATHS, deidentify_leaves
from eval_pipeline.io.labels import load_grounding_labels
from eval_pipeline.judge.reuse import FAMILY_VERDICT_STORE, VERDICT_STORE, ReusingJudge
from eval_pipeline.quality import tables
from eval_pipeline.scoring import answer as answer_scoring
from eval_pipeline.scoring import calibration as calibration_scoring
from eval_pipeline.scoring import citations as citation_scoring
from eval_pipeline.scoring import grounding as grounding_scoring
from eval_pipeline.scoring.claims import claim_key, grounding_requests

GROUP = "generation"
CLAIMS_CODE_VERSION = "claims-4"
GROUNDING_CODE_VERSION = "grounding-3"
ANSWER_CODE_VERSION = "answer-1"
CALIBRATION_CODE_VERSION = "calibration-3"


@run_tables(
    GROUP,
    CLAIMS_CODE_VERSION,
    outs={
        "claims": table_out(
            description="Factual claims of each answer with the judge's verdict, the evidence quote and citations."
        ),
        "citation_scores": table_out(description="Citation precision, recall, resolution and quotes found, per trace."),
        VERDICT_STORE: table_out(
            is_required=False,
            description="Every completed verdict the run's claims rest on, by judge version and "
            "digest of (claim, evidence): later runs reuse them instead of judging again.",
        ),
        FAMILY_VERDICT_STORE: table_out(
            is_required=False,
            description="Every completed verdict of a claim against one document family's "
            "context chunks (supporting_families), reused like judge_verdicts.",
        ),
    },
    check_specs=[
        *checks.specs("claims", tables.CLAIMS),
        *checks.specs("citation_scores", tables.CITATION_SCORES),
        *checks.specs(VERDICT_STORE, tables.JUDGE_VERDICTS),
        *checks.specs(FAMILY_VERDICT_STORE, tables.JUDGE_VERDICTS),
    ],
    ins={"deid_traces": traces_without(RETRIEVAL_COLUMNS, AGENT_COLUMNS)},
    can_subset=True,
)
def judged_claims(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    judge: JudgeConfig,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
    deid_corpus: pl.DataFrame,
):
    """Split answers into claims, judge each against the context the answer was given, and check its citations."""
    manifest = manifest_of(run_manifest)
    settings = eval_config.settings(manifest)
    earlier = eval_config.other_runs(context, own_tables=(VERDICT_STORE, FAMILY_VERDICT_STORE))
    inner_judge = make_run_judge(judge, eval_config)
    judge_backend = ReusingJudge(inner_judge, earlier.scan(VERDICT_STORE) if judge.reuse_verdicts else None)
    # Support per document family is asked of the same judge through its own store and counters: the claim verdicts'
    # judge_calls stay what they were, and a family text equal to an earlier whole context reuses that verdict.
    known = [earlier.scan(name) for name in (FAMILY_VERDICT_STORE, VERDICT_STORE)] if judge.reuse_verdicts else []
    known = [scan for scan in known if scan is not None]
    family_backend = ReusingJudge(inner_judge, pl.concat(known, how="diagonal_relaxed") if known else None)
    claims, citations = citation_scoring.claims_and_citations(
        deid_traces, deid_corpus, deid_cases, judge_backend, settings, family_judge=family_backend
    )
    claims = with_versions(claims, manifest, CLAIMS_CODE_VERSION)
    citations = with_versions(citations, manifest, CLAIMS_CODE_VERSION)
    verdicts = claims.group_by("verdict").len().sort("verdict", nulls_last=True)
    context.log.info("claim verdicts: " + ", ".join(f"{v}={n}" for v, n in verdicts.iter_rows()))
    context.log.info(
        f"judge {judge_backend.version}: {judge_backend.judged} judged, {judge_backend.reused} reused from earlier "
        f"runs; support per family: {family_backend.judged} judged, {family_backend.reused} reused"
    )
    selected = context.selected_output_names
    if "claims" in selected:
        yield materialized(
            claims,
            asset_key="claims",
            versions={**manifest, "judge_version": judge_backend.version},
            headline={
                "claims": claims.height,
                "incomplete": claims.filter(pl.col("status") == "incomplete").height,
                "judge_calls": judge_backend.judged,
                "judge_reused": judge_backend.reused,
                # what this run spent; the rows keep each verdict's cost as recorded when it was made
                "judge_cost_usd": judge_backend.cost_usd,
                "family_judge_cost_usd": family_backend.cost_usd,
                "family_judge_calls": family_backend.judged,
                "family_judge_reused": family_backend.reused,
                "triangulated_claims": int(claims["triangulated"].fill_null(False).sum()),
            },
            check_results=checks.results("claims", tables.CLAIMS, claims),
            extra=earlier.metadata(),
        )
    if "citation_scores" in selected:
        yield materialized(
            citations,
            asset_key="citation_scores",
            versions=manifest,
            headline={"mean_citation_precision": citations["citation_precision"].drop_nulls().mean()},
            check_results=checks.results(
                "citation_scores", tables.CITATION_SCORES, citations, expected_traces(deid_traces, deid_cases, "rag")
            ),
        )
    for store, backend in ((VERDICT_STORE, judge_backend), (FAMILY_VERDICT_STORE, family_backend)):
        if judge.reuse_verdicts and store not in selected and backend.fresh.height:
            context.log.warning(
                f"{backend.fresh.height} verdict(s) judged here are not stored: {store} was "
                "not selected with claims, so a later run judges them again"
            )
    if judge.reuse_verdicts and VERDICT_STORE in selected:
        verdicts_used = judge_backend.used().with_columns(run_id=pl.lit(context.partition_key))
        yield materialized(
            verdicts_used,
            asset_key=VERDICT_STORE,
            versions={"judge_version": judge_backend.version},
            headline={"verdicts": verdicts_used.height, "judged_here": judge_backend.fresh.height},
            check_results=checks.results(VERDICT_STORE, tables.JUDGE_VERDICTS, verdicts_used),
        )
    if judge.reuse_verdicts and FAMILY_VERDICT_STORE in selected:
        family_used = family_backend.used().with_columns(run_id=pl.lit(context.partition_key))
        yield materialized(
            family_used,
            asset_key=FAMILY_VERDICT_STORE,
            versions={"judge_version": family_backend.version},
            headline={"verdicts": family_used.height, "judged_here": family_backend.fresh.height},
            check_results=checks.results(FAMILY_VERDICT_STORE, tables.JUDGE_VERDICTS, family_used),
        )


@run_table(
    GROUP,
    GROUNDING_CODE_VERSION,
    check_specs=checks.specs("grounding_scores", tables.GROUNDING_SCORES),
    ins={"deid_traces": traces_without(("citations", "input"), RETRIEVAL_COLUMNS, AGENT_COLUMNS)},
)
def grounding_scores(
    eval_config: EvalConfig,
    judge: JudgeConfig,
    run_manifest: pl.DataFrame,
    deid_traces: pl.DataFrame,
    deid_cases: pl.DataFrame,
    claims: pl.DataFrame,
):
    """Supported claims over claims, per trace; every claim supported (by default) passes the grounding stage."""
    manifest = manifest_of(run_manifest)
    # The claims carry the judge's version; only a run without claims builds the judge to learn it.
    versions = claims["judge_version"].drop_nulls().unique().to_list()
    judge_version = versions[0] if len(versions) == 1 else make_run_judge(judge, eval_config).version
    scores = grounding_scoring.score_grounding(
        claims, deid_traces, deid_cases, eval_config.settings(manifest), judge_version=judge_version
    )
    scores = with_versions(scores, manifest, GROUNDING_CODE_VERSION)
    return materialized(
        scores,
        versions=manifest,
        headline={
            "mean_grounding_rate": scores["grounding_rate"].drop_nulls().mean(),
            "failed": scores.filter(pl.col("grounding_stage") == "fail").height,
        },
        check_results=checks.results(
            "grounding_scores", tables.GROUNDING_SCORES, scores, expected_traces(deid_traces, deid_cases, "rag")
        ),
    )


@run_table(
    GROUP,
    ANSWER_CODE_VERSION,
    check_specs=checks.specs("answer_scores", tables.ANSWER_SCORES),
    ins={"deid_traces": traces_without(("context", "citations"), RETRIEVAL_COLUMNS, AGENT_COLUMNS)},
)
def answer_scores(
    eval_config: EvalConfig, run_manifest: pl.DataFrame, deid_traces: pl.DataFrame, deid_cases: pl.DataFrame
):
    """contains_all, exact match, token F1 and refusal detection both ways, per trace."""
    manifest = manifest_of(run_manifest)
    scores = answer_scoring.score_answers(deid_traces, deid_cases, eval_config.settings(manifest))
    scores = with_versions(scores, manifest, ANSWER_CODE_VERSION)
    return materialized(
        scores,
        versions=manifest,
        headline={
            "contains_all_rate": scores["contains_all"].drop_nulls().cast(pl.Float64).mean(),
            "failed": scores.filter(pl.col("answer_stage") == "fail").height,
        },
        check_results=checks.results(
            "answer_scores", tables.ANSWER_SCORES, scores, expected_traces(deid_traces, deid_cases, "rag")
        ),
    )


def labelled_claims(
    other_runs: OtherRuns, run_id: str, claims: pl.DataFrame, grounding_scores: pl.DataFrame, labels: pl.DataFrame
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """This run's judged claims plus those of other scored runs whose traces carry human labels, by the same judge."""
    versions = claims["judge_version"].unique().to_list()
    labelled = labels.select("trace_id").unique()
    claim_parts, score_parts = [claims], [grounding_scores]
    missing = labelled.join(claims.select("trace_id"), on="trace_id", how="anti")
    if missing.height and other_runs.exists("claims"):
        for other in other_runs.runs("claims"):
            if other == run_id:
                continue
            other_claims = other_runs.read("claims", other)
            other_claims = other_claims.join(missing, on="trace_id", how="semi").filter(
                pl.col("judge_version").is_in(versions)
            )
            if other_claims.height:
                claim_parts.append(other_claims.select(claims.columns))
            # a labelled answer that states no claim has grounding scores and no claim rows: it is still an answer label
            other_scores = other_runs.read("grounding_scores", other)
            if other_scores is not None:
                other_scores = other_scores.join(missing, on="trace_id", how="semi")
                if "judge_version" in other_scores.columns:
                    other_scores = other_scores.filter(pl.col("judge_version").is_in(versions))
                score_parts.append(other_scores.select(grounding_scores.columns))
    return pl.concat(claim_parts, how="vertical_relaxed"), pl.concat(score_parts, how="vertical_relaxed")


@run_table(
    GROUP,
    CALIBRATION_CODE_VERSION,
    ins={"deid_traces": traces_without(("citations", "input"), RETRIEVAL_COLUMNS, AGENT_COLUMNS)},
)
def judge_calibration(
    context: dg.AssetExecutionContext,
    eval_config: EvalConfig,
    judge: JudgeConfig,
    run_manifest: pl.DataFrame,
    claims: pl.DataFrame,
    grounding_scores: pl.DataFrame,
    deid_traces: pl.DataFrame,
):
    """Agreement of the judge with human grounding labels (κ with a bootstrap interval), its self-consistency; \
may it gate?"""
    manifest = manifest_of(run_manifest)
    # trace ids take the pseudonyms deid_traces holds (and claim texts lose their personal data), so labels still join
    labels, _ = deidentify_leaves(
        load_grounding_labels(eval_config.location()).frame,
        LABEL_PATHS,
        "labels",
        ids_deidentifier(eval_config, manifest.get("locale")),
    )
    other_runs = eval_config.other_runs(context)
    judged, scores = labelled_claims(other_runs, context.partition_key, claims, grounding_scores, labels)
    calibration = calibration_scoring.calibrate(judged, labels, eval_config.settings(manifest), grounding_scores=scores)
    run_judge = make_run_judge(judge, eval_config)
    keyed = claims.with_columns(request_key=claim_key("run_id", "trace_id", "claim_index"))
    consistency = calibration_scoring.self_consistency(
        run_judge, keyed, grounding_requests(claims, deid_traces), sample=judge.self_consistency_sample, seed=judge.seed
    )
    calibration = calibration_scoring.with_self_consistency(calibration, run_judge.version, consistency)
    calibration = with_versions(calibration, manifest, CALIBRATION_CODE_VERSION)
    claim_level = calibration.filter(pl.col("level") == "claim")
    if claim_level.height:
        row = claim_level.row(0, named=True)
        context.log.info(
            f"judge {row['judge_version']}: n={row['n']} kappa={row['cohen_kappa']} may_gate={row['may_gate']}; "
            f"self-consistency: {consistency['self_consistency_note']}"
        )
    return materialized(
        calibration,
        versions=manifest,
        headline={
            "cohen_kappa": claim_level["cohen_kappa"][0] if claim_level.height else None,
            "n": claim_level["n"][0] if claim_level.height else 0,
            "self_consistency_flip_rate": consistency["self_consistency_flip_rate"],
        },
        extra=other_runs.metadata(),
    )


@run_table(GROUP, CALIBRATION_CODE_VERSION)
def review_queue(
    run_manifest: pl.DataFrame, grounding_scores: pl.DataFrame, claims: pl.DataFrame, judge_calibration: pl.DataFrame
):
    """Items needing a human: grounding failures while the judge may not gate."""
    manifest = manifest_of(run_manifest)
    queue = with_versions(
        calibration_scoring.review_queue(grounding_scores, claims, judge_calibration),
        manifest,
        CALIBRATION_CODE_VERSION,
    )
    return materialized(queue, versions=manifest, headline={"items": queue.height})


defs = dg.Definitions(assets=[judged_claims, grounding_scores, answer_scores, judge_calibration, review_queue])
