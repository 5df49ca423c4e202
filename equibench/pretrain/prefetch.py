"""The training stream drawn ahead by worker processes on the CPU (``TrainConfig.prior_workers``).

A batch is a pure function of its prior and of the one seed it takes from the run's generator
(:func:`~equibench.prior.sample.sample_batch_from_seed`), so workers can draw batches ahead of
the training process: the stream equals the one :func:`~equibench.prior.sample_batch` draws on
the CPU in the training process itself. The run's generator advances one draw per batch handed
out, so a checkpoint saves the state of the batches used, not of those drawn ahead. A GPU run
keeps its prior on the CPU this way, at the pace of several cores.
"""

from __future__ import annotations

import collections
import os
import signal
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool

import torch

from ..errors import WorkerLostError
from ..prior import PriorBatch, PriorConfig, draw_batch_seed, sample_batch_from_seed
from ..worker_guard import exit_with_parent

#: Batches drawn ahead per worker.
BATCHES_AHEAD_PER_WORKER = 2
_TENSORS = ("x", "y", "n_features", "loss_mask")  # PriorBatch's tensor fields


def drawn_ahead(priors: Iterator[PriorConfig], batch_size: int, generator: torch.Generator, device,
                workers: int) -> Iterator[PriorBatch]:
    """For each prior of ``priors`` in turn, the batch ``sample_batch(prior, batch_size,
    generator, "cpu")`` would give, drawn by ``workers`` processes and moved to ``device``.
    ``generator`` must be a CPU generator; close the iterator to stop the workers.

    The workers are a loky pool (joblib's): a worker that dies breaks it, and loky then kills
    the other workers with SIGKILL (they ignore SIGTERM, the standard pool's way, and one
    blocked writing a batch to the result pipe would hold a shutdown forever); closing the
    stream kills them too (``shutdown(kill_workers=True)``), as the batches drawn ahead are
    not needed. Each worker exits with the training process (worker_guard)."""
    from joblib.externals.loky import ProcessPoolExecutor

    lookahead = torch.Generator()
    lookahead.set_state(generator.get_state())
    pending = collections.deque()  # futures of the batches' arrays, in stream order
    pool = ProcessPoolExecutor(workers, initializer=_worker_setup, initargs=(os.getpid(),))
    try:
        while True:
            try:  # a broken pool raises at submit (once loky has seen the death) or at result (before)
                while len(pending) < BATCHES_AHEAD_PER_WORKER * workers:
                    pending.append(pool.submit(_batch_arrays, next(priors), batch_size, draw_batch_seed(lookahead)))
                batch = pending.popleft().result()
            except BrokenProcessPool:  # loky's TerminatedWorkerError is one
                raise WorkerLostError(
                    "a prior worker process ended unexpectedly (killed, or out of memory), so the run stopped before "
                    "its next step; its last checkpoint is kept: run again with `resume=True` to continue "
                    "(`prior_workers=0` draws the prior in the training process)"
                ) from None
            draw_batch_seed(generator)  # the run's generator: one draw per batch used
            yield batch._replace(**{name: torch.from_numpy(getattr(batch, name)) for name in _TENSORS}).to(device)
    finally:
        pool.shutdown(wait=True, kill_workers=True)


def _worker_setup(parent_pid: int) -> None:
    """One thread per worker, which exits with its training process. Ctrl-C and SIGTERM are the
    training process's to handle (it stops after the step in flight, then shuts the workers
    down), so a worker ignores them."""
    torch.set_num_threads(1)
    exit_with_parent(parent_pid)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _batch_arrays(prior: PriorConfig, batch_size: int, seed: int) -> PriorBatch:
    """A worker's batch with numpy arrays for tensors (plain pickles: no shared-memory handles between processes)."""
    batch = sample_batch_from_seed(prior, batch_size, seed, "cpu")
    return batch._replace(**{name: getattr(batch, name).numpy() for name in _TENSORS})
