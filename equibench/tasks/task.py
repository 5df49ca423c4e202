"""A classification task with its cross-validation folds, and the built-in demo tasks.

For fold ``i`` the test part is fold ``i``, the validation part fold ``i + 1`` (cyclically)
and the train part the remaining folds (TabZilla's protocol).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn import datasets
from sklearn.model_selection import StratifiedKFold

from ..errors import InvalidInputError


@dataclass(frozen=True, eq=False)  # compared and hashed by identity: workers cache folds per task object
class Task:
    task_id: str  # OpenML task id ("5") or "demo-<name>"
    name: str
    X: pd.DataFrame  # (n_rows, F) raw features; categorical columns as pandas categories or objects
    y: np.ndarray  # (n_rows,) raw labels
    categorical: np.ndarray  # (F,) bool
    test_folds: np.ndarray  # (n_rows,) int: the fold in which each row is a test row

    @property
    def n_folds(self) -> int:
        return int(self.test_folds.max()) + 1

    @property
    def classes(self) -> np.ndarray:
        """The task's full, sorted class list: the columns of every probability matrix."""
        return np.unique(self.y)

    def encoded_labels(self) -> np.ndarray:
        """Labels as positions in :attr:`classes` (0..K-1)."""
        return np.searchsorted(self.classes, self.y)

    def split(self, fold: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(train, validation, test) row indices of ``fold``."""
        if not 0 <= fold < self.n_folds:
            raise InvalidInputError(f"task {self.task_id} has folds 0..{self.n_folds - 1}, got fold {fold}")
        validation_fold = (fold + 1) % self.n_folds
        test = np.flatnonzero(self.test_folds == fold)
        validation = np.flatnonzero(self.test_folds == validation_fold)
        train = np.flatnonzero((self.test_folds != fold) & (self.test_folds != validation_fold))
        return train, validation, test


def stratified_folds(y: np.ndarray, n_folds: int = 10, seed: int = 0) -> np.ndarray:
    """(n_rows,) fold of each row from a seeded, shuffled StratifiedKFold."""
    folds = np.full(len(y), -1)
    splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    for fold, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
        folds[test] = fold
    return folds


def _bundled(loader) -> tuple[pd.DataFrame, np.ndarray]:
    data = loader(as_frame=True)
    return data.data, np.asarray(data.target)


def _synthetic(n_classes: int, n_rows: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """A seeded synthetic task with ``n_classes`` classes: 20 features (8 informative), two of
    them turned into categoricals, 2% of the numeric cells missing."""
    X, y = datasets.make_classification(
        n_samples=n_rows, n_features=20, n_informative=8, n_redundant=4, n_classes=n_classes,
        n_clusters_per_class=1, class_sep=1.5, random_state=seed,
    )
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])
    for column in ("x18", "x19"):
        frame[column] = pd.Categorical(pd.qcut(frame[column], 5, labels=list("abcde")))
    numeric = frame.columns[:18]
    holes = rng.random((n_rows, len(numeric))) < 0.02
    frame[numeric] = frame[numeric].mask(holes)
    return frame, np.array([f"class-{label:02d}" for label in y])


#: name -> (loader of (X, y)); all offline and deterministic.
DEMO_TASKS = {
    "iris": lambda: _bundled(datasets.load_iris),
    "wine": lambda: _bundled(datasets.load_wine),
    "breast_cancer": lambda: _bundled(datasets.load_breast_cancer),
    "digits": lambda: _bundled(datasets.load_digits),
    "synthetic-15": lambda: _synthetic(15, 1500, seed=15),
    "synthetic-30": lambda: _synthetic(30, 3000, seed=30),
}


def demo_task(name: str) -> Task:
    """A built-in demo task with stratified, seeded 10 folds."""
    try:
        X, y = DEMO_TASKS[name]()
    except KeyError:
        raise InvalidInputError(f"unknown demo task {name!r}; choose from {', '.join(DEMO_TASKS)}") from None
    categorical = np.array([isinstance(X[c].dtype, pd.CategoricalDtype) for c in X.columns])
    return Task(
        task_id=f"demo-{name}", name=name, X=X.reset_index(drop=True), y=y,
        categorical=categorical, test_folds=stratified_folds(y),
    )
