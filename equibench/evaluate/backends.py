"""Where `equibench evaluate` runs its cells: this process, local worker processes, or a Dask cluster.

evaluate has one loop (``evaluate._run``); a backend gives it:

- ``submit(cell, context)`` -> a ``concurrent.futures.Future`` of the cell's ``CellOutcome``;
- ``capacity()`` -> how many cells to keep in flight, ``workers()`` -> for the progress bar;
- ``on_lost(cell, error)`` when a cell's future failed because its worker died -> the reason
  to record as a failed row, or None to submit the cell again (any other error propagates
  and stops the run, which resumes later);
- ``recover()`` after a failed row of that kind -> whether the other in-flight cells were
  lost too and must be submitted again.

Cells never raise (``run_cell`` turns errors into failed rows), so a failed future always
means lost infrastructure.
"""

from __future__ import annotations

import concurrent.futures as futures
import os
import time
from abc import ABC, abstractmethod
from collections import Counter
from pathlib import Path

from .._version import __version__
from ..errors import InvalidInputError
from ..worker_guard import exit_with_parent
from .cells import Cell, CellContext, cached_task, run_cell


class CellBackend(ABC):
    @abstractmethod
    def submit(self, cell: Cell, context: CellContext) -> futures.Future: ...

    @abstractmethod
    def capacity(self) -> int: ...

    @abstractmethod
    def workers(self) -> int: ...

    def begin(self, cells: list[Cell]) -> None:
        """Called once with the run's cells, in the order they will be submitted."""

    def on_lost(self, cell: Cell, error: BaseException) -> str | None:
        raise error

    def recover(self) -> bool:
        return False

    def close(self) -> None:
        """Release the workers this backend started."""

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class SerialExecutor(futures.Executor):
    """Runs each submitted call at once in this process."""

    def submit(self, fn, /, *args, **kwargs):
        future = futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # noqa: BLE001 - handed to the caller through the future
            future.set_exception(error)
        return future


def available_cores() -> int:
    """CPU cores this process may use: joblib's count, which respects the affinity mask and a
    container's CPU quota (cgroups), unlike ``os.cpu_count()``."""
    import joblib

    return joblib.cpu_count()


