"""What a run planned and did: :class:`EvaluateSummary`, per method counts and mean accuracy,
the reasons of skipped and failed cells, and the stored rows of the run's cells."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .cells import Cell
from .results_store import ResultsStore, results_table


@dataclass(repr=False)
class EvaluateSummary:
    """What :func:`evaluate` (or :func:`evaluate_frame`) planned and did in ``out_dir``.

    Attributes:
        out_dir: the results folder (``results.csv``, ``cells/``, ``probas/``, ``manifest.json``).
        suite: the suite's name.
        cells: every cell of the run's selection (tasks x folds x methods x variants).
        pending: the cells that were not finished when the call began: those it ran (or, dry,
            would run), and those of missing tasks, which it could not.
        counts: status (``ok``, ``skipped``, ``failed``) -> cells written by this call.
        missing: task id -> why the task is not here at all (not in the OpenML cache, and
            the server could not give it): its cells were not run and no row was written.
        task_errors: task id -> why a task the cache holds could not be loaded (a damaged
            file, named): its cells were written as failed rows.
        damaged: cell key -> why its stored files were unusable (the cell was run again).
        rows: cell key -> the stored row of each cell of ``cells`` that has one, after the call.
        next_step: what brings the missing tasks (None when none is missing): the library's step.

    :meth:`methods` gives per method the ok/skipped/failed counts and the mean accuracy,
    :meth:`table` the rows as a pandas frame; ``repr`` is a one-line summary."""

    out_dir: Path
    cells: list[Cell]
    pending: list[Cell]
    counts: Counter  # status -> cells written by this invocation
    task_errors: dict[str, str]  # task id -> why a task the cache holds could not be loaded (failed rows)
    damaged: dict[str, str] = dataclasses.field(default_factory=dict)  # cell key -> why its stored files are unusable
    missing: dict[str, str] = dataclasses.field(default_factory=dict)  # task id -> why it is not here (no rows)
    rows: dict[str, dict] = dataclasses.field(default_factory=dict)  # cell key -> stored row, after the call
    suite: str = ""
    next_step: str | None = None  # what brings the missing tasks, when some are
    missing_groups: list[str] = dataclasses.field(default_factory=list)  # one line per cause of missing tasks

    @property
    def missing_cells(self) -> list[Cell]:
        """The pending cells not run because their task is missing."""
        return [cell for cell in self.pending if cell.task_id in self.missing]

    def methods(self) -> dict[str, dict]:
        """Per method (``method variant`` where a method has several variants), in run order:
        ``ok``, ``skipped``, ``failed``, ``missing`` (cells of missing tasks without a row),
        ``pending`` (not run yet: a dry or interrupted call) and ``accuracy`` (mean over the
        ok cells, None without any)."""
        variants = Counter(method for method, _ in {(cell.method, cell.variant) for cell in self.cells})
        several = {method for method, count in variants.items() if count > 1}
        stats: dict[str, dict] = {}
        for cell in self.cells:
            name = f"{cell.method} {cell.variant}" if cell.method in several else cell.method
            entry = stats.setdefault(name, {"ok": 0, "skipped": 0, "failed": 0, "missing": 0, "pending": 0,
                                            "accuracy": []})
            row = self.rows.get(cell.key)
            status = row["status"] if row is not None and row["status"] in ("ok", "skipped") else (
                "missing" if cell.task_id in self.missing else row["status"] if row is not None else "pending")
            entry[status] += 1
            if status == "ok" and row.get("accuracy") is not None:
                entry["accuracy"].append(float(row["accuracy"]))
        for entry in stats.values():
            values = entry["accuracy"]
            entry["accuracy"] = sum(values) / len(values) if values else None
        return stats

    def reasons(self, status: str) -> list[tuple[list[str], int, str]]:
        """(methods, cells, reason) for each distinct reason of the stored cells of ``status``
        (``skipped`` or ``failed``), most cells first."""
        groups: dict[str, tuple[dict, list]] = {}
        for cell in self.cells:
            row = self.rows.get(cell.key)
            if row is not None and row["status"] == status:
                methods, cells = groups.setdefault(str(row.get("reason", "")), ({}, []))
                methods[cell.method] = None
                cells.append(cell)
        return sorted(((list(methods), len(cells), reason) for reason, (methods, cells) in groups.items()),
                      key=lambda group: -group[1])

    def table(self):
        """The stored rows of the run's cells as a pandas frame (the columns of results.csv)."""
        return results_table(list(self.rows.values()))

    def __repr__(self) -> str:
        written = ", ".join(f"{status}={n}" for status, n in sorted(self.counts.items())) or "nothing"
        statuses = Counter(row["status"] for row in self.rows.values())
        stored = ", ".join(f"{status}={statuses[status]}" for status in ("ok", "skipped", "failed"))
        methods = list(dict.fromkeys(cell.method for cell in self.cells))
        missing = f", missing tasks={len(self.missing)}" if self.missing else ""
        return (f"<EvaluateSummary {self.suite or 'run'!s}: {len(self.cells)} cells ({stored}{missing}); "
                f"this call wrote {written}; methods {', '.join(methods)}; in {str(self.out_dir)!r}>")


def stored_rows(store: ResultsStore, cells: list[Cell]) -> dict[str, dict]:
    """Cell key -> the stored row of each of ``cells`` that has one."""
    rows = {row["key"]: row for row in store.rows() if "key" in row}
    return {cell.key: rows[cell.key] for cell in cells if cell.key in rows}

