"""Progress of the long commands: rich's live bar on a terminal; elsewhere (output redirected to
a file, nohup, CI, a cluster job's log) a plain line per task every ``EQUIBENCH_PROGRESS_EVERY_S``
seconds (30 by default), so that a log shows the run is alive: what, done/total, elapsed, ETA.

The ETA is the time so far scaled by the work left over the work done: a task's steps, or,
where its steps differ in cost, the estimated cost of each step (:func:`remaining_s`).
"""

from __future__ import annotations

import datetime
import os
import time

from rich.progress import Progress as RichProgress

#: Seconds between two plain lines of a task when the output is not a terminal.
DEFAULT_EVERY_S = 30.0

#: The task fields that hold its estimated work done and in all, for :func:`remaining_s`.
WORK_FIELDS = ("work_done", "work_total")


def plain_every_s() -> float:
    """``EQUIBENCH_PROGRESS_EVERY_S`` (seconds between plain lines), else 30."""
    value = os.environ.get("EQUIBENCH_PROGRESS_EVERY_S", "")
    try:
        return max(0.0, float(value)) if value else DEFAULT_EVERY_S
    except ValueError:
        return DEFAULT_EVERY_S


def remaining_s(task) -> float | None:
    """Seconds left at the pace so far: elapsed x work left / work done, the work being the
    task's ``work_done`` and ``work_total`` fields where it has them (the estimated cost of its
    finished steps and of all its steps), else its completed and total steps; None before any
    work is done."""
    if "work_total" in task.fields:
        done, total = task.fields["work_done"], task.fields["work_total"]
    else:
        done, total = task.completed, task.total
    if not done or total is None or not task.elapsed:
        return None
    return task.elapsed * max(0.0, total - done) / done


def _clock(seconds: float | None) -> str:
    return "?" if seconds is None else str(datetime.timedelta(seconds=int(seconds)))


class Progress(RichProgress):
    """rich's :class:`~rich.progress.Progress`; when its console is not a terminal, each
    ``update``/``advance`` of a task also prints a plain line at most every ``plain_every_s()``
    seconds (the first after that long), and a last one when the task completes. A task's number
    fields are in its lines, except the work fields (``WORK_FIELDS``) that its ETA comes from."""

    def __init__(self, *columns, name: str = "", **kwargs):
        super().__init__(*columns, **kwargs)
        self._name = name  # the command, before a task's description in the plain lines
        self._plain = not self.disable and not self.console.is_terminal
        self._every_s = plain_every_s()
        self._last_line: dict = {}

    def update(self, task_id, **kwargs) -> None:
        super().update(task_id, **kwargs)
        self._plain_line(task_id)

    def advance(self, task_id, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._plain_line(task_id)

    def _plain_line(self, task_id) -> None:
        if not self._plain:
            return
        task = next((task for task in self.tasks if task.id == task_id), None)
        if task is None:
            return
        now = time.monotonic()
        last = self._last_line.setdefault(task_id, now)
        if last == -1.0:  # its last line is printed
            return
        finished = task.total is not None and task.completed >= task.total
        if now - last < self._every_s and not finished:
            return
        self._last_line[task_id] = -1.0 if finished else now
        total = "?" if task.total is None else f"{task.total:g}"
        eta = 0.0 if finished else remaining_s(task)
        what = " ".join(part for part in (self._name, task.description) if part)
        numbers = "".join(f", {name} {value:.4g}" for name, value in task.fields.items()
                          if isinstance(value, (int, float)) and not isinstance(value, bool)
                          and name not in WORK_FIELDS)
        self.console.print(f"{what}: {task.completed:g}/{total} done{numbers}, elapsed {_clock(task.elapsed)}, "
                           f"ETA {_clock(eta)}", markup=False, highlight=False)
