"""One checkpoint measured against the bar (:class:`Scorecard`), as JSON data and as Markdown.

The JSON (:meth:`Scorecard.to_dict`, read back by :meth:`Scorecard.from_dict`) is the record:
the packaged checkpoints carry theirs beside the ``.pt`` file, and ``equibench info`` reads it.
The Markdown (:meth:`Scorecard.to_markdown`) is for people; it is made from the same data.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pandas as pd

from ..baselines.registry import method_spec
from ..tables import markdown_escape, markdown_table
from .bar import BUNDLED_FOLDS, BUNDLED_REFERENCE, COLUMNS, OPENML_FOLDS, Criterion, task_means

#: The version of the JSON layout of :meth:`Scorecard.to_dict`.
SCORECARD_FORMAT = 1


def fold_span(folds) -> str:
    """``folds 0-9``, ``fold 3``, ``folds 0, 2``."""
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


def _points(fraction: float) -> str:
    return f"{100 * fraction:.1f}"


@dataclass
class Scorecard:
    """One checkpoint measured against the bar.

    ``scores`` has one row per (group, task, fold, method) with the accuracy as a fraction
    (:data:`~.bar.COLUMNS`; group "bundled", "<=10" or ">10"; a bundled dataset's task is its
    name); ``criteria`` every criterion of the bar, measured or not; ``folds`` the OpenML folds
    scored (None without a cache); ``settings`` the classifier's parameters. The rest says how
    it was made: the checkpoint file's ``sha256``, the ``command`` (when a command made it),
    ``date`` (UTC, ISO 8601), ``machine``, ``seconds`` and the ``equibench`` version."""

    checkpoint: str
    arch: str
    scores: pd.DataFrame
    criteria: list[Criterion]
    folds: tuple[int, ...] | None = None
    openml_cache: str | None = None
    threads: int = 1
    settings: dict = field(default_factory=dict)
    sha256: str = ""
    command: str | None = None
    date: str = ""
    machine: str = ""
    seconds: float = 0.0
    equibench: str = ""

    @property
    def model(self) -> str:
        """The checkpoint's classifier as the tables name it: EquiTabPFN or TabPFN* (the registry's label)."""
        return method_spec(self.arch).plain_label

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
        if self.folds is not None and tuple(sorted(self.folds)) != OPENML_FOLDS:
            text += f" (OpenML on {fold_span(self.folds)} only; the bar is defined on all 10)"
        return text

    def bundled_table(self) -> pd.DataFrame:
        """Mean CV accuracy per bundled dataset (rows) and method (columns)."""
        return task_means(self.scores, "bundled").droplevel("dataset")

    def to_dict(self) -> dict:
        """Everything as plain data (the JSON file, ``--json``): accuracies as fractions, margins in points."""
        return {
            "format": SCORECARD_FORMAT,
            "checkpoint": self.checkpoint, "sha256": self.sha256, "arch": self.arch, "model": self.model,
            "met": self.met, "complete": self.complete, "verdict": self.verdict(),
            "criteria": [criterion.to_dict() for criterion in self.criteria],
            "settings": {name: _plain(value) for name, value in self.settings.items()}, "threads": self.threads,
            "openml_cache": self.openml_cache, "folds": None if self.folds is None else list(self.folds),
            "command": self.command, "date": self.date, "machine": self.machine, "seconds": self.seconds,
            "equibench": self.equibench,
            "scores": self.scores.to_dict(orient="records"),  # pandas gives Python scalars, as JSON needs
        }

    @classmethod
    def from_dict(cls, data: dict) -> Scorecard:
        """The scorecard :meth:`to_dict` wrote."""
        plain = {f.name: data[f.name] for f in fields(cls) if f.name not in ("scores", "criteria", "folds")}
        return cls(**plain, scores=pd.DataFrame(data["scores"], columns=list(COLUMNS)),
                   criteria=[Criterion.from_dict(criterion) for criterion in data["criteria"]],
                   folds=None if data["folds"] is None else tuple(data["folds"]))

    def to_markdown(self) -> str:
        """How it was made, the tables and the verdict, as Markdown."""
        model = self.model
        settings = ", ".join(f"{name}={' '.join(map(str, value)) if isinstance(value, (tuple, list)) else value}"
                             for name, value in self.settings.items())
        lines = [f"# Quality bar of {markdown_escape(self.checkpoint)} ({markdown_escape(model)})", ""]
        if self.command:
            lines += [f"Command: `{self.command}`", ""]
        lines += [f"Scored {self.date} on {self.machine} in {self.seconds:.0f} s (equibench {self.equibench}); "
                  f"checkpoint sha256 {self.sha256}.", "",
                  f"Classifier settings: {settings or 'defaults'}; threads={self.threads}.", ""]
        bundled = self.bundled_table()
        if not bundled.empty:
            display = pd.DataFrame({
                "dataset": bundled.index, model: bundled[model].map(_points),
                BUNDLED_REFERENCE: bundled[BUNDLED_REFERENCE].map(_points),
                f"{model} - LR (points)": (100 * (bundled[model] - bundled[BUNDLED_REFERENCE])).map("{:+.1f}".format)})
            lines += [f"### Bundled datasets ({BUNDLED_FOLDS}-fold stratified CV accuracy)", "", markdown_table(display)]
        if self.folds is None:
            lines += ["### OpenML cache", "", "Not measured: no OpenML cache given, so the <=10-class and >10-class "
                      "criteria were not measured.", ""]
        else:
            n_tasks = self.scores[self.scores.group != "bundled"].task.nunique()
            lines += [f"OpenML cache: {markdown_escape(str(self.openml_cache))} ({n_tasks} tasks).", ""]
        for group, title in (("<=10", "<= 10-class"), (">10", "> 10-class")):
            table = task_means(self.scores, group)
            if table.empty:
                continue
            tasks = table.reset_index()
            tasks[table.columns] = tasks[table.columns].map(_points)
            summary = pd.DataFrame({"method": table.columns, "median accuracy": table.median().map(_points).values,
                                    "mean accuracy": table.mean().map(_points).values})
            lines += [f"### {title} tasks of the OpenML cache (mean accuracy over {fold_span(self.folds)})", "",
                      markdown_table(tasks), markdown_table(summary)]
        lines += ["### The bar", ""]
        lines += [f"- {markdown_escape(model)} {criterion.line()}" for criterion in self.criteria]
        lines += ["", f"Verdict: {markdown_escape(self.verdict())}.", ""]
        return "\n".join(lines)
