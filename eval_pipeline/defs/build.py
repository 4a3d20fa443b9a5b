"""Assemble the definitions of every domain with resources bound from arguments or the environment."""

import os

import dagster as dg

from eval_pipeline.defs import agent, attribution, automation, deid, gates, generation, ingestion, retrieval
from eval_pipeline.defs.generation import JudgeConfig, judge_config_from_env
from eval_pipeline.defs.jobs import EVALUATE_RUN_JOB, evaluate_run
from eval_pipeline.defs.progress import progress_logger
from eval_pipeline.defs.resources import DeltaWarehouseIOManager, EvalConfig

__all__ = ["DOMAINS", "EVALUATE_RUN_JOB", "all_assets_definitions", "build_definitions", "config_from_env"]
DOMAINS = (ingestion, deid, retrieval, generation, agent, attribution, gates, automation)


def config_from_env() -> EvalConfig:
    """EvalConfig from EVAL_PIPELINE_DATA, EVAL_PIPELINE_WAREHOUSE, EVAL_PIPELINE_REPORTS and EVAL_PIPELINE_DEID_DEMO."""
    return EvalConfig(
        data_root=os.environ.get("EVAL_PIPELINE_DATA", "data"),
        warehouse_root=os.environ.get("EVAL_PIPELINE_WAREHOUSE", ""),
        reports_root=os.environ.get("EVAL_PIPELINE_REPORTS", ""),
        deid_demo=os.environ.get("EVAL_PIPELINE_DEID_DEMO", "").lower() in {"1", "true", "yes"},
    )


def all_assets_definitions() -> dg.Definitions:
    """Every domain's definitions without resources (for resolving asset selections)."""
    return dg.Definitions.merge(*(domain.defs for domain in DOMAINS))


def build_definitions(eval_config: EvalConfig | None = None, judge_config: JudgeConfig | None = None,
                      extra_resources: dict | None = None, executor: dg.ExecutorDefinition | None = None) -> dg.Definitions:
    """All definitions, with the evaluation config and judge (default: from the environment) bound, and `executor`
    as the default of every job (None: Dagster's, which `eval-pipeline run` and deploy/ override)."""
    config = eval_config or config_from_env()
    resources = {
        "eval_config": config,
        "judge": judge_config or judge_config_from_env(),
        "warehouse_io": DeltaWarehouseIOManager(warehouse_root=config.warehouse().root),
        **(extra_resources or {}),
    }
    return dg.Definitions.merge(
        all_assets_definitions(),
        dg.Definitions(jobs=[evaluate_run], resources=resources, executor=executor,
                       loggers={"console": dg.colored_console_logger, "progress": progress_logger}),
    )

