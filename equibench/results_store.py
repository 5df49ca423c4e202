"""The on-disk results of an evaluation run, safe against a kill at any moment.

    DIR/cells/<key>.json        one finished cell's row (written last: the commit point)
    DIR/probas/<key>.npz        its test probabilities (n_test, K), labels and row indices
    DIR/tracebacks/<key>.txt    the traceback of a failed cell
    DIR/results.csv             all rows, rebuilt from cells/ (a snapshot, replaced atomically)
    DIR/manifest.json           the run settings and one entry per invocation

Every file is written to a temporary name and renamed, so a reader never sees a partial
file and a killed run leaves at most stray ``.tmp`` files, removed on the next start. A cell
is done when its JSON exists; rows are keyed by cell, so rerunning never duplicates one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from .model.checkpoint import atomic_write

COLUMNS = [
    "suite", "task_id", "dataset", "fold", "method", "variant", "status", "reason",
    "accuracy", "auc", "f1", "log_loss", "time_fit_s", "time_predict_s",
    "n_train", "n_val", "n_test", "n_features", "n_features_used", "n_classes", "seed", "threads", "proba_file", "traceback_file",
]
FINISHED = ("ok", "skipped")  # failed cells are run again by the next invocation


def atomic_write_text(path: Path, text: str) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_text(text))


class ResultsStore:
    def __init__(self, out_dir: str | os.PathLike, table_interval_s: float = 10.0):
        self.root = Path(out_dir)
        for stray in self.root.glob("**/.*.tmp"):  # left by a killed run
            stray.unlink()
        self._rows = {
            path.stem: json.loads(path.read_text()) for path in sorted((self.root / "cells").glob("*.json"))
        }
        self.table_interval_s = table_interval_s
        self._table_written = 0.0

    def rows(self) -> list[dict]:
        return list(self._rows.values())

    def finished_keys(self) -> set[str]:
        return {key for key, row in self._rows.items() if row["status"] in FINISHED}

    def write(self, key: str, row: dict, proba: np.ndarray | None = None, arrays: dict | None = None,
              traceback: str | None = None) -> None:
        """Store one cell: its probabilities and traceback first, the row last."""
        row = {**row, "key": key, "proba_file": "", "traceback_file": ""}
        if proba is not None:
            relative = f"probas/{key}.npz"
            atomic_write(self.root / relative, lambda tmp: _save_npz(tmp, proba=proba, **(arrays or {})))
            row["proba_file"] = relative
        if traceback:
            relative = f"tracebacks/{key}.txt"
            atomic_write_text(self.root / relative, traceback)
            row["traceback_file"] = relative
        atomic_write_text(self.root / "cells" / f"{key}.json", json.dumps(row) + "\n")
        self._rows[key] = row

    def forget_method(self, method: str) -> None:
        """Delete every stored cell of ``method`` (to run them again with new settings)."""
        for key in [key for key, row in self._rows.items() if row["method"] == method]:
            row = self._rows.pop(key)
            (self.root / "cells" / f"{key}.json").unlink()
            for relative in (row["proba_file"], row["traceback_file"]):
                if relative:
                    (self.root / relative).unlink(missing_ok=True)

    def table(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.rows(), columns=["key", *COLUMNS])
        return frame.drop(columns="key").sort_values(["suite", "task_id", "fold", "method", "variant"], kind="stable")

    def write_table(self) -> Path:
        table = self.table()
        self._table_written = time.monotonic()
        return atomic_write(self.root / "results.csv", lambda tmp: table.to_csv(tmp, index=False))

    def write_table_if_due(self) -> None:
        """Refresh results.csv at most every ``table_interval_s`` seconds (cells/ is the truth)."""
        if time.monotonic() - self._table_written >= self.table_interval_s:
            self.write_table()


def _save_npz(path: Path, **arrays) -> None:
    with path.open("wb") as handle:  # np.savez would append ".npz" to a bare path
        np.savez_compressed(handle, **arrays)
