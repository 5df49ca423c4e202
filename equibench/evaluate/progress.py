"""The run's progress: a bar of the cells done, with a time left from their estimated cost, and
below it the cells running now and how many wait for a worker."""

from __future__ import annotations

import threading
import time

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

from ..progress import Progress, clock_text, remaining_s
from .cells import Cell

#: At most this many running cells are named under the bar; the others are counted.
NAMED_CELLS = 2


class CellsWork:
    """A run's work as the estimated cost of its cells (see ``plan.estimated_cost``), and its
    time left: the task's ``work`` field (see ``equibench.progress.remaining_s``). Cells stored
    before the run are not part of it.

    The pace is the cost of the finished cells per second that their workers spent on them,
    each timed from when a worker took it (:meth:`running`); the time left is the cost left,
    less what the running cells have done at that pace, over the workers that still have
    cells. (The cost done against the time so far ignores the cells still running: with two
    workers the first estimate was twice too long.) A skipped cell (no weights, a missing
    package) ran no model: its cost, and that of the cells left of its method and variant,
    which skip alike, leave the work. Thread-safe: the plain lines read it from a timer thread."""

    def __init__(self, costs: dict[Cell, float], workers: int = 1, clock=time.monotonic):
        self.costs = costs  # cell -> estimated cost, for every cell of the run
        self.left = dict(costs)  # the cells not finished, less those of skipped variants
        self.workers = workers
        self._clock = clock
        self._taken: dict[Cell, float] = {}  # the cells workers run now -> when they took them
        self._cost = self._seconds = 0.0  # of the finished cells that ran: their cost, their workers' time
        self._lock = threading.Lock()

    def running(self, cells: list[Cell], workers: int) -> None:
        """The cells submitted and not finished, in submission order: the first ``workers`` run
        now (as ``running_text`` says), the others wait."""
        with self._lock:
            self.workers = workers
            now = self._clock()
            for cell in cells[:workers]:
                self._taken.setdefault(cell, now)

    def finish(self, cell: Cell, status: str) -> None:
        """Count ``cell`` as finished with ``status`` (``ok``, ``skipped``, ``failed``)."""
        with self._lock:
            taken = self._taken.pop(cell, None)
            self.left.pop(cell, None)
            if status != "skipped":
                if taken is not None:
                    self._cost += self.costs[cell]
                    self._seconds += self._clock() - taken
                return
            for other in [other for other in self.left if (other.method, other.variant) == (cell.method, cell.variant)]:
                del self.left[other]

    def remaining_s(self) -> float | None:
        """Seconds left at the pace so far; None before a cell that ran has finished."""
        with self._lock:
            if not self.left:
                return 0.0
            if not self._cost or not self._seconds:
                return None
            pace = self._cost / self._seconds  # cost per second of one worker
            now = self._clock()
            running = sum(min(self.left[cell], (now - taken) * pace) for cell, taken in self._taken.items()
                          if cell in self.left)
            workers = max(1, min(self.workers, len(self.left)))
            return max(0.0, sum(self.left.values()) - running) / pace / workers


class CellsRemainingColumn(TimeRemainingColumn):
    """The time left that the task's work estimates (see :class:`CellsWork`): rich's own estimate
    uses the progress of the last 30 s only, so cells slower than that would never give one, and
    counts every cell alike. Shown from the first finished cell on."""

    def render(self, task) -> Text:
        if task.finished:
            return super().render(task)
        seconds = remaining_s(task)
        return Text("-:--:--" if seconds is None else clock_text(seconds), style="progress.remaining")


def progress_columns(console: Console) -> tuple:
    """The bar fills a terminal's width (40 characters when piped)."""
    return (
        TextColumn("[bold]{task.description}"), BarColumn(bar_width=None if console.is_terminal else 40),
        MofNCompleteColumn(),
        TextColumn("ok {task.fields[ok]} skipped {task.fields[skipped]} [red]failed {task.fields[failed]}[/red]"),
        TimeElapsedColumn(), TextColumn("ETA"), CellsRemainingColumn(),
    )


class CellsProgress(Progress):
    """The run's bar, and below it the cells running now (``running`` field of the task)."""

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        for task in self.tasks:
            if task.fields.get("running"):
                yield Text.from_markup(task.fields["running"], style="dim")


def _cell_name(cell: Cell) -> str:
    variant = "" if cell.variant == "default" else f" {cell.variant}"
    return f"{cell.task_id} {cell.method}{variant} fold {cell.fold}"


def running_text(running: dict[str, Cell], workers: int) -> str:
    """The cells running now and how many wait for a worker. ``running`` holds the cells
    submitted and not finished, in submission order: the run keeps ``capacity()`` of them at
    the backend (two per worker in a pool), whose workers take them in that order, so the
    first ``workers`` run and the others are queued."""
    cells = list(running.values())
    if not cells:
        return ""
    now, queued = cells[:workers], len(cells) - min(workers, len(cells))
    if not now:  # a Dask cluster without workers yet
        return f"queued: {queued}, no worker yet"
    names = ", ".join(escape(_cell_name(cell)) for cell in now[:NAMED_CELLS])
    more = f" and {len(now) - NAMED_CELLS} more" if len(now) > NAMED_CELLS else ""
    waiting = f" (+{queued} queued)" if queued else ""
    return f"running on {workers} worker{'s' if workers > 1 else ''}: {names}{more}{waiting}"
