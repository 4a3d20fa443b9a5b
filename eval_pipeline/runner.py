"""`eval-pipeline run`: materialize the graph per run in-process on the persistent instance, then summarize."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import dagster as dg

from eval_pipeline.instance import ensure_dagster_home
from eval_pipeline.io.inputs import load_tool_registry, require_cases, require_corpus
from eval_pipeline.io.loaders import check_input_paths, list_runs, load_manifest
from eval_pipeline.io.policy import load_gate_policy
from eval_pipeline.io.storage import InputError, inside_root, is_url, open_location
from eval_pipeline.quality.remote import warm_up_in_background
from eval_pipeline.run_records import fail_abandoned_runs, runner_tags

# `eval-pipeline run`'s exit status (docs/gates.md#exit-codes-and-checks): a blocked release is a completed evaluation.
EXIT_COMPLETED, EXIT_INCOMPLETE = 0, 1


class RunnerError(Exception):
    """The run cannot start: the message says why, for the user."""


def _resolve(path: str | None) -> str | None:
    if path is None or is_url(path):
        return path
    return str(Path(path).resolve())


def check_data_root(data: str) -> list[str]:
    """Run ids under a usable data root, or RunnerError naming what is missing."""
    location = open_location(_resolve(data))
    if not location.is_dir():
        raise RunnerError(f"data directory {location.uri} does not exist (pass --data DIR)")
    try:
        if not location.is_dir("traces"):
            raise RunnerError(f"{location.uri} has no traces/ folder: expected traces/<run_id>/run.yaml and *.jsonl")
        runs = list_runs(location)
    except InputError as exc:  # a traces folder or run folder that links out of the data root
        raise RunnerError(str(exc)) from exc
    if not runs:
        raise RunnerError(f"no trace batch under {location.uri_of('traces')}: expected traces/<run_id>/run.yaml")
    return runs


def validate_configuration(location, run_ids: list[str]) -> None:
    """Load every configuration file the runs depend on; RunnerError for a broken one, before any step starts."""
    # policy/gates.yaml and the judge profile it names; per run its manifest, tools.yaml, corpus and cases folders.
    # Case and corpus files are data, not configuration: a bad one is a reject row, so they are not read here.
    from eval_pipeline.judge.base import JudgeConfigError
    from eval_pipeline.judge.profile import JudgeProfile

    try:
        policy = load_gate_policy(location)
        if policy.judge.profile:
            if not location.exists(policy.judge.profile):
                raise RunnerError(
                    f"{location.uri_of('policy', 'gates.yaml')} names judge profile "
                    f"{policy.judge.profile}, which is not in the data root"
                )
            JudgeProfile.from_yaml(location.read_text(policy.judge.profile), location.uri_of(policy.judge.profile))
        checked: set[tuple[str, str]] = set()
        for run_id in run_ids:
            manifest = load_manifest(location, run_id)
            check_input_paths(location, manifest)  # a file that links out of the data root is refused before any step
            for kind, version in (
                ("tools", manifest.environment_version),
                ("corpus", manifest.corpus_version),
                ("cases", manifest.dataset_version),
            ):
                if version is None or (kind, version) in checked:
                    continue
                checked.add((kind, version))
                if kind == "tools":
                    load_tool_registry(location, version)
                elif kind == "corpus":
                    require_corpus(location, version)  # its lines are data, read once by the corpus step
                else:
                    # so are its case files and lines (a bad one is a reject row): read once, by the cases step
                    require_cases(location, version)
    except (InputError, JudgeConfigError) as exc:
        raise RunnerError(str(exc)) from exc


def order_runs(data: str, run_ids: list[str]) -> list[str]:
    """Runs validated and ordered by manifest created_at (baselines usually first), then id."""
    location = open_location(_resolve(data))
    manifests = {}
    for run_id in run_ids:
        try:
            manifests[run_id] = load_manifest(location, run_id)
        except InputError as exc:
            raise RunnerError(str(exc)) from exc
    return sorted(run_ids, key=lambda r: (manifests[r].created_at or "", r))


def run_pipeline(
    data: str = "data",
    run_ids: list[str] | None = None,
    warehouse: str | None = None,
    reports: str | None = None,
    deid_demo: bool = False,
    quiet: bool = False,
    instance: dg.DagsterInstance | None = None,
    stream=None,
    executor: str = "in_process",
    max_concurrent: int = 2,
) -> int:
    """Evaluate runs; 0 when every step ran and every blocking check passed, whatever the release decision; 1 when a
    step or a blocking check failed; RunnerError (exit 2) for unusable input."""
    from eval_pipeline.defs.partitions import runs_partitions
    from eval_pipeline.defs.progress import use_console
    from eval_pipeline.defs.resources import EvalConfig, judge_config_from_env
    from eval_pipeline.reporting.summary import print_summary

    out = stream or sys.stdout
    available = check_data_root(data)
    wanted = run_ids or available
    unknown = [r for r in wanted if r not in available]
    if unknown:
        raise RunnerError(f"run(s) {', '.join(unknown)} not found under {data}/traces (known: {', '.join(available)})")
    ordered = order_runs(data, wanted)

    config = EvalConfig(
        data_root=_resolve(data),
        warehouse_root=_resolve(warehouse) or "",
        reports_root=_resolve(reports) or "",
        deid_demo=deid_demo,
    )
    preflight(config, ordered)
    if executor == "celery":
        celery_execution()
    # steps in processes of their own (multiprocess, Celery) import Great Expectations there, not here
    warm_up_in_background(own_process=executor == "in_process")
    if instance is None:
        home = ensure_dagster_home()
        instance = dg.DagsterInstance.get()
        print(home.announcement(), file=sys.stderr)
    for abandoned in fail_abandoned_runs(instance):
        print(f"Dagster run {abandoned} of an eval-pipeline process that was killed marked failed", file=sys.stderr)
    new_partitions = [r for r in ordered if not instance.has_dynamic_partition(runs_partitions.name, r)]
    instance.add_dynamic_partitions(runs_partitions.name, new_partitions)

    job_factory, execution = executor_setup(executor, instance, max_concurrent)
    total_steps = len(job_factory().graph.node_dict)
    # quiet: only errors on the console; otherwise one progress line per step
    loggers = (
        {"console": {"config": {"log_level": "ERROR"}}}
        if quiet
        else {"progress": {"config": {"total_steps": total_steps}}}
    )
    run_config: dict = {
        "loggers": loggers,
        **resources_run_config(config, judge_config_from_env()),
        "execution": execution,
    }
    console = None if quiet else terminal_stderr()
    use_console(console)
    try:
        failed_runs, blocked_runs = [], []
        for run_id in ordered:
            started = time.perf_counter()
            print(f"Evaluating run {run_id} ...", file=sys.stderr)
            # execute_job, not execute_in_process: the latter keeps every step's output in memory until the run ends
            with dg.execute_job(
                dg.reconstructable(job_factory),
                instance=instance,
                run_config=run_config,
                tags={"dagster/partition": run_id, **runner_tags()},
                raise_on_error=False,
            ) as result:
                success, dagster_run = result.success, result.run_id
            took = time.perf_counter() - started
            failed_checks, blocked = check_outcomes(instance, dagster_run)
            for line in failed_checks:
                print(f"run {run_id}: {line}", file=out)
            if not success:
                failed_runs.append(run_id)
                state = "FAILED"
            elif blocked:
                blocked_runs.append(run_id)
                state = "ok, release blocked"
                print(f"run {run_id}: {blocked}", file=out)
            else:
                state = "ok"
            print(f"run {run_id}: {state} in {took:.1f}s (Dagster run {dagster_run})", file=sys.stderr)
    finally:
        use_console(None)
        if console is not None:
            console.close()
    print_summary(config, ordered, out)
    if blocked_runs:
        print(
            f"\nrelease blocked for {', '.join(blocked_runs)}: the evaluation completed and a release gate failed "
            "(the check release_is_not_blocked is red in the UI; `eval-pipeline gate` exits 1)",
            file=out,
        )
    if failed_runs:
        print(
            f"\n{len(failed_runs)} run(s) had a failed step or a failed blocking check: {', '.join(failed_runs)}",
            file=out,
        )
        return EXIT_INCOMPLETE
    return EXIT_COMPLETED


def terminal_stderr():
    """A stream on this process's stderr file descriptor that Dagster's capture of fd 2 during a run does not redirect
    (a duplicate of it), or None when stderr is no file (a test's captured stream)."""
    try:
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8", closefd=True)
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return None


def check_outcomes(instance: dg.DagsterInstance, dagster_run_id: str) -> tuple[list[str], str | None]:
    """From one read of a Dagster run's check evaluations: `asset.check failed: description` for each blocking check
    that failed, and the release check's headline when a release gate failed (a result, not a failed blocking check)."""
    from eval_pipeline.defs.gates.checks import RELEASE_CHECK

    failed, release = [], None
    for entry in instance.all_logs(dagster_run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data
        if evaluation.passed:
            continue
        if evaluation.blocking:
            detail = f": {evaluation.description}" if evaluation.description else ""
            failed.append(f"{evaluation.asset_key.to_user_string()}.{evaluation.check_name} failed{detail}")
        elif evaluation.check_name == RELEASE_CHECK and release is None:
            release = evaluation.description or "release blocked"
    return failed, release


FORKSERVER_PRELOAD = ("eval_pipeline.runner", "eval_pipeline.defs.build", "great_expectations")


# One process for every step (the job's executor accepts either form).
IN_PROCESS_EXECUTION = {"config": {"in_process": {}}}


def multiprocess_execution(instance: dg.DagsterInstance, max_concurrent: int = 2) -> dict:
    """Run config of the multiprocess executor: one process per step, forked from a server that preloaded the code."""
    return {
        "config": {
            "multiprocess": {
                "max_concurrent": max_concurrent,
                # Spawned step processes would each re-import dagster, polars and Great Expectations (5-10 s of CPU in
                # each of the ~25 steps of a run); forked from a server that preloaded them, they start in about a
                # second.
                "start_method": {"forkserver": {"preload_modules": [*FORKSERVER_PRELOAD, *storage_modules(instance)]}},
            }
        }
    }


def storage_modules(instance: dg.DagsterInstance) -> list[str]:
    """Modules of the instance's run, event-log and schedule storage (dagster_postgres …), which each step opens."""
    storages = (instance.run_storage, instance.event_log_storage, instance.schedule_storage)
    return sorted({type(storage).__module__ for storage in storages if storage is not None})


# The variables deploy/celery/celery.yaml reads, so the workers and `eval-pipeline run --executor celery` agree.
CELERY_BROKER_ENV = "DAGSTER_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "DAGSTER_CELERY_BACKEND_URL"
# One step at a time per worker process: steps are long and memory-heavy, prefetching would starve other workers.
CELERY_CONFIG_SOURCE = {"worker_prefetch_multiplier": 1, "task_acks_late": True, "worker_max_tasks_per_child": 20}


def celery_execution() -> dict:
    """Run config of dagster-celery's executor: broker and result backend from the environment, as workers read them."""
    try:
        import dagster_celery  # noqa: F401
    except ImportError as exc:
        raise RunnerError(
            "--executor celery needs dagster-celery and a Redis client: pip install 'eval-pipeline[celery]'"
        ) from exc
    missing = [name for name in (CELERY_BROKER_ENV, CELERY_BACKEND_ENV) if not os.environ.get(name)]
    if missing:
        raise RunnerError(
            f"--executor celery needs {' and '.join(missing)} set to the broker and result backend the "
            "workers use, e.g. redis://127.0.0.1:6379/0 and redis://127.0.0.1:6379/1 (deploy/README.md)"
        )
    return {
        "config": {
            "broker": {"env": CELERY_BROKER_ENV},
            "backend": {"env": CELERY_BACKEND_ENV},
            "config_source": dict(CELERY_CONFIG_SOURCE),
        }
    }


def executor_setup(executor: str, instance: dg.DagsterInstance, max_concurrent: int):
    """(module-level job factory that workers reconstruct, execution run config) for an --executor choice."""
    if executor == "celery":
        return evaluate_run_celery_job, celery_execution()
    if executor == "multiprocess":
        return evaluate_run_job, multiprocess_execution(instance, max_concurrent)
    return evaluate_run_job, IN_PROCESS_EXECUTION


_JOBS: dict[str, dg.JobDefinition] = {}


def _build_job(key: str, executor: dg.ExecutorDefinition | None) -> dg.JobDefinition:
    from eval_pipeline.defs.build import EVALUATE_RUN_JOB, build_definitions
    from eval_pipeline.defs.resources import EvalConfig, JudgeConfig

    # Dagster reconstructs the job several times per run (plan, steps, each resume), and building it takes 0.3 s
    if key not in _JOBS:
        _JOBS[key] = build_definitions(EvalConfig(), JudgeConfig(), executor=executor).resolve_job_def(EVALUATE_RUN_JOB)
    return _JOBS[key]


def evaluate_run_job() -> dg.JobDefinition:
    """The evaluate_run job with default resources; every run configures them with resources_run_config."""
    return _build_job("local", None)


def evaluate_run_celery_job() -> dg.JobDefinition:
    """The evaluate_run job whose steps are Celery tasks; each worker rebuilds it from this module."""
    from dagster_celery import celery_executor

    return _build_job("celery", celery_executor)


def resources_run_config(config, judge) -> dict:
    """Run config of the evaluation, the warehouse IO manager and the judge: what every step process (in process,
    forked or on another machine) reads from the run record, so no configuration travels in the environment."""
    # The de-identification key is the exception: each step reads EVAL_PIPELINE_DEID_KEY itself. A forked step sees
    # the environment the fork server started with (once per process), which is this process's.
    return {
        "resources": {
            "eval_config": {"config": config.run_config()},
            "warehouse_io": {"config": {"warehouse_root": config.warehouse().root}},
            "judge": {"config": judge.run_config()},
        }
    }


def preflight(config, run_ids: list[str] | None = None) -> None:
    """Refuse to start without a de-identification key (unless demo mode) or with a broken configuration file."""
    from eval_pipeline.deid import DeidKeyError, resolve_key

    try:
        resolve_key(os.environ, demo=config.deid_demo)
    except DeidKeyError as exc:
        raise RunnerError(str(exc)) from exc
    try:
        # a default warehouse, reports or judge cache folder that links out of the data root
        config.warehouse(), config.reports()
        if not is_url(config.data_root):
            inside_root(config.data_root, ".judge_cache")
    except InputError as exc:
        raise RunnerError(str(exc)) from exc
    if run_ids:
        validate_configuration(open_location(config.data_root), run_ids)
    if config.deid_demo and not os.environ.get("EVAL_PIPELINE_DEID_KEY"):
        print(
            "WARNING: de-identification uses the fixed demo key (--deid-demo); set EVAL_PIPELINE_DEID_KEY "
            "for real traces",
            file=sys.stderr,
        )
