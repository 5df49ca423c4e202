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
    started, done, shown = time.monotonic(), 0, {}

    def advance(rows: int) -> None:
        nonlocal done
        done += rows
        if "bar" in shown:
            shown["bar"].advance(shown["task"], rows)
            return
        projected = (time.monotonic() - started) * n_rows / max(done, 1)
        if _shown.get() and done < n_rows and projected > PROGRESS_AFTER_S:
            bar = Progress(TextColumn("predict"), BarColumn(), MofNCompleteColumn(), TextColumn("test rows"),
                           TimeRemainingColumn(), console=Console(stderr=True), transient=True, name="predict")
            bar.start()
            shown.update(bar=bar, task=bar.add_task("test rows", total=n_rows, completed=done))

    try:
        yield advance
    finally:
        if "bar" in shown:
            shown["bar"].stop()
