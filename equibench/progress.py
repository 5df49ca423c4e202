"""Progress of the long commands: rich's live bar on a terminal; elsewhere (output redirected to
a file, nohup, CI, a cluster job's log) a plain line per task at its start and every
``EQUIBENCH_PROGRESS_EVERY_S`` seconds (30 by default), so that a log shows the run is alive:
what, done/total, elapsed, ETA.

The ETA is the time so far scaled by the steps left over the steps done, or, where its steps
differ in cost, what the task's work object estimates (:func:`remaining_s`); for a
task that stops at a time limit (its ``deadline`` field), the time left until then if sooner.
"""

from __future__ import annotations

import datetime
import math
import os
import threading
import time

from rich.progress import Progress as RichProgress
from rich.progress import TimeRemainingColumn
from rich.text import Text

from .errors import InvalidInputError

#: Seconds between two plain lines of a task when the output is not a terminal.
DEFAULT_EVERY_S = 30.0

#: The task field holding an object whose ``remaining_s()`` gives its time left (see :func:`remaining_s`),
#: for a task whose steps differ in cost.
WORK_FIELD = "work"

#: The task field holding when it stops whatever work is left (a time limit), on ``time.monotonic()``.
DEADLINE_FIELD = "deadline"

#: The task field holding text for its plain lines, as it is (statistics with their units, say).
TEXT_FIELD = "stats"


def plain_every_s() -> float:
    """``EQUIBENCH_PROGRESS_EVERY_S`` (seconds between plain lines), else 30; an
    InvalidInputError unless it is a finite number of seconds, 0 or more."""
    value = os.environ.get("EQUIBENCH_PROGRESS_EVERY_S", "").strip()
    if not value:
        return DEFAULT_EVERY_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidInputError(f"EQUIBENCH_PROGRESS_EVERY_S must be the seconds between two progress lines, "
                                f"0 or more (e.g. 30), got {value!r}; set it to a number or unset it")
    return seconds


def remaining_s(task) -> float | None:
    """Seconds left: what the task's ``work`` field (:data:`WORK_FIELD`) says where it has one,
    else at the pace so far, elapsed x steps left / steps done; None before any work is done."""
    if task.fields.get(WORK_FIELD) is not None:
        return task.fields[WORK_FIELD].remaining_s()
    done, total = task.completed, task.total
    if not done or total is None or not task.elapsed:
        return None
    return task.elapsed * max(0.0, total - done) / done


def time_to_deadline_s(task) -> float | None:
    """Seconds until the task's ``deadline`` field (:data:`DEADLINE_FIELD`); None without one."""
    deadline = task.fields.get(DEADLINE_FIELD)
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def clock_text(seconds: float | None) -> str:
    """``h:mm:ss`` (``2 days, h:mm:ss`` past a day); ``?`` for None."""
    return "?" if seconds is None else str(datetime.timedelta(seconds=int(seconds)))


class LimitedRemainingColumn(TimeRemainingColumn):
    """rich's time remaining, or the time to the task's deadline where that comes first
    (then marked ``(limit)``)."""

    def render(self, task) -> Text:
        left = time_to_deadline_s(task)
        if task.finished or left is None or (task.time_remaining is not None and task.time_remaining < left):
            return super().render(task)
        return Text(f"{clock_text(left)} (limit)", style="progress.remaining")


class Progress(RichProgress):
    """rich's :class:`~rich.progress.Progress`; when its console is not a terminal, a plain line
    per task when it is added, then every ``plain_every_s()`` seconds while it runs (from a timer
    thread, so that a slow step holds none back; with 0, at each ``update``/``advance``), and a
    last one when it completes. A task's finite number fields are in its lines, except the
    deadline that its ETA may come from; so is its text field (``TEXT_FIELD``). An ETA that is the
    time to the deadline says so."""

    def __init__(self, *columns, name: str = "", **kwargs):
        super().__init__(*columns, **kwargs)
        self._name = name  # the command, before a task's description in the plain lines
        self._plain = not self.disable and not self.console.is_terminal
        self._every_s = DEFAULT_EVERY_S if self.disable else plain_every_s()
        self._last_line: dict = {}  # task id -> when its last line was printed; -1.0 once its final one was
        self._stop_lines = threading.Event()
        self._timer: threading.Thread | None = None

    def start(self) -> None:
        super().start()
        if self._plain and self._every_s > 0 and self._timer is None:
            self._stop_lines.clear()
            self._timer = threading.Thread(target=self._print_due_lines, name="progress-lines", daemon=True)
            self._timer.start()

    def stop(self) -> None:
        if self._timer is not None:
            self._stop_lines.set()
            self._timer.join()
            self._timer = None
        super().stop()

    def add_task(self, *args, **kwargs):
        task_id = super().add_task(*args, **kwargs)
        self._plain_line(task_id)
        return task_id

    def update(self, task_id, **kwargs) -> None:
        super().update(task_id, **kwargs)
        self._plain_line(task_id)

    def advance(self, task_id, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._plain_line(task_id)

    def _print_due_lines(self) -> None:
        while not self._stop_lines.wait(min(self._every_s, 1.0)):
            for task in self.tasks:
                self._plain_line(task.id)

    def _plain_line(self, task_id) -> None:
        """Print the task's plain line if one is due (printed outside the lock, which rich's
        live display takes while it prints)."""
        if not self._plain:
            return
        with self._lock:
            line = self._due_line(task_id)
        if line is not None:
            self.console.print(line, markup=False, highlight=False)

    def _due_line(self, task_id) -> str | None:
        task = self._tasks.get(task_id)
        last = self._last_line.get(task_id)
        if task is None or last == -1.0:  # removed, or its last line is printed
            return None
        now = time.monotonic()
        finished = task.total is not None and task.completed >= task.total
        if last is not None and now - last < self._every_s and not finished:
            return None
        self._last_line[task_id] = -1.0 if finished else now
        total = "?" if task.total is None else f"{task.total:g}"
        work, left = remaining_s(task), time_to_deadline_s(task)
        limited = not finished and left is not None and (work is None or left < work)
        eta = 0.0 if finished else left if limited else work
        what = " ".join(part for part in (self._name, task.description) if part)
        numbers = "".join(f", {name} {value:.4g}" for name, value in task.fields.items()
                          if isinstance(value, (int, float)) and not isinstance(value, bool)
                          and math.isfinite(value) and name != DEADLINE_FIELD)
        text = f", {task.fields[TEXT_FIELD]}" if task.fields.get(TEXT_FIELD) else ""
        return (f"{what}: {task.completed:g}/{total} done{numbers}{text}, elapsed {clock_text(task.elapsed)}, "
                f"ETA {clock_text(eta)}{' (time limit)' if limited else ''}")
