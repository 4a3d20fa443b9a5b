"""Code location for Celery: the project's definitions with every step of a run sent to a Celery worker."""

import dagster as dg
from dagster_celery import celery_executor

from eval_pipeline.defs.build import build_definitions

# Workers run `dagster-celery worker start -A dagster_celery.app -y deploy/celery/celery.yaml` on any machine that
# has the project installed, DAGSTER_HOME with deploy/postgres/dagster.yaml, and the EVAL_PIPELINE_* / AWS_*
# variables; the broker URL of the run config must be the one the workers listen to.
defs = dg.Definitions.merge(build_definitions(), dg.Definitions(executor=celery_executor))
