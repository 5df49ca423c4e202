"""LocalBackend's worker processes, through public APIs only: an interrupt kills busy workers
at once, and a killed worker fails its cells with one line while the rebuilt pool goes on.
(The full runs: tests/evaluate/test_run.py and tests/test_reliability.py's test_12_*.)"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from concurrent.futures.process import BrokenProcessPool

import pytest
from concurrency import alive

from equibench.evaluate.backends import LocalBackend


def _workers(others: set[int], count: int) -> set[int]:
    """The pids of the ``count`` children started since ``others`` was taken (the pool's workers).
    The tests submit standard-library functions, so that a worker imports nothing of the tests."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = {child.pid for child in multiprocessing.active_children()} - others
        if len(workers) >= count:
            return workers
        time.sleep(0.05)
    raise AssertionError(f"the pool should have started {count} workers")


def test_an_interrupt_kills_the_busy_workers_at_once():
    others = {child.pid for child in multiprocessing.active_children()}
    backend = LocalBackend(2)
    with pytest.raises(KeyboardInterrupt), backend:
        assert backend.executor.submit(os.getpid).result(timeout=60) > 0  # the pool is up
        in_flight = [backend.executor.submit(time.sleep, 120) for _ in range(4)]  # two running, two queued
        workers = _workers(others, 2)
        time.sleep(0.5)
        interrupted = time.monotonic()
        raise KeyboardInterrupt
    # the standard pool, through public APIs, could only wait for the cells in flight (120 s)
    assert time.monotonic() - interrupted < 15
    assert not alive(workers)
    assert all(future.done() and (future.cancelled() or future.exception() is not None) for future in in_flight)


def test_a_killed_worker_fails_its_cells_with_one_line_and_the_rebuilt_pool_runs_on():
    others = {child.pid for child in multiprocessing.active_children()}
    with LocalBackend(2) as backend:
        in_flight = [backend.executor.submit(time.sleep, 120) for _ in range(2)]
        workers = _workers(others, 2)
        time.sleep(0.5)
        os.kill(min(workers), signal.SIGKILL)
        errors = [future.exception(timeout=30) for future in in_flight]
        assert all(isinstance(error, BrokenProcessPool) for error in errors)
        assert backend.on_lost(None, errors[0]) == (
            "the worker process died while running this cell (killed or out of memory); rerun to retry")
        assert backend.recover()
        deadline = time.monotonic() + 15
        while alive(workers) and time.monotonic() < deadline:  # the other worker of the broken pool is killed
            time.sleep(0.1)
        assert not alive(workers)
        assert backend.executor.submit(os.getpid).result(timeout=60) not in workers