def default_jobs(threads_per_cell: int = 1) -> int:
    """Local worker processes that fill this machine's cores with cells of ``threads_per_cell`` threads."""
    return max(1, available_cores() // threads_per_cell)


class LocalBackend(CellBackend):
    """This process for one job, else a pool of ``jobs`` worker processes (loky's
    ``ProcessPoolExecutor``, from joblib: fresh interpreters, as with "spawn"); a worker that
    dies fails its in-flight cells and the pool is rebuilt. Every cell sets its own threads
    (``CellContext.threads``), so the workers need no thread settings of their own.

    loky rather than ``concurrent.futures``: its public ``shutdown(kill_workers=True)`` stops
    busy workers at once (Ctrl-C, SIGTERM, a failure), where the standard pool can only wait
    for their cells or be reached through its private ``_processes`` (before Python 3.14); and
    a broken loky pool kills its remaining workers itself. Neither pool stops its workers when
    this process is SIGKILLed, so each worker also watches its parent (worker_guard)."""

    def __init__(self, jobs: int = 1):
        check_backend_options(jobs, None)
        self.jobs = jobs
        self.executor = self._new_executor()

    def _new_executor(self) -> futures.Executor:
        if self.jobs == 1:
            return SerialExecutor()
        from joblib.externals.loky import ProcessPoolExecutor

        return ProcessPoolExecutor(self.jobs, initializer=exit_with_parent, initargs=(os.getpid(),))

    def submit(self, cell: Cell, context: CellContext) -> futures.Future:
        return self.executor.submit(run_cell, cell, context)

    def capacity(self) -> int:
        # one job runs each cell inside submit: one at a time, so it is stored as soon as it is done
        return 1 if self.jobs == 1 else 2 * self.jobs

    def workers(self) -> int:
        return self.jobs

    def on_lost(self, cell: Cell, error: BaseException) -> str | None:
        if not isinstance(error, futures.process.BrokenProcessPool):  # loky's TerminatedWorkerError is one
            raise error
        return "the worker process died while running this cell (killed or out of memory); rerun to retry"

    def recover(self) -> bool:
        # the broken pool has failed all its in-flight cells and killed its other workers
        self.executor.shutdown(wait=False)
        self.executor = self._new_executor()
        return True

    def close(self) -> None:
        self.executor.shutdown(wait=True)

    def __exit__(self, exc_type, *exc_info) -> None:
        if exc_type is not None and not isinstance(self.executor, SerialExecutor):
            # interrupted or failed: kill the workers now rather than wait for the cells in flight
            # (their in-flight and queued cells are lost; stored ones stay)
            self.executor.shutdown(wait=True, kill_workers=True)
        self.close()


def _equibench_version() -> str:
    """The version of equibench in the process that runs this (a Dask worker)."""
    return __version__


MAX_RESUBMISSIONS = 3


class DaskBackend(CellBackend):
    """Cells as tasks of a Dask cluster (``dask.distributed``).

    Every cell sets its own torch and BLAS threads (``CellContext.threads``) on any worker, so
    a cluster gives the numbers of local execution; give each worker thread (task slot) that
    many cores. ``local:N`` workers run one cell at a time each, like ``jobs=N``.
    The client loads each task once and scatters it to the cluster; workers pass it to each
    other, so they need neither OpenML nor a shared cache. A worker that dies mid-cell has its
    cell rescheduled by Dask on another worker (and cells whose scattered task died with it are
    resubmitted with the task shipped again); a cell that kills
    ``distributed.scheduler.allowed-failures`` + 1 workers ends as a failed row.
    """

    def __init__(self, client, cluster=None):
        self.client = client
        self.cluster = cluster  # closed with the backend when this backend started it
        self.executor = client.get_executor(pure=False)
        self._scattered: dict[str, object] = {}  # task id -> Future of the scattered Task
        self._cells_left: Counter = Counter()  # task id -> cells not yet submitted
        self._resubmitted: Counter = Counter()  # cell -> times submitted again after losing its data
        self._size, self._size_checked = (0, 0), -float("inf")  # see _cluster_size
        try:
            theirs = client.run(_equibench_version)  # worker address -> version
            wrong = {address: version for address, version in theirs.items() if version != __version__}
            if wrong:
                raise InvalidInputError(
                    f"Dask workers run other equibench versions than this client ({__version__}): {wrong}; install "
                    "the same version on every worker"
                )
        except BaseException:
            self.close()
            raise

    @classmethod
    def connect(cls, scheduler: str, timeout_s: float = 30.0) -> DaskBackend:
        """``local:N`` (a LocalCluster of N single-threaded worker processes here), a scheduler
        address such as ``tcp://host:8786``, or a scheduler file (``dask scheduler --scheduler-file``)."""
        try:
            from distributed import Client, LocalCluster
        except ImportError as error:
            raise InvalidInputError(f'a scheduler needs dask.distributed ({error}): pip install "equibench[distributed]"') from None
        if scheduler.startswith("local:"):
            count = scheduler.removeprefix("local:")
            if not count.isdigit() or int(count) < 1:
                raise InvalidInputError(f"`scheduler` local:N takes a positive number of workers, got {scheduler!r}")
            workers = int(count)
            import dask

            # the workers' statistical profiler samples every thread's stack each 10 ms (GIL time
            # taken from the cells); nothing reads it without a dashboard
            with dask.config.set({"distributed.worker.profile.enabled": False}):
                cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None)
            return cls(Client(cluster), cluster)
        try:
            if scheduler.endswith(".json"):
                if not Path(scheduler).is_file():
                    raise InvalidInputError(f"scheduler file {scheduler!r} does not exist (a Dask scheduler writes it when told to)")
                client = Client(scheduler_file=scheduler, timeout=timeout_s)
            else:
                client = Client(scheduler, timeout=timeout_s)
        except (OSError, TimeoutError) as error:
            raise InvalidInputError(
                f"could not reach a Dask scheduler at {scheduler!r} within {timeout_s:.0f} s ({error}); start one with "
                "`dask scheduler` and workers with `dask worker ADDRESS`, or use `scheduler='local:N'`"
            ) from None
        return cls(client)

    def begin(self, cells: list[Cell]) -> None:
        self._cells_left = Counter(cell.task_id for cell in cells)

    def submit(self, cell: Cell, context: CellContext) -> futures.Future:
        task = self._scattered.get(cell.task_id)
        if task is None:
            task = self.client.scatter(cached_task(cell.task_id, context.openml_cache, context.file_tasks))
            self._scattered[cell.task_id] = task
        self._cells_left[cell.task_id] -= 1
        if self._cells_left[cell.task_id] <= 0:  # its in-flight cells keep the data alive until they finish
            del self._scattered[cell.task_id]
        return self.executor.submit(run_cell, cell, context, task)

    def capacity(self) -> int:
        return 2 * max(1, self._cluster_size()[1])

    def workers(self) -> int:
        return self._cluster_size()[0]

    def _cluster_size(self) -> tuple[int, int]:
        """(workers, threads), asked of the scheduler (a round trip) at most once a second."""
        if time.monotonic() - self._size_checked >= 1.0:
            workers = self.client.scheduler_info()["workers"].values()
            self._size = (len(workers), sum(worker["nthreads"] for worker in workers))
            self._size_checked = time.monotonic()
        return self._size

    def on_lost(self, cell: Cell, error: BaseException) -> str | None:
        from distributed import KilledWorker

        if isinstance(error, KilledWorker):
            return (
                f"this cell's worker died {error.allowed_failures + 1} times (killed, out of memory or crashed); Dask "
                f"gave up after distributed.scheduler.allowed-failures={error.allowed_failures}; rerun to retry"
            )
        if isinstance(error, futures.CancelledError) and self.client.status == "running":
            # the only copy of the cell's task died with a worker: ship it again and resubmit
            self._scattered.pop(cell.task_id, None)
            self._resubmitted[cell] += 1
            if self._resubmitted[cell] > MAX_RESUBMISSIONS:
                return f"this cell's data was lost with a dying worker {MAX_RESUBMISSIONS + 1} times; rerun to retry"
            self._cells_left[cell.task_id] += 1
            return None
        raise error

    def close(self) -> None:
        self._scattered.clear()
        self.executor.shutdown(wait=False)
        self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def check_backend_options(jobs: int | None, scheduler: str | None) -> None:
    """``jobs`` None: not given (the default of :func:`make_backend`)."""
    if jobs is not None and jobs < 1:
        raise InvalidInputError(f"`jobs` must be at least 1, got {jobs}")
    if scheduler and jobs not in (None, 1):
        raise InvalidInputError("`jobs` and `scheduler` exclude each other: on a Dask cluster its workers set the parallelism")


def make_backend(jobs: int | None = 1, scheduler: str | None = None, threads_per_cell: int = 1) -> CellBackend:
    """The backend for ``jobs`` or ``scheduler``; ``jobs`` None: :func:`default_jobs`."""
    check_backend_options(jobs, scheduler)
    if scheduler:
        return DaskBackend.connect(scheduler)
    return LocalBackend(default_jobs(threads_per_cell) if jobs is None else jobs)
