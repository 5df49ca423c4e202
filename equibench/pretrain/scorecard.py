"""The pretraining quality bar of one checkpoint, measured: ``equibench score``.

The bar has three parts, each a margin in accuracy points over a simple reference model:

1. scikit-learn's bundled datasets (:data:`~equibench.pretrain.BUNDLED_DATASETS`: iris, wine,
   breast_cancer, digits), 5-fold stratified CV accuracy (shuffled, ``random_state=0``): the
   checkpoint's classifier >= LogisticRegression on standardised inputs - 1 point, on each.
2. The <= 10-class tasks of an offline OpenML cache (fold i tests, the other folds train):
   the median accuracy over tasks >= KNN's (k=9, standardised) + 2 points, and the mean
   accuracy above KNN's.
3. The > 10-class tasks of the same cache: the mean accuracy >= LinearModel's
   (LogisticRegression on standardised inputs with one-hot categoricals, as TabZilla's).

One checkpoint is scored per call; its architecture is read from the file and its
classifier built by :func:`~equibench.classifier.classifier_for` (TabPFN* in an ECOC
ensemble above its class limit, as ``equibench evaluate`` does). Every model runs on
``threads`` threads with torch's deterministic algorithms, as an ``equibench evaluate``
cell does: KNN's answer on tied distances depends on the thread count.

:func:`score_checkpoint` returns a :class:`Scorecard`: the accuracy of every (dataset or
task, fold, method), the :class:`Criterion` results, and the tables as Markdown or a dict.
The pieces (:func:`bundled_scores`, :func:`openml_scores`, :func:`evaluate_criteria`) are
public so that tests and studies use the same arithmetic.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.compose import make_column_transformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from ..errors import InvalidInputError

__all__ = [
    "BUNDLED_FOLDS", "BUNDLED_REFERENCE", "Criterion", "LARGE_REFERENCE", "MODEL_LABELS", "OPENML_FOLDS",
    "SMALL_REFERENCE", "Scorecard", "bundled_scores", "evaluate_criteria", "load_tasks", "openml_scores",
    "reference_model", "score_checkpoint", "standardised",
]

#: Folds of the stratified CV on the bundled datasets.
BUNDLED_FOLDS = 5
#: The OpenML folds the bar is defined on.
OPENML_FOLDS = tuple(range(10))
#: Above this many classes a task belongs to the > 10-class part (LinearModel as reference).
MANY_CLASSES = 10
#: The reference model of each part.
BUNDLED_REFERENCE, SMALL_REFERENCE, LARGE_REFERENCE = "LogisticRegression", "KNN", "LinearModel"
#: The name a checkpoint's classifier has in the tables, by architecture.
MODEL_LABELS = {"equitabpfn": "EquiTabPFN", "tabpfn-star": "TabPFN*"}
#: The groups of the score frame: the bundled datasets and the two parts of the OpenML cache.
GROUPS = ("bundled", "<=10", ">10")
#: Columns of the score frame, one row per (group, task, fold, method).
COLUMNS = ("group", "task", "dataset", "fold", "method", "accuracy")
#: Margins are rounded to this many decimals (of a point) before they meet the threshold, so
#: that a margin that is exactly the threshold in exact arithmetic (e.g. 95% - 96% = -1 point)
#: meets it whatever the float rounding of the accuracies.
MARGIN_DECIMALS = 9

#: progress(done, total, what): called before each unit of work (one fold of one dataset or task).
Progress = Callable[[int, int, str], None]


def standardised(estimator, categorical: np.ndarray | None = None):
    """Impute, one-hot encode the ``categorical`` columns (a boolean mask), standardise the
    others, then ``estimator``."""
    if categorical is None or not np.asarray(categorical).any():
        return make_pipeline(SimpleImputer(), StandardScaler(), estimator)
    categorical = np.asarray(categorical, dtype=bool)
    columns = make_column_transformer(
        (make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")), categorical),
        (make_pipeline(SimpleImputer(), StandardScaler()), ~categorical),
        sparse_threshold=0.0,
    )
    return make_pipeline(columns, estimator)


def reference_model(name: str, categorical: np.ndarray | None = None):
    """The reference model ``name`` (:data:`BUNDLED_REFERENCE`, :data:`SMALL_REFERENCE` or
    :data:`LARGE_REFERENCE`), unfitted, with its standardising preprocessing."""
    if name == SMALL_REFERENCE:
        return standardised(KNeighborsClassifier(n_neighbors=9), categorical)
    if name in (BUNDLED_REFERENCE, LARGE_REFERENCE):
        return standardised(LogisticRegression(max_iter=2000), categorical)
    raise InvalidInputError(f"unknown reference model {name!r}; choose one of "
                            f"{[BUNDLED_REFERENCE, SMALL_REFERENCE, LARGE_REFERENCE]}")


def _accuracy(model, X_train, y_train, X_test, y_test) -> float:
    model.fit(X_train, y_train)
    return float((model.predict(X_test) == y_test).mean())


def _report(progress: Progress | None, done: int, total: int, what: str) -> None:
    if progress is not None:
        progress(done, total, what)


def bundled_scores(
    pfn_for: Callable[[int], object], label: str, datasets: Mapping[str, Callable] | None = None,
    progress: Progress | None = None, start: int = 0, total: int | None = None,
) -> pd.DataFrame:
    """Accuracy of the PFN (``pfn_for(n_classes)`` builds it, shown as ``label``) and of
    LogisticRegression on each fold of the 5-fold stratified CV of ``datasets`` (name ->
    scikit-learn loader; default :data:`~equibench.pretrain.BUNDLED_DATASETS`): the score frame's
    rows of group "bundled". ``progress`` counts from ``start`` up to ``total``."""
    from .validation import BUNDLED_DATASETS

    datasets = BUNDLED_DATASETS if datasets is None else datasets
    total = start + BUNDLED_FOLDS * len(datasets) if total is None else total
    splitter = StratifiedKFold(n_splits=BUNDLED_FOLDS, shuffle=True, random_state=0)
    rows, done = [], start
    for name, loader in datasets.items():
        X, y = loader(return_X_y=True)
        models = {label: pfn_for(len(np.unique(y))), BUNDLED_REFERENCE: reference_model(BUNDLED_REFERENCE)}
        for fold, (train, test) in enumerate(splitter.split(X, y)):
            _report(progress, done, total, f"{name} fold {fold}")
            for method, model in models.items():
                accuracy = _accuracy(clone(model), X[train], y[train], X[test], y[test])
                rows.append(("bundled", name, name, fold, method, accuracy))
            done += 1
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _task_folds(tasks: Mapping, folds: Iterable[int]) -> dict:
    """{task id: the folds of ``folds`` the task has}, tasks with none left out."""
    chosen = {task_id: [fold for fold in folds if fold < task.n_folds] for task_id, task in tasks.items()}
    return {task_id: task_folds for task_id, task_folds in chosen.items() if task_folds}


def openml_scores(
    pfn_for: Callable[[int], object], label: str, tasks: Mapping, folds: Iterable[int] = OPENML_FOLDS,
    progress: Progress | None = None, start: int = 0, total: int | None = None,
) -> pd.DataFrame:
    """Accuracy of the PFN (``pfn_for(n_classes)``, shown as ``label``) and of the reference
    (KNN up to 10 classes, LinearModel above) on each fold of each task of ``tasks`` (task id
    -> :class:`~equibench.tasks.task.Task`): test = fold i, train = the train and validation
    parts of ``task.split(i)``. Folds a task does not have are skipped."""
    task_folds = _task_folds(tasks, list(folds))
    total = start + sum(map(len, task_folds.values())) if total is None else total
    rows, done = [], start
    for task_id, chosen in task_folds.items():
        task = tasks[task_id]
        n_classes = len(np.unique(task.y))
        group, reference = (">10", LARGE_REFERENCE) if n_classes > MANY_CLASSES else ("<=10", SMALL_REFERENCE)
        models = {label: pfn_for(n_classes), reference: reference_model(reference, task.categorical)}
        for fold in chosen:
            _report(progress, done, total, f"task {task_id} ({task.name}) fold {fold}")
            train, validation, test = task.split(fold)
            train = np.concatenate([train, validation])
            for method, model in models.items():
                accuracy = _accuracy(clone(model), task.X.iloc[train], task.y[train], task.X.iloc[test], task.y[test])
                rows.append((group, str(task_id), task.name, fold, method, accuracy))
            done += 1
    return pd.DataFrame(rows, columns=list(COLUMNS))


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
        if measured is None or np.isnan(measured):
            return cls(name, None, threshold, None, reference, strict, note)
        margin = round(float(measured), MARGIN_DECIMALS)
        return cls(name, float(measured), threshold, bool(margin > threshold if strict else margin >= threshold),
                   reference, strict)

    @property
    def bar(self) -> str:
        """The threshold as the verdict writes it: ``>= -1.0``, ``> 0.0``."""
        return f"{'>' if self.strict else '>='} {self.threshold:+.1f}".replace("+0.0", "0.0")

    def line(self, model: str) -> str:
        """One line of the verdict."""
        head = f"{model} {self.name}"
        if self.measured is None:
            return f"{head}: not measured ({self.note or 'no scores'})"
        return (f"{head}: {self.measured:+.2f} points vs {self.reference} (bar {self.bar}): "
                f"{'met' if self.met else 'NOT met'}")

    def to_dict(self) -> dict:
        return {"name": self.name, "reference": self.reference, "measured": self.measured,
                "comparison": ">" if self.strict else ">=", "threshold": self.threshold, "met": self.met,
                **({"note": self.note} if self.note else {})}


def task_means(scores: pd.DataFrame, group: str) -> pd.DataFrame:
    """Mean accuracy over the folds of each dataset or task of ``group`` (rows: (task,
    dataset), columns: methods), in the order the tasks were scored."""
    part = scores[scores.group == group]
    if part.empty:
        return pd.DataFrame()
    table = part.groupby(["task", "dataset", "method"], sort=False).accuracy.mean().unstack("method")
    return table[list(dict.fromkeys(part.method))]


def evaluate_criteria(scores: pd.DataFrame, model: str, datasets: Iterable[str] | None = None,
                      openml_note: str = "no OpenML cache given") -> list[Criterion]:
    """The bar's criteria for the method ``model`` of the score frame ``scores``: one per
    bundled dataset (``datasets``, default those scored), then the <= 10-class median and
    mean against KNN and the > 10-class mean against LinearModel; a part without scores is
    "not measured" with ``openml_note`` (or a reason of its own) as the reason."""
    bundled = task_means(scores, "bundled")
    scored = [] if bundled.empty else list(bundled.index.get_level_values("task"))
    criteria = []
    for name in scored if datasets is None else datasets:
        row = bundled.xs(name, level="task").iloc[0] if name in scored else None
        gap = None if row is None else 100 * (row[model] - row[BUNDLED_REFERENCE])
        criteria.append(Criterion.judge(name, gap, -1.0, BUNDLED_REFERENCE, note="not scored"))
    small, large = task_means(scores, "<=10"), task_means(scores, ">10")
    note_small = openml_note if small.empty and large.empty else "the OpenML cache has no task of <= 10 classes"
    note_large = openml_note if small.empty and large.empty else "the OpenML cache has no task of > 10 classes"
    median = mean = None
    if not small.empty:
        median = 100 * (small[model].median() - small[SMALL_REFERENCE].median())
        mean = 100 * (small[model].mean() - small[SMALL_REFERENCE].mean())
    criteria.append(Criterion.judge("<=10-class median", median, 2.0, SMALL_REFERENCE, note=note_small))
    criteria.append(Criterion.judge("<=10-class mean", mean, 0.0, SMALL_REFERENCE, strict=True, note=note_small))
    mean = None if large.empty else 100 * (large[model].mean() - large[LARGE_REFERENCE].mean())
    criteria.append(Criterion.judge(">10-class mean", mean, 0.0, LARGE_REFERENCE, note=note_large))
    return criteria


def _fold_span(folds) -> str:
    folds = sorted(folds)
    if len(folds) > 1 and folds == list(range(folds[0], folds[-1] + 1)):
        return f"folds {folds[0]}-{folds[-1]}"
    return ("fold " if len(folds) == 1 else "folds ") + ", ".join(map(str, folds))


def _plain(value):
    """``value`` as JSON writes it (tuples as lists, other objects as strings)."""
    if isinstance(value, (tuple, list)):
        return [_plain(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


@dataclass
class Scorecard:
    """One checkpoint measured against the bar.

    ``scores`` has one row per (group, task, fold, method) with the accuracy as a fraction
    (:data:`COLUMNS`; group "bundled", "<=10" or ">10"; a bundled dataset's task is its name);
    ``criteria`` every criterion of the bar, measured or not; ``folds`` the OpenML folds
    scored (None without a cache); ``settings`` the classifier's parameters."""

    checkpoint: str
    arch: str
    scores: pd.DataFrame
    criteria: list[Criterion]
    folds: tuple[int, ...] | None = None
    openml_cache: str | None = None
    threads: int = 1
    settings: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def model(self) -> str:
        """The checkpoint's classifier as the tables name it: EquiTabPFN or TabPFN*."""
        return MODEL_LABELS.get(self.arch, self.arch)

    @property
    def measured(self) -> list[Criterion]:
        return [criterion for criterion in self.criteria if criterion.measured is not None]

    @property
    def met(self) -> bool:
        """Every measured criterion is met (and at least one was measured)."""
        return bool(self.measured) and all(criterion.met for criterion in self.measured)

    @property
    def complete(self) -> bool:
        """Every criterion was measured, on all the OpenML folds the bar is defined on."""
        return len(self.measured) == len(self.criteria) and tuple(sorted(self.folds or ())) == OPENML_FOLDS

    def verdict(self) -> str:
        """The outcome in one sentence."""
        measured, met = self.measured, [criterion for criterion in self.measured if criterion.met]
        if not measured:
            return "not measured: no criterion had scores"
        text = (f"{self.model} meets the bar" if self.met else f"{self.model} does NOT meet the bar") + \
            f": {len(met)} of {len(measured)} measured criteria met"
        missing = len(self.criteria) - len(measured)
        if missing:
            text += f"; {missing} not measured"
        if measured and self.folds is not None and tuple(sorted(self.folds)) != OPENML_FOLDS:
            text += f" (OpenML on {_fold_span(self.folds)} only; the bar is defined on all 10)"
        return text

    def bundled_table(self) -> pd.DataFrame:
        """Mean CV accuracy per bundled dataset (rows) and method (columns)."""
        table = task_means(self.scores, "bundled")
        return table.droplevel("dataset") if not table.empty else table

    def task_table(self, group: str) -> pd.DataFrame:
        """Mean accuracy over the folds per task of ``group`` ("<=10" or ">10")."""
        return task_means(self.scores, group)

    def to_dict(self) -> dict:
        """Everything as plain data (``--json``): accuracies as fractions, margins in points."""
        def summary(table: pd.DataFrame) -> dict:
            return {method: {"median": float(table[method].median()), "mean": float(table[method].mean())}
                    for method in table.columns}

        openml = {}
        for group in GROUPS[1:]:
            table = self.task_table(group)
            if table.empty:
                continue
            openml[group] = {
                "tasks": [{"task": task, "dataset": dataset, **{m: float(v) for m, v in row.items()}}
                          for (task, dataset), row in table.iterrows()],
                "summary": summary(table),
            }
        return {
            "checkpoint": self.checkpoint, "arch": self.arch, "model": self.model,
            "met": self.met, "complete": self.complete, "verdict": self.verdict(),
            "criteria": [criterion.to_dict() for criterion in self.criteria],
            "bundled": {name: {m: float(v) for m, v in row.items()} for name, row in self.bundled_table().iterrows()},
            "openml": openml,
            "openml_cache": self.openml_cache, "folds": None if self.folds is None else list(self.folds),
            "threads": self.threads, "settings": {k: _plain(v) for k, v in self.settings.items()},
            "seconds": self.seconds,
            "scores": [{k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
                       for row in self.scores.to_dict(orient="records")],
        }

    def to_markdown(self) -> str:
        """The tables and the verdict, as Markdown."""
        model = self.model
        settings = ", ".join(f"{k}={' '.join(map(str, v)) if isinstance(v, (tuple, list)) else v}"
                             for k, v in self.settings.items())
        lines = [f"# Quality bar of {self.checkpoint} ({model})", "",
                 f"Classifier settings: {settings or 'defaults'}; threads={self.threads}; {self.seconds:.0f} s.", ""]
        bundled = self.bundled_table()
        if not bundled.empty:
            lines += [f"### Bundled datasets ({BUNDLED_FOLDS}-fold stratified CV accuracy)", "",
                      f"| dataset | {model} | {BUNDLED_REFERENCE} | {model} - LR (points) |", "|---|---:|---:|---:|"]
            for name, row in bundled.iterrows():
                lines.append(f"| {name} | {100 * row[model]:.1f} | {100 * row[BUNDLED_REFERENCE]:.1f} | "
                             f"{100 * (row[model] - row[BUNDLED_REFERENCE]):+.1f} |")
            lines.append("")
        if self.folds is None:
            lines += ["### OpenML cache", "", "Not measured: no OpenML cache given, so the <=10-class and >10-class "
                      "criteria were not measured.", ""]
        for group, title in (("<=10", "<= 10-class"), (">10", "> 10-class")):
            table = self.task_table(group)
            if table.empty:
                continue
            methods = list(table.columns)
            lines += [f"### {title} tasks of the OpenML cache (mean accuracy over {_fold_span(self.folds)})", "",
                      "| task | dataset | " + " | ".join(methods) + " |", "|---:|---|" + "---:|" * len(methods)]
            for (task, dataset), row in table.iterrows():
                lines.append(f"| {task} | {dataset} | " + " | ".join(f"{100 * row[m]:.1f}" for m in methods) + " |")
            lines += ["", "| method | median accuracy | mean accuracy |", "|---|---:|---:|"]
            lines += [f"| {m} | {100 * table[m].median():.1f} | {100 * table[m].mean():.1f} |" for m in methods]
            lines.append("")
        lines += ["### The bar", ""]
        lines += [f"- {criterion.line(model)}" for criterion in self.criteria]
        lines += ["", f"Verdict: {self.verdict()}.", ""]
        return "\n".join(lines)


def _check_folds(folds) -> tuple[int, ...]:
    try:
        folds = tuple(dict.fromkeys(int(fold) for fold in folds))
    except (TypeError, ValueError):
        raise InvalidInputError(f"folds must be integers in 0..{len(OPENML_FOLDS) - 1}, got {folds!r}") from None
    if not folds:
        raise InvalidInputError(f"folds is empty; give some of 0..{len(OPENML_FOLDS) - 1}")
    wrong = [fold for fold in folds if fold not in OPENML_FOLDS]
    if wrong:
        raise InvalidInputError(f"folds must be in 0..{len(OPENML_FOLDS) - 1} (an OpenML task has 10), got {wrong}")
    return folds


def load_tasks(openml_cache: str | os.PathLike, task_ids: Iterable | None = None) -> dict:
    """The tasks (task id -> :class:`~equibench.tasks.task.Task`) of the OpenML cache folder
    ``openml_cache``, all of them or ``task_ids``, loaded through a temporary writable copy
    (the folder is only read)."""
    from ..tasks.cache_check import cached_task_ids
    from ..tasks.openml import load_task, working_cache

    cache = Path(openml_cache)
    if not cache.is_dir():
        raise InvalidInputError(f"openml_cache {str(cache)!r} is not a folder; pass an OpenML cache folder "
                                "(one that `equibench download` filled)")
    if not (cache / "org").is_dir():
        raise InvalidInputError(f"openml_cache {str(cache)!r} is not an OpenML cache (no org/ folder inside); "
                                "point at the folder that contains org/openml/www/...")
    available = cached_task_ids(cache)
    if not available:
        raise InvalidInputError(f"openml_cache {str(cache)!r} holds no task; fill it with `equibench download`")
    chosen = available if task_ids is None else [str(task_id) for task_id in task_ids]
    missing = sorted(set(chosen) - set(available), key=str)
    if missing:
        raise InvalidInputError(f"openml_cache {str(cache)!r} has no task {', '.join(missing)}")
    with tempfile.TemporaryDirectory(prefix="equibench-score-") as work_dir:
        working = working_cache(cache, work_dir)
        return {task_id: load_task(int(task_id), working) for task_id in chosen}


def score_checkpoint(
    checkpoint: str | os.PathLike,
    openml_cache: str | os.PathLike | None = None,
    folds: Iterable[int] = OPENML_FOLDS,
    threads: int = 1,
    progress: Progress | None = None,
    *,
    datasets: Mapping[str, Callable] | None = None,
    task_ids: Iterable | None = None,
    **classifier_settings,
) -> Scorecard:
    """Measure ``checkpoint`` (a file, or a packaged name such as ``"equitabpfn-small"``) against the quality bar.

    The bundled datasets (``datasets``, name -> scikit-learn loader; default
    :data:`~equibench.pretrain.BUNDLED_DATASETS`) are always scored; the OpenML criteria only
    with ``openml_cache`` (a folder in openml's layout, only read), on its tasks (or
    ``task_ids``) and ``folds``. Every model runs on ``threads`` threads.
    ``classifier_settings`` go to :func:`~equibench.classifier.classifier_for` (default
    ``random_state=0``); ``progress(done, total, what)`` is called before each fold."""
    from ..classifier import classifier_for
    from ..classifier.checkpoints import resolve_checkpoint
    from ..evaluate.cells import reproducible_cell
    from ..model import load_checkpoint

    started = time.perf_counter()
    if not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or threads < 1:
        raise InvalidInputError(f"threads must be a positive number, got {threads!r}")
    folds = _check_folds(folds) if openml_cache is not None else None
    named = str(checkpoint)  # as the tables name it
    checkpoint = resolve_checkpoint(checkpoint)  # a packaged name or a path
    _, card = load_checkpoint(checkpoint)  # a clear error for a missing or broken file, before any work
    label = MODEL_LABELS.get(card.arch, card.arch)
    tasks = {} if openml_cache is None else load_tasks(openml_cache, task_ids)
    if tasks and not _task_folds(tasks, folds):
        raise InvalidInputError(f"no task of openml_cache has {_fold_span(folds)}")
    settings = {"random_state": 0, **classifier_settings}

    def pfn_for(n_classes: int):
        return classifier_for(checkpoint, n_classes=n_classes, **settings)

    from .validation import BUNDLED_DATASETS

    datasets = BUNDLED_DATASETS if datasets is None else datasets
    bundled_units = BUNDLED_FOLDS * len(datasets)
    total = bundled_units + sum(map(len, _task_folds(tasks, folds or ()).values()))
    with reproducible_cell(threads):
        frames = [bundled_scores(pfn_for, label, datasets, progress, 0, total)]
        if tasks:
            frames.append(openml_scores(pfn_for, label, tasks, folds, progress, bundled_units, total))
    _report(progress, total, total, "done")
    scores = pd.concat(frames, ignore_index=True)
    criteria = evaluate_criteria(scores, label, datasets=list(datasets))
    return Scorecard(
        checkpoint=named, arch=card.arch, scores=scores, criteria=criteria, folds=folds,
        openml_cache=None if openml_cache is None else str(openml_cache), threads=threads,
        settings=_classifier_settings(pfn_for(2), settings), seconds=time.perf_counter() - started,
    )


def _classifier_settings(classifier, given: dict) -> dict:
    """The settings the scores depend on: the classifier's own parameters (an ECOC
    wrapper's estimator's), or what was given when it has none."""
    inner = getattr(classifier, "estimator", classifier)
    try:
        params = inner.get_params(deep=False)
    except AttributeError:
        return dict(given)
    keep = ("n_estimators", "feature_transforms", "categorical_encodings", "device", "inference_precision",
            "softmax_temperature", "max_train_rows", "random_state")
    return {name: params[name] for name in keep if name in params}
