"""Generation lane: claims judged against the context, grounding, citations, answers, judge calibration, review queue."""

import dagster as dg
import polars as pl

from eval_pipeline.defs import checks
from eval_pipeline.defs.ingestion import manifest_of
from eval_pipeline.defs.partitions import runs_partitions
from eval_pipeline.defs.recording import materialized, with_versions
from eval_pipeline.defs.resources import (
    AGENT_COLUMNS,
    RETRIEVAL_COLUMNS,
    EvalConfig,
    traces_without,
)
from eval_pipeline.defs.retrieval import expected_traces
from eval_pipeline.io import loaders
from eval_pipeline.judge import judge_options_from_env, make_judge
from eval_pipeline.judge.profile import JudgeProfile
from eval_pipeline.judge.reuse import ReusingJudge
from eval_pipeline.quality import tables
from eval_pipeline.scoring import answer as answer_scoring
from eval_pipeline.scoring import calibration as calibration_scoring
from eval_pipeline.scoring import citations as citation_scoring
from eval_pipeline.scoring import grounding as grounding_scoring
from eval_pipeline.scoring.claims import claim_key, grounding_requests

GROUP = "generation"
CLAIMS_CODE_VERSION = "claims-3"
GROUNDING_CODE_VERSION = "grounding-2"
ANSWER_CODE_VERSION = "answer-1"
CALIBRATION_CODE_VERSION = "calibration-3"
VERDICT_STORE = "judge_verdicts"


class JudgeConfig(dg.ConfigurableResource):
    """Which judge grades claims: the offline local judge (default), an NLI model in a local folder, or any
    OpenAI-compatible server; `profile` overrides the gate policy's judge profile."""

    backend: str = "local"
    profile: str = ""
    model_dir: str = ""
    model: str = ""
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    prompt_version: str = ""
    concurrency: int = 8
    max_retries: int = 4
    timeout_s: float = 60.0
    cache_path: str = ""
    price_input_per_1k: float = 0.0
    price_output_per_1k: float = 0.0
    seed: int = 0
    batch: bool = False
    reuse_verdicts: bool = True
    self_consistency_sample: int = 50

    def make(self, data_root: str = "data", policy_profile: JudgeProfile | None = None):
        """The judge; the OpenAI backend caches verdicts under DATA/.judge_cache unless cache_path says otherwise."""
        profile = self.profile or policy_profile
        if self.backend == "local":
            return make_judge("local", profile=profile)
        if self.backend == "model":
            return make_judge("model", profile=profile, model_dir=self.model_dir)
        skip = ("backend", "reuse_verdicts", "profile", "model_dir", "self_consistency_sample")
        options = {k: v for k, v in self.model_dump().items() if k not in skip and v not in ("", None)}
        options.setdefault("cache_path", f"{data_root.rstrip('/')}/.judge_cache/verdicts.sqlite")
        return make_judge(self.backend, **options)


def judge_config_from_env() -> JudgeConfig:
    """JudgeConfig from the EVAL_PIPELINE_JUDGE_* variables (backend, profile, model folder, model, base URL, cache)."""
    backend, profile, options = judge_options_from_env()
    fields = {k: v for k, v in options.items() if k in JudgeConfig.model_fields and v is not None}
    return JudgeConfig(backend=backend, profile=profile or "", **fields)


def make_run_judge(judge: JudgeConfig, eval_config: EvalConfig):
    """The judge of a run: the resource's backend with the profile it or the gate policy names."""
    return judge.make(eval_config.data_root, eval_config.judge_profile())


