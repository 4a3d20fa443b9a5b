"""Code location for Kubernetes: the project's definitions with every step of a run in its own Kubernetes Job."""

import dagster as dg
from dagster_k8s import k8s_job_executor

from eval_pipeline.defs.build import build_definitions

# Steps of one run that do not depend on each other (the RAG and agent lanes, the scorers of a lane) run in parallel
# pods. Inputs, warehouse and reports come from EVAL_PIPELINE_DATA / EVAL_PIPELINE_WAREHOUSE / EVAL_PIPELINE_REPORTS,
# which the run launcher's env_config_maps put into every run and step pod (deploy/kubernetes/dagster.yaml).
STEP_EXECUTOR = k8s_job_executor.configured(
    {
        "max_concurrent": 8,
        "step_k8s_config": {
            # Sized for one partition of about a million traces: scorers stream within a partition and stay
            # under 8 GB (docs/benchmarks/).
            "container_config": {"resources": {"requests": {"cpu": "1", "memory": "4Gi"}, "limits": {"memory": "8Gi"}}},
        },
    },
    name="eval_pipeline_k8s",
)

defs = dg.Definitions.merge(build_definitions(), dg.Definitions(executor=STEP_EXECUTOR))
