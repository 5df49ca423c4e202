"""Progress of the long commands: rich's live bar on a terminal; elsewhere (output redirected to
a file, nohup, CI, a cluster job's log) a plain line per task every ``EQUIBENCH_PROGRESS_EVERY_S``
seconds (30 by default), so that a log shows the run is alive: what, done/total, elapsed, ETA.
"""

from __future__ import annotations

import datetime
import os
import time

from rich.progress import Progress as RichProgress

#: Seconds between two plain lines of a task when the output is not a terminal.
DEFAULT_EVERY_S = 30.0


def plain_every_s() -> float:
    """``EQUIBENCH_PROGRESS_EVERY_S`` (seconds between plain lines), else 30."""
    value = os.environ.get("EQUIBENCH_PROGRESS_EVERY_S", "")
    try:
        return max(0.0, float(value)) if value else DEFAULT_EVERY_S
    except ValueError:
        return DEFAULT_EVERY_S


def _clock(seconds: float | None) -> str:
    return "?" if seconds is None else str(datetime.timedelta(seconds=int(seconds)))


class Progress(RichProgress):
    """rich's :class:`~rich.progress.Progress`; when its console is not a terminal, each
    ``update``/``advance`` of a task also prints a plain line at most every ``plain_every_s()``
    seconds (the first after that long), and a last one when the task completes."""

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
        eta = 0.0 if finished else self._eta(task)
        what = " ".join(part for part in (self._name, task.description) if part)
        numbers = "".join(f", {name} {value:.4g}" for name, value in task.fields.items()
                          if isinstance(value, (int, float)) and not isinstance(value, bool))
        self.console.print(f"{what}: {task.completed:g}/{total} done{numbers}, elapsed {_clock(task.elapsed)}, "
                           f"ETA {_clock(eta)}", markup=False, highlight=False)

    @staticmethod
    def _eta(task) -> float | None:
        """Time left at the mean pace so far (steadier than rich's recent-speed estimate)."""
        if not task.completed or task.total is None or not task.elapsed:
            return None
        return task.elapsed / task.completed * (task.total - task.completed)
