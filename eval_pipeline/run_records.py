"""Dagster run records of `eval-pipeline run`: which process ran them, and failing those whose process is gone."""

from __future__ import annotations

import os
import socket

import dagster as dg

RUNNER_PID_TAG = "eval_pipeline/runner_pid"
RUNNER_HOST_TAG = "eval_pipeline/runner_host"
_UNFINISHED = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def runner_tags() -> dict[str, str]:
    """Tags naming this process, set on every run it executes in process."""
    return {RUNNER_PID_TAG: str(os.getpid()), RUNNER_HOST_TAG: socket.gethostname()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process holds the pid
        return True
    return True


def fail_abandoned_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark failed the unfinished runs whose `eval-pipeline run` process on this host no longer exists; their ids.

    A killed command leaves its in-process run STARTED forever: no daemon watches a run it did not launch.
    """
    host = socket.gethostname()
    records = instance.get_run_records(dg.RunsFilter(statuses=_UNFINISHED, tags={RUNNER_HOST_TAG: host}))
    failed = []
    for record in records:
        run = record.dagster_run
        pid = run.tags.get(RUNNER_PID_TAG, "")
        if not pid.isdigit() or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        instance.report_run_failed(
            run,
            message=f"the eval-pipeline process (pid {pid}) that ran it ended without finishing it (killed or crashed)",
        )
        failed.append(run.run_id)
    return failed
