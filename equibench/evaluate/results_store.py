"""The on-disk results of an evaluation run, safe against a kill at any moment.

    DIR/cells/<key>.json        one finished cell's row (written last: the commit point)
    DIR/probas/<key>.npz        its test probabilities (n_test, K), labels and row indices
    DIR/tracebacks/<key>.txt    the traceback of a failed cell
    DIR/results.csv             all rows, rebuilt from cells/ (a snapshot, replaced atomically)
    DIR/manifest.json           the run settings and one entry per invocation

Every file is written to a temporary name and renamed, so a reader never sees a partial
file and a killed run leaves at most stray ``.tmp`` files of the store's own naming, removed
by the next writer (which holds the folder's lock, see outdir_lock). A cell is done when its
JSON exists and its probabilities file still has the recorded SHA-256; rows are keyed by cell,
so rerunning never duplicates one.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic_files import atomic_write, atomic_write_text
from ..errors import InvalidInputError

COLUMNS = [
    "suite", "task_id", "dataset", "fold", "method", "variant", "status", "reason",
    "accuracy", "auc", "f1", "log_loss", "time_fit_s", "time_predict_s",
    "n_train", "n_val", "n_test", "n_features", "n_features_used", "n_classes", "seed", "threads", "proba_file", "traceback_file",
    "diagnostics",  # the method's (``Method.diagnostics``): a mapping in a cell, JSON text in results.csv
]
FINISHED = ("ok", "skipped")  # failed cells are run again by the next invocation
REQUIRED_KEYS = ("suite", "task_id", "fold", "method", "variant", "status")
STATUSES = ("ok", "skipped", "failed")
TEXT_KEYS = ("suite", "task_id", "method", "variant", "dataset", "reason", "proba_file", "traceback_file",
             "proba_sha256")
NUMBER_KEYS = ("accuracy", "auc", "f1", "log_loss", "time_fit_s", "time_predict_s", "n_train", "n_val", "n_test",
               "n_features", "n_features_used", "n_classes", "seed", "threads")
OK_NUMBERS = ("accuracy", "time_fit_s", "time_predict_s")  # what every ok cell has, finite
#: folder -> the names of the files the store writes there (temporary copies: ".<name>.XXXXXXXX.tmp")
_OWN_FILES = {"": r"results\.csv|manifest\.json", "cells": r"[^.].*\.json", "probas": r".+\.npz",
              "tracebacks": r".+\.txt"}
_TEMPORARY = re.compile(r"^\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp$")


class ResultsStore:
    """The cells of ``out_dir``, read at construction (only reads: a dry run needs no write
    access). Cells whose files are damaged are left out and listed in ``damaged`` (key ->
    why), so they run again."""

    def __init__(self, out_dir: str | os.PathLike, table_interval_s: float = 10.0):
        self.root = Path(out_dir)
        self._rows, self.damaged = read_cells(self.root)
        self.table_interval_s = table_interval_s
        self._table_written = 0.0

    def remove_stray_temporaries(self) -> list[Path]:
        """Delete the temporary files a killed writer of this store left in its own folders
        (only names the store itself makes; call it while holding the folder's lock)."""
        removed = []
        for folder, names in _OWN_FILES.items():
            for path in (self.root / folder).glob(".*.tmp"):  # none where the folder is not (yet) there
                match = _TEMPORARY.match(path.name)
                if match and re.fullmatch(names, match["name"]) and path.is_file():
                    path.unlink()
                    removed.append(path)
        return removed

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
            buffer = io.BytesIO()
            np.savez_compressed(buffer, proba=proba, **(arrays or {}))
            content = buffer.getvalue()
            atomic_write(self.root / relative, lambda tmp: tmp.write_bytes(content))
            row.update(proba_file=relative, proba_sha256=hashlib.sha256(content).hexdigest())
        if traceback:
            relative = f"tracebacks/{key}.txt"
            atomic_write_text(self.root / relative, traceback)
            row["traceback_file"] = relative
        atomic_write_text(self.root / "cells" / f"{key}.json", json.dumps(row) + "\n")
        self._rows[key] = row

    def forget_method(self, method: str) -> None:
        """Delete every stored cell of ``method`` (to run them again with new settings)."""
        for key in [key for key, row in self._rows.items() if row["method"] == method]:
            self.forget(key)

    def forget(self, key: str) -> None:
        """Delete the stored cell ``key``: its row first (the commit point), then its files."""
        row = self._rows.pop(key)
        (self.root / "cells" / f"{key}.json").unlink()
        for relative in (row.get("proba_file"), row.get("traceback_file")):
            if relative:
                (self.root / relative).unlink(missing_ok=True)

    def write_table(self) -> Path:
        table = results_table(self.rows())
        self._table_written = time.monotonic()
        return atomic_write(self.root / "results.csv", lambda tmp: table.to_csv(tmp, index=False))

    def write_table_if_due(self) -> None:
        """Refresh results.csv at most every ``table_interval_s`` seconds (cells/ is the truth)."""
        if time.monotonic() - self._table_written >= self.table_interval_s:
            self.write_table()


def results_table(rows: list[dict]) -> pd.DataFrame:
    """The rows as the results.csv table: its columns, sorted by cell."""
    frame = pd.DataFrame(rows, columns=["key", *COLUMNS])
    frame["diagnostics"] = [json.dumps(value) if isinstance(value, dict) else None for value in frame["diagnostics"]]
    return frame.drop(columns="key").sort_values(["suite", "task_id", "fold", "method", "variant"], kind="stable")


def read_cell(path: Path) -> dict:
    """One cell's row from ``cells/<key>.json``; a ValueError names the file when it is damaged."""
    try:
        row = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidInputError(f"cell file {str(path)!r} is unreadable ({error})") from None
    if not isinstance(row, dict):
        raise InvalidInputError(f"cell file {str(path)!r} holds a {type(row).__name__}, not a cell row")
    missing = [key for key in REQUIRED_KEYS if key not in row]
    if missing:
        raise InvalidInputError(f"cell file {str(path)!r} lacks the keys {', '.join(missing)}")
    problem = _field_problem(row)
    if problem:
        raise InvalidInputError(f"cell file {str(path)!r} {problem}")
    return row


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _field_problem(row: dict) -> str | None:
    """What is wrong with the types of a cell row's fields (a damaged or hand-edited file), or None."""
    for key in TEXT_KEYS:
        if key in row and not isinstance(row[key], str) and not (key == "reason" and row[key] is None):
            return f"has {key} {row[key]!r}, not text"
    if not isinstance(row["fold"], int) or isinstance(row["fold"], bool) or row["fold"] < 0:
        return f"has fold {row['fold']!r}, not a fold number"
    if row["status"] not in STATUSES:
        return f"has the status {row['status']!r}, not one of {', '.join(STATUSES)}"
    if not isinstance(row.get("diagnostics", {}), dict):
        return f"has diagnostics {row['diagnostics']!r}, not a mapping"
    for key in NUMBER_KEYS:
        value = row.get(key)
        if value is not None and (not _is_number(value) or math.isinf(value)):
            return f"has {key} {value!r}, not a finite number"
    if row["status"] == "ok":
        for key in OK_NUMBERS:
            if not _is_number(row.get(key)) or math.isnan(row[key]):
                return f"is an ok cell without a finite {key} (it has {row.get(key)!r})"
    return None


def cell_files(root: Path) -> list[Path]:
    """The cell files of the store in ``root`` (``cells/<key>.json``; a key never starts with a
    dot, so other tools' hidden files there, such as a report's records, are not cells)."""
    return sorted(path for path in (root / "cells").glob("*.json") if not path.name.startswith("."))


def _proba_damage(root: Path, row: dict) -> str | None:
    """Why the probabilities file of a finished ok row is unusable, or None."""
    if row["status"] != "ok" or not row.get("proba_file"):
        return None
    path = root / row["proba_file"]
    if not path.is_file():
        return f"{row['proba_file']} is missing"
    if hashlib.sha256(path.read_bytes()).hexdigest() != row.get("proba_sha256"):
        return f"{row['proba_file']} does not match its recorded SHA-256 (truncated or modified)"
    return None


def read_cells(root: Path) -> tuple[dict[str, dict], dict[str, str]]:
    """(key -> row of every intact cell, key -> why a damaged cell is unusable)."""
    rows, damaged = {}, {}
    for path in cell_files(root):
        try:
            row = read_cell(path)
            reason = _proba_damage(root, row)
        except ValueError as error:
            reason = str(error)
        if reason is None:
            rows[path.stem] = row
        else:
            damaged[path.stem] = reason
    return rows, damaged