@dg.multi_asset(
    partitions_def=runs_partitions,
    group_name=GROUP,
    code_version=CLAIMS_CODE_VERSION,
    outs={
        "claims": dg.AssetOut(io_manager_key="warehouse_io",
                              description="Factual claims of each answer with the judge's verdict, the evidence quote and citations."),
        "citation_scores": dg.AssetOut(io_manager_key="warehouse_io",
                                       description="Citation precision, recall, resolution and quotes found, per trace."),
    },
    check_specs=[*checks.specs("claims", tables.CLAIMS), *checks.specs("citation_scores", tables.CITATION_SCORES)],
    ins={"deid_traces": traces_without(RETRIEVAL_COLUMNS, AGENT_COLUMNS)},
)
def judged_claims(context: dg.AssetExecutionContext, eval_config: EvalConfig, judge: JudgeConfig,
                  run_manifest: pl.DataFrame, deid_traces: pl.DataFrame, deid_cases: pl.DataFrame, deid_corpus: pl.DataFrame):
    """Split answers into claims, judge each against the context the answer was given, and check its citations."""
    manifest = manifest_of(run_manifest)
    settings = eval_config.settings(manifest)
    warehouse = eval_config.warehouse()
    judge_backend = ReusingJudge(make_run_judge(judge, eval_config),
                                 warehouse.scan(VERDICT_STORE) if judge.reuse_verdicts else None)
    claims, citations = citation_scoring.claims_and_citations(deid_traces, deid_corpus, deid_cases, judge_backend, settings)
    claims = with_versions(claims, manifest, CLAIMS_CODE_VERSION)
    citations = with_versions(citations, manifest, CLAIMS_CODE_VERSION)
    if judge.reuse_verdicts:
        # By digest: the store's rows are then the same in every run over the same inputs.
        fresh = judge_backend.fresh.sort("judge_version", "hash_scheme", "digest_a", "digest_b", maintain_order=True)
        warehouse.append(VERDICT_STORE, fresh.with_columns(run_id=pl.lit(context.partition_key)))
    verdicts = claims.group_by("verdict").len().sort("verdict", nulls_last=True)
    context.log.info("claim verdicts: " + ", ".join(f"{v}={n}" for v, n in verdicts.iter_rows()))
    context.log.info(f"judge {judge_backend.version}: {judge_backend.judged} judged, {judge_backend.reused} reused from earlier runs")
    yield materialized(claims, asset_key="claims", versions={**manifest, "judge_version": judge_backend.version},
                       headline={"claims": claims.height, "incomplete": claims.filter(pl.col("status") == "incomplete").height,
                                 "judge_calls": judge_backend.judged, "judge_reused": judge_backend.reused},
                       check_results=checks.results("claims", tables.CLAIMS, claims))
    yield materialized(citations, asset_key="citation_scores", versions=manifest,
                       headline={"mean_citation_precision": citations["citation_precision"].drop_nulls().mean()},
                       check_results=checks.results("citation_scores", tables.CITATION_SCORES, citations,
                                                    expected_traces(deid_traces, deid_cases, "rag")))


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=GROUNDING_CODE_VERSION, io_manager_key="warehouse_io",
          check_specs=checks.specs("grounding_scores", tables.GROUNDING_SCORES), kinds={"polars", "deltalake"},
          # context is read only to tell a trace that logged none (grounding incomplete, SPEC §11) from one that did
          ins={"deid_traces": traces_without(("citations", "input"), RETRIEVAL_COLUMNS, AGENT_COLUMNS)})
def grounding_scores(eval_config: EvalConfig, judge: JudgeConfig, run_manifest: pl.DataFrame, deid_traces: pl.DataFrame,
                     deid_cases: pl.DataFrame, claims: pl.DataFrame):
    """Supported claims over claims, per trace; every claim supported (by default) passes the grounding stage."""
    manifest = manifest_of(run_manifest)
    # The claims carry the judge's version; only a run without claims builds the judge to learn it.
    versions = claims["judge_version"].drop_nulls().unique().to_list()
    judge_version = versions[0] if len(versions) == 1 else make_run_judge(judge, eval_config).version
    scores = grounding_scoring.score_grounding(claims, deid_traces, deid_cases, eval_config.settings(manifest),
                                               judge_version=judge_version)
    scores = with_versions(scores, manifest, GROUNDING_CODE_VERSION)
    return materialized(scores, versions=manifest,
                        headline={"mean_grounding_rate": scores["grounding_rate"].drop_nulls().mean(),
                                  "failed": scores.filter(pl.col("grounding_stage") == "fail").height},
                        check_results=checks.results("grounding_scores", tables.GROUNDING_SCORES, scores,
                                                     expected_traces(deid_traces, deid_cases, "rag")))


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=ANSWER_CODE_VERSION, io_manager_key="warehouse_io",
          check_specs=checks.specs("answer_scores", tables.ANSWER_SCORES), kinds={"polars", "deltalake"},
          ins={"deid_traces": traces_without(("context", "citations"), RETRIEVAL_COLUMNS, AGENT_COLUMNS)})
def answer_scores(eval_config: EvalConfig, run_manifest: pl.DataFrame, deid_traces: pl.DataFrame,
                  deid_cases: pl.DataFrame):
    """contains_all, exact match, token F1 and refusal detection both ways, per trace."""
    manifest = manifest_of(run_manifest)
    scores = answer_scoring.score_answers(deid_traces, deid_cases, eval_config.settings(manifest))
    scores = with_versions(scores, manifest, ANSWER_CODE_VERSION)
    return materialized(scores, versions=manifest,
                        headline={"contains_all_rate": scores["contains_all"].drop_nulls().cast(pl.Float64).mean(),
                                  "failed": scores.filter(pl.col("answer_stage") == "fail").height},
                        check_results=checks.results("answer_scores", tables.ANSWER_SCORES, scores,
                                                     expected_traces(deid_traces, deid_cases, "rag")))


