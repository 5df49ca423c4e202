"""Progress of a long predict: once a predict's pace says it will take more than
``PROGRESS_AFTER_S`` seconds, a bar on a terminal's stderr, else plain lines every 30 s
(:class:`equibench.progress.Progress`). :func:`quiet_predictions` turns it off (``evaluate``'s
cells, which report their own progress)."""

from __future__ import annotations

import contextlib
import contextvars
import time

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

from ..progress import Progress

#: A predict projected to take longer than this shows its progress.
PROGRESS_AFTER_S = 10.0

_shown = contextvars.ContextVar("equibench_predict_progress", default=True)


@contextlib.contextmanager
def quiet_predictions():
    """Within this block, predicts show no progress."""
    token = _shown.set(False)
    try:
        yield
    finally:
        _shown.reset(token)


@contextlib.contextmanager
def predict_progress(n_rows: int):
    """Yields ``advance(rows)``, to call as test rows are done; shows the progress from the
    moment the predict is projected (elapsed x rows / rows done) to last over PROGRESS_AFTER_S."""
    pace = _Pace(n_rows)
    shown = {}

    def advance(rows: int) -> None:
        pace.done += rows
        if "bar" in shown:
            shown["bar"].advance(shown["task"], rows)
        elif _shown.get() and pace.done < n_rows and pace.projected_s() > PROGRESS_AFTER_S:
            bar = Progress(TextColumn("predict"), BarColumn(), MofNCompleteColumn(), TextColumn("test rows"),
                           TimeRemainingColumn(), console=Console(stderr=True), transient=True, name="predict")
            bar.start()
            shown.update(bar=bar, task=bar.add_task("test rows", total=n_rows, completed=pace.done, work=pace))

    try:
        yield advance
    finally:
        if "bar" in shown:
            shown["bar"].stop()


class _Pace:
    """A predict's rows done, and its time left at the pace since it started (the progress
    task's ``work``, so that the ETA counts the time before the progress was shown)."""

    def __init__(self, n_rows: int):
        self.n_rows, self.done, self.started = n_rows, 0, time.monotonic()

    def projected_s(self) -> float:
        return (time.monotonic() - self.started) * self.n_rows / max(self.done, 1)

    def remaining_s(self) -> float:
        return max(0.0, self.projected_s() - (time.monotonic() - self.started))
