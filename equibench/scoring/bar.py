"""The pretraining quality bar: its parts, reference models, thresholds and criteria.

The bar has three parts, each a margin in accuracy points over a simple reference model:

1. scikit-learn's bundled datasets (iris, wine, breast_cancer, digits), 5-fold stratified CV
   accuracy (shuffled, ``random_state=0``): the checkpoint's classifier >= LogisticRegression
   - 1 point, on each.
2. The <= 10-class tasks of an offline OpenML cache (fold i tests, the other folds train):
   the median accuracy over tasks >= KNN's + 2 points, and the mean accuracy above KNN's.
3. The > 10-class tasks of the same cache: the mean accuracy >= LinearModel's.

The reference models are defined in :mod:`.references`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pandas only through the frames given: `equibench info` reads criteria without it
    import pandas as pd

#: Folds of the stratified CV on the bundled datasets.
BUNDLED_FOLDS = 5
#: The OpenML folds the bar is defined on.
OPENML_FOLDS = tuple(range(10))
#: Above this many classes a task belongs to the > 10-class part (LinearModel as reference).
MANY_CLASSES = 10
#: The reference model of each part.
BUNDLED_REFERENCE, SMALL_REFERENCE, LARGE_REFERENCE = "LogisticRegression", "KNN", "LinearModel"
#: Columns of the score frame, one row per (group, task, fold, method).
COLUMNS = ("group", "task", "dataset", "fold", "method", "accuracy")
#: Margins are rounded to this many decimals (of a point) before they meet the threshold, so
#: that a margin that is exactly the threshold in exact arithmetic (e.g. 95% - 96% = -1 point)
#: meets it whatever the float rounding of the accuracies.
MARGIN_DECIMALS = 9


@dataclass(frozen=True)
class Criterion:
    """One criterion of the bar: ``measured`` is the model's margin over ``reference`` in
    accuracy points, ``met`` whether it reaches ``threshold`` (``>`` when ``strict``, else
    ``>=``); both None when it was not measured (``note`` says why)."""

    name: str
    measured: float | None
    threshold: float
    met: bool | None
    reference: str = ""
    strict: bool = False
    note: str = ""

    @classmethod
    def judge(cls, name: str, measured: float | None, threshold: float, reference: str, strict: bool = False,
              note: str = "") -> Criterion:
        """The criterion with ``met`` decided from ``measured`` (see :data:`MARGIN_DECIMALS`)."""
        if measured is None or math.isnan(measured):
            return cls(name, None, threshold, None, reference, strict, note)
        margin = round(float(measured), MARGIN_DECIMALS)
        return cls(name, float(measured), threshold, bool(margin > threshold if strict else margin >= threshold),
                   reference, strict)

    @property
    def bar(self) -> str:
        """The threshold as the verdict writes it: ``>= -1.0``, ``> 0.0``."""
        return f"{'>' if self.strict else '>='} {self.threshold:+.1f}".replace("+0.0", "0.0")

    def line(self) -> str:
        """The criterion's result in words: ``iris: +0.61 points vs LogisticRegression (bar >= -1.0): met``."""
        if self.measured is None:
            return f"{self.name}: not measured ({self.note or 'no scores'})"
        return (f"{self.name}: {self.measured:+.2f} points vs {self.reference} (bar {self.bar}): "
                f"{'met' if self.met else 'NOT met'}")

    def to_dict(self) -> dict:
        return {"name": self.name, "reference": self.reference, "measured": self.measured,
                "comparison": ">" if self.strict else ">=", "threshold": self.threshold, "met": self.met,
                **({"note": self.note} if self.note else {})}

    @classmethod
    def from_dict(cls, data: dict) -> Criterion:
        """The criterion :meth:`to_dict` wrote."""
        return cls(data["name"], data["measured"], data["threshold"], data["met"], data["reference"],
                   data["comparison"] == ">", data.get("note", ""))


def task_means(scores: pd.DataFrame, group: str) -> pd.DataFrame:
    """Mean accuracy over the folds of each dataset or task of ``group`` (rows: (task,
    dataset), columns: methods), in the order the tasks were scored."""
    part = scores[scores.group == group]
    table = part.groupby(["task", "dataset", "method"], sort=False).accuracy.mean().unstack("method")
    return table[list(dict.fromkeys(part.method))]


def evaluate_criteria(scores: pd.DataFrame, model: str, datasets: Iterable[str] | None = None) -> list[Criterion]:
    """The bar's criteria for the method ``model`` of the score frame ``scores``: one per
    bundled dataset (``datasets``, default those scored), then the <= 10-class median and
    mean against KNN and the > 10-class mean against LinearModel; a part without scores is
    "not measured", saying why."""
    bundled = task_means(scores, "bundled").droplevel("dataset")  # a bundled dataset's task is its name
    criteria = []
    for name in bundled.index if datasets is None else datasets:
        gap = 100 * (bundled.at[name, model] - bundled.at[name, BUNDLED_REFERENCE]) if name in bundled.index else None
        criteria.append(Criterion.judge(name, gap, -1.0, BUNDLED_REFERENCE, note="not scored"))
    small, large = task_means(scores, "<=10"), task_means(scores, ">10")
    note = "no OpenML cache given" if small.empty and large.empty else "the OpenML cache has no task of {} classes"
    note_small, note_large = note.format("<= 10"), note.format("> 10")
    median = mean = None
    if not small.empty:
        median = 100 * (small[model].median() - small[SMALL_REFERENCE].median())
        mean = 100 * (small[model].mean() - small[SMALL_REFERENCE].mean())
    criteria.append(Criterion.judge("<=10-class median", median, 2.0, SMALL_REFERENCE, note=note_small))
    criteria.append(Criterion.judge("<=10-class mean", mean, 0.0, SMALL_REFERENCE, strict=True, note=note_small))
    mean = None if large.empty else 100 * (large[model].mean() - large[LARGE_REFERENCE].mean())
    criteria.append(Criterion.judge(">10-class mean", mean, 0.0, LARGE_REFERENCE, note=note_large))
    return criteria