def labelled_claims(eval_config: EvalConfig, run_id: str, claims: pl.DataFrame, grounding_scores: pl.DataFrame,
                    labels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """This run's judged claims plus those of other scored runs whose traces carry human labels, by the same judge."""
    versions = claims["judge_version"].unique().to_list()
    labelled = labels.select("trace_id").unique()
    claim_parts, score_parts = [claims], [grounding_scores]
    missing = labelled.join(claims.select("trace_id"), on="trace_id", how="anti")
    warehouse = eval_config.warehouse()
    if missing.height and warehouse.exists("claims"):
        for other in warehouse.runs("claims"):
            if other == run_id:
                continue
            other_claims = warehouse.read("claims", other)
            other_claims = other_claims.join(missing, on="trace_id", how="semi").filter(pl.col("judge_version").is_in(versions))
            if other_claims.height:
                claim_parts.append(other_claims.select(claims.columns))
            # a labelled answer that states no claim has grounding scores and no claim rows: it is still an answer label
            other_scores = warehouse.read("grounding_scores", other)
            if other_scores is not None:
                other_scores = other_scores.join(missing, on="trace_id", how="semi")
                if "judge_version" in other_scores.columns:
                    other_scores = other_scores.filter(pl.col("judge_version").is_in(versions))
                score_parts.append(other_scores.select(grounding_scores.columns))
    return pl.concat(claim_parts, how="vertical_relaxed"), pl.concat(score_parts, how="vertical_relaxed")


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=CALIBRATION_CODE_VERSION, io_manager_key="warehouse_io",
          kinds={"polars", "deltalake"},
          ins={"deid_traces": traces_without(("citations", "input"), RETRIEVAL_COLUMNS, AGENT_COLUMNS)})
def judge_calibration(context: dg.AssetExecutionContext, eval_config: EvalConfig, judge: JudgeConfig, run_manifest: pl.DataFrame,
                      claims: pl.DataFrame, grounding_scores: pl.DataFrame, deid_traces: pl.DataFrame):
    """Agreement of the judge with human grounding labels (κ with a bootstrap interval), its self-consistency; may it gate?"""
    manifest = manifest_of(run_manifest)
    labels = loaders.load_grounding_labels(eval_config.location()).frame
    judged, scores = labelled_claims(eval_config, context.partition_key, claims, grounding_scores, labels)
    calibration = calibration_scoring.calibrate(judged, labels, eval_config.settings(manifest), grounding_scores=scores)
    run_judge = make_run_judge(judge, eval_config)
    keyed = claims.with_columns(request_key=claim_key("run_id", "trace_id", "claim_index"))
    consistency = calibration_scoring.self_consistency(run_judge, keyed, grounding_requests(claims, deid_traces),
                                                       sample=judge.self_consistency_sample, seed=judge.seed)
    calibration = calibration_scoring.with_self_consistency(calibration, run_judge.version, consistency)
    calibration = with_versions(calibration, manifest, CALIBRATION_CODE_VERSION)
    claim_level = calibration.filter(pl.col("level") == "claim")
    if claim_level.height:
        row = claim_level.row(0, named=True)
        context.log.info(f"judge {row['judge_version']}: n={row['n']} kappa={row['cohen_kappa']} may_gate={row['may_gate']}; "
                         f"self-consistency: {consistency['self_consistency_note']}")
    return materialized(calibration, versions=manifest,
                        headline={"cohen_kappa": claim_level["cohen_kappa"][0] if claim_level.height else None,
                                  "n": claim_level["n"][0] if claim_level.height else 0,
                                  "self_consistency_flip_rate": consistency["self_consistency_flip_rate"]})


@dg.asset(partitions_def=runs_partitions, group_name=GROUP, code_version=CALIBRATION_CODE_VERSION, io_manager_key="warehouse_io",
          kinds={"polars", "deltalake"})
def review_queue(run_manifest: pl.DataFrame, grounding_scores: pl.DataFrame, claims: pl.DataFrame,
                 judge_calibration: pl.DataFrame):
    """Items needing a human: grounding failures while the judge may not gate."""
    manifest = manifest_of(run_manifest)
    queue = with_versions(calibration_scoring.review_queue(grounding_scores, claims, judge_calibration), manifest,
                          CALIBRATION_CODE_VERSION)
    return materialized(queue, versions=manifest, headline={"items": queue.height})


defs = dg.Definitions(assets=[judged_claims, grounding_scores, answer_scores, judge_calibration, review_queue])
