"""The prior stream drawn ahead by worker processes (``prior_workers``): the same batches and
generator states as the stream drawn in the training process, and runs that switch between
the two on resume."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from equibench.pretrain import pretrain
from equibench.pretrain.loop import prior_batches
from equibench.prior import draw_batch_seed, sample_batch, sample_batch_from_seed

from .common import PRIOR, step_losses, tiny_config


def _assert_same_batch(a, b) -> None:
    assert (a.n_train, a.n_classes) == (b.n_train, b.n_classes)
    for name in ("x", "y", "n_features", "loss_mask"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name


def test_a_batch_is_a_function_of_its_seed():
    generator = torch.Generator().manual_seed(3)
    seed = draw_batch_seed(torch.Generator().manual_seed(3))
    _assert_same_batch(sample_batch(PRIOR, 4, generator, "cpu"), sample_batch_from_seed(PRIOR, 4, seed, "cpu"))


def test_workers_draw_the_in_process_stream_and_advance_the_generator_per_batch_used():
    config = tiny_config(grad_accumulation=2, rows_curriculum=((3, 48),))
    in_process, ahead = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    expected = prior_batches(PRIOR, config, in_process, "cpu", first_step=2)
    drawn = prior_batches(PRIOR, dataclasses.replace(config, prior_workers=2), ahead, "cpu", first_step=2)
    try:
        for _ in range(5):
            batch = next(drawn)
            _assert_same_batch(batch, next(expected))
            # the workers ran ahead, but the run's generator stands where the batches used left it
            assert torch.equal(ahead.get_state(), in_process.get_state())
        assert batch.x.shape[1] == 48
    finally:
        drawn.close()


@pytest.mark.slow
def test_a_run_resumes_exactly_with_workers_and_a_changed_amp_setting(tmp_path):
    """prior_workers and amp may change on resume (like device): on the CPU the steps stay exact."""
    pretrain(tiny_config(), PRIOR, tmp_path / "straight", progress=False)
    pretrain(tiny_config(), PRIOR, tmp_path / "switched", progress=False, time_limit_s=0)  # stops after step 1
    pretrain(tiny_config(prior_workers=2, amp=False), PRIOR, tmp_path / "switched", resume=True, progress=False)
    assert step_losses(tmp_path / "switched") == step_losses(tmp_path / "straight")


@pytest.mark.parametrize("workers", [-1, 1.5, True])
def test_prior_workers_must_be_a_non_negative_integer(workers):
    with pytest.raises(ValueError, match="`prior_workers` must be a non-negative integer"):
        tiny_config(prior_workers=workers)


@pytest.mark.slow
def test_a_killed_worker_stops_the_stream_with_one_clear_error():
    """SIGKILL of a prior worker: a WorkerLostError saying what happened and how to continue,
    not a BrokenProcessPool traceback."""
    import multiprocessing
    import os
    import signal

    from equibench.errors import WorkerLostError

    others = {child.pid for child in multiprocessing.active_children()}  # this process's other children
    drawn = prior_batches(PRIOR, tiny_config(prior_workers=2), torch.Generator().manual_seed(5), "cpu", first_step=1)
    try:
        next(drawn)
        workers = [child.pid for child in multiprocessing.active_children() if child.pid not in others]
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGKILL)
        with pytest.raises(WorkerLostError, match=r"a prior worker process ended unexpectedly .*its last checkpoint "
                                                  r"is kept: run again with `resume=True`"):
            for _ in range(50):
                next(drawn)
    finally:
        drawn.close()


class _PoolBrokenAtSubmit:
    """A loky pool drawing batches in this process whose ``fail_at``-th submit raises
    TerminatedWorkerError, as loky's does once it has seen a worker die."""

    def __init__(self, workers, initializer=None, initargs=(), fail_at=1):
        self.submitted, self.fail_at = 0, fail_at

    def submit(self, function, *args):
        from concurrent.futures import Future

        from joblib.externals.loky.process_executor import TerminatedWorkerError

        self.submitted += 1
        if self.submitted >= self.fail_at:
            raise TerminatedWorkerError("A worker process managed by the executor was unexpectedly terminated.")
        future = Future()
        future.set_result(function(*args))
        return future

    def shutdown(self, wait=True, kill_workers=False):
        pass


@pytest.mark.parametrize("fail_at", [1, 6])
def test_a_pool_broken_at_submit_is_the_clear_worker_lost_error(monkeypatch, fail_at):
    """The guard covers submit too: there loky raises TerminatedWorkerError once it has seen the
    death, before any pending batch fails (half the kills of a real run)."""
    from joblib.externals import loky

    from equibench.errors import WorkerLostError

    monkeypatch.setattr(loky, "ProcessPoolExecutor",
                        lambda *args, **kwargs: _PoolBrokenAtSubmit(*args, **kwargs, fail_at=fail_at))
    drawn = prior_batches(PRIOR, tiny_config(prior_workers=2), torch.Generator().manual_seed(5), "cpu", first_step=1)
    try:
        with pytest.raises(WorkerLostError, match=r"a prior worker process ended unexpectedly .*run again with "
                                                  r"`resume=True`"):
            for _ in range(10):
                next(drawn)
    finally:
        drawn.close()


@pytest.mark.slow
def test_a_worker_killed_between_steps_stops_the_stream_with_one_clear_error():
    """The worker dies while the training process is busy elsewhere (a step): by the next batch
    loky knows, and its submit raises. That is the clear WorkerLostError too, not a traceback."""
    import multiprocessing
    import os
    import signal
    import time

    from concurrency import alive

    from equibench.errors import WorkerLostError

    others = {child.pid for child in multiprocessing.active_children()}
    drawn = prior_batches(PRIOR, tiny_config(prior_workers=2), torch.Generator().manual_seed(5), "cpu", first_step=1)
    try:
        next(drawn)
        workers = {child.pid for child in multiprocessing.active_children()} - others
        assert len(workers) == 2
        os.kill(min(workers), signal.SIGKILL)
        deadline = time.monotonic() + 15
        while alive(workers) and time.monotonic() < deadline:  # loky has seen it: it kills the other worker
            time.sleep(0.1)
        with pytest.raises(WorkerLostError, match="a prior worker process ended unexpectedly"):
            next(drawn)
    finally:
        drawn.close()


@pytest.mark.slow
def test_a_killed_worker_stops_the_pools_own_workers_and_no_other_process():
    """The pool's other worker is killed with the broken pool (it ignores SIGTERM), by the pool
    itself: a process this one started meanwhile for something else keeps running."""
    import multiprocessing
    import os
    import signal
    import time

    from concurrency import alive

    from equibench.errors import WorkerLostError

    others = {child.pid for child in multiprocessing.active_children()}
    drawn = prior_batches(PRIOR, tiny_config(prior_workers=2), torch.Generator().manual_seed(5), "cpu", first_step=1)
    bystander = None
    try:
        next(drawn)
        workers = {child.pid for child in multiprocessing.active_children()} - others
        assert len(workers) == 2
        bystander = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(120,), daemon=True)
        bystander.start()
        os.kill(min(workers), signal.SIGKILL)
        with pytest.raises(WorkerLostError):
            for _ in range(50):
                next(drawn)
        deadline = time.monotonic() + 15
        while alive(workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(workers)
        assert bystander.is_alive(), "a process that is not one of the pool's workers was killed"
    finally:
        drawn.close()
        if bystander is not None:
            bystander.kill()
            bystander.join()
