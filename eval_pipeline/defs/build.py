"""Assemble the definitions of every domain with resources bound from arguments or the environment."""

import dagster as dg

from eval_pipeline.defs import automation
from eval_pipeline.defs.domains import ASSET_DOMAINS, all_assets
from eval_pipeline.defs.jobs import EVALUATE_RUN_JOB, evaluate_run
from eval_pipeline.defs.progress import progress_logger
from eval_pipeline.defs.resources import (
    DeltaWarehouseIOManager,
    EvalConfig,
    JudgeConfig,
    judge_config_from_env,
)
from eval_pipeline.io.arrow_memory import choose_pool

# Every process that runs steps (in process, forked, a Celery worker, the webserver's) builds its definitions from
# here, before any step allocates: Arrow's pool is chosen once for it.
choose_pool(dg.EnvVar("ARROW_DEFAULT_MEMORY_POOL").get_value())

__all__ = ["DOMAINS", "EVALUATE_RUN_JOB", "all_assets_definitions", "build_definitions", "config_from_env"]
DOMAINS = (*ASSET_DOMAINS, automation)


def config_from_env() -> EvalConfig:
    """EvalConfig from EVAL_PIPELINE_DATA, EVAL_PIPELINE_WAREHOUSE, EVAL_PIPELINE_REPORTS, EVAL_PIPELINE_DEID_DEMO
    and the key."""
    return EvalConfig.from_environment()


def all_assets_definitions() -> dg.Definitions:
    """Every domain's definitions without resources (for resolving asset selections): the assets as fused steps,
    the sensors and schedules as the domains define them."""
    return dg.Definitions.merge(
        dg.Definitions(assets=list(all_assets())),
        *(dg.Definitions(sensors=domain.defs.sensors, schedules=domain.defs.schedules) for domain in DOMAINS),
    )


def build_definitions(
    eval_config: EvalConfig | None = None,
    judge_config: JudgeConfig | None = None,
    extra_resources: dict | None = None,
    executor: dg.ExecutorDefinition | None = None,
) -> dg.Definitions:
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
        dg.Definitions(
            jobs=[evaluate_run],
            resources=resources,
            executor=executor,
            loggers={"console": dg.colored_console_logger, "progress": progress_logger},
        ),
    )
