"""Large batches are split over forked workers, except where the process may not have children."""

import multiprocessing as mp

from eval_pipeline.io.forked import Forked, fork_workers, results_of, run_parts


def _sum_part(payload: tuple, start: int, stop: int) -> int:
    return sum(payload[0][start:stop])


def _in_a_daemonic_process(queue) -> None:
    try:
        parts = run_parts(_sum_part, (list(range(1000)),), 1000, parallel_from=10)
        queue.put((fork_workers(), type(parts).__name__, sum(results_of(parts))))
    except Exception as exc:  # noqa: BLE001 - the test reports what broke
        queue.put(repr(exc))


def test_parts_cover_every_item_once_whether_forked_or_not():
    payload = (list(range(1000)),)
    forked = run_parts(_sum_part, payload, 1000, parallel_from=10)
    at_once = run_parts(_sum_part, payload, 1000, parallel_from=10**6)
    assert isinstance(at_once, list) and len(at_once) == 1
    assert sum(results_of(forked)) == sum(results_of(at_once)) == 499500
    if fork_workers() > 1:
        assert isinstance(forked, Forked)


def test_a_daemonic_process_such_as_a_celery_pool_worker_runs_the_parts_itself():
    # Celery's prefork workers are daemonic; a Pool started there fails with "daemonic processes are not allowed to
    # have children", which made every large step fail under the Celery executor.
    queue = mp.get_context("fork").Queue()
    process = mp.get_context("fork").Process(target=_in_a_daemonic_process, args=(queue,), daemon=True)
    process.start()
    result = queue.get(timeout=60)
    process.join(timeout=60)
    assert result == (1, "list", 499500)
