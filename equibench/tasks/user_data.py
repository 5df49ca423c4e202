"""Your own tables as evaluation tasks: a CSV or parquet file with a target column (and
optionally a fold column), named in a suite file.

A suite file entry (paths relative to the suite file; ``evaluate.evaluate_frame`` writes one
for a data frame)::

    tasks = [5, {file = "data/patients.csv", target = "outcome", folds = "fold", name = "patients"}]

The task id is ``file-<name>`` (name defaults to the file's stem). Without a fold column the
rows get seeded, stratified 10 folds, as the demo tasks do; a fold column holds each row's
test fold, 0..n-1 with n >= 3 (TabZilla's protocol takes a test, a validation and a train part).
"""

from __future__ import annotations

import hashlib
import io
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..atomic_files import atomic_write, atomic_write_text
from ..errors import InvalidInputError
from ..frames import as_pandas
from .task import Task, stratified_folds

PREFIX = "file-"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_FORMATS = (".csv", ".parquet", ".pq")


@dataclass(frozen=True)
class FileTask:
    """A suite's task read from a table file; ``sha256`` pins the file's content."""

    task_id: str
    name: str
    path: str  # absolute
    target: str
    folds: str | None
    sha256: str


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_task_from_entry(entry: dict, base_dir: Path, where: str) -> FileTask:
    """The :class:`FileTask` of a suite file entry ``{file, target, folds?, name?}``."""
    unknown = sorted(set(entry) - {"file", "target", "folds", "name"})
    if unknown or not isinstance(entry.get("file"), str) or not isinstance(entry.get("target"), str):
        raise InvalidInputError(
            f"{where}: a table entry needs `file` and `target` (and optionally `folds`, `name`), got {entry!r}; "
            'e.g. {file = "data.csv", target = "label"}'
        )
    path = (base_dir / entry["file"]).resolve()
    if path.suffix.lower() not in _FORMATS:
        raise InvalidInputError(f"{where}: {entry['file']!r} must be a .csv or .parquet file")
    if not path.is_file():
        raise InvalidInputError(f"{where}: table file {str(path)!r} does not exist (paths are relative to the suite file)")
    name = str(entry.get("name", path.stem))
    if not _NAME.match(name):
        raise InvalidInputError(f"{where}: task name {name!r} may only hold letters, digits, '_', '.' and '-'")
    folds = entry.get("folds")
    if folds is not None and not isinstance(folds, str):
        raise InvalidInputError(f"{where}: `folds` names a column of {entry['file']!r}, got {folds!r}")
    return FileTask(f"{PREFIX}{name}", name, str(path), entry["target"], folds, _digest(path))


def _read_table(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    except Exception as error:  # pandas and pyarrow raise many types for unreadable files
        raise InvalidInputError(f"cannot read table file {str(path)!r}: {type(error).__name__}: {error}") from error


def load_file_task(spec: FileTask) -> Task:
    """The :class:`Task` of a table file, checked against the content the suite was planned with."""
    path = Path(spec.path)
    if not path.is_file() or _digest(path) != spec.sha256:
        raise InvalidInputError(
            f"table file {spec.path!r} of task {spec.task_id} is missing or changed since the run was planned; "
            "restore it, or start a new out_dir"
        )
    frame = _read_table(path)
    for column, role in ((spec.target, "target"), (spec.folds, "folds")):
        if column is not None and column not in frame.columns:
            raise InvalidInputError(f"{spec.path!r} has no {role} column {column!r}; its columns are {list(frame.columns)}")
    y = frame[spec.target]
    if y.isna().any():
        raise InvalidInputError(
            f"target column {spec.target!r} of {spec.path!r} has {int(y.isna().sum())} missing values; drop those rows"
        )
    X = frame.drop(columns=[c for c in (spec.target, spec.folds) if c is not None]).reset_index(drop=True)
    if X.shape[1] == 0:
        raise InvalidInputError(f"{spec.path!r} has no feature columns besides the target")
    y = np.asarray(y)
    if spec.folds is None:
        if len(y) < 10:
            raise InvalidInputError(f"{spec.path!r} has {len(y)} rows; 10 folds need at least 10 (or give a `folds` column)")
        test_folds = stratified_folds(y)
    else:
        test_folds = _fold_column(frame[spec.folds], spec)
    categorical = np.array([not pd.api.types.is_numeric_dtype(X[c]) for c in X.columns])
    return Task(task_id=spec.task_id, name=spec.name, X=X, y=y, categorical=categorical, test_folds=test_folds)


def _fold_column(column, spec: FileTask) -> np.ndarray:
    values = column.to_numpy()
    if column.isna().any() or values.dtype.kind not in "iuf" or not np.all(values == np.round(values)):
        raise InvalidInputError(f"fold column {spec.folds!r} of {spec.path!r} must hold integer fold numbers 0..n-1")
    folds = values.astype(int)
    present = np.unique(folds)
    if present.tolist() != list(range(len(present))) or len(present) < 3:
        raise InvalidInputError(
            f"fold column {spec.folds!r} of {spec.path!r} must use every fold 0..n-1 with n >= 3 (test, validation "
            f"and train parts), got {present.tolist()}"
        )
    return folds


def frame_suite(frame, target: str, out: Path, name: str, fold_column: str | None) -> Path:
    """Store ``frame`` as ``out/data/<name>.parquet`` and write the suite file
    ``out/suite.yaml`` that names it (with ``fold_column`` as its folds, if given); the
    suite file's path. A different frame of the same name in ``out`` is refused."""
    frame = as_pandas(frame)
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError(f"evaluate_frame needs a data frame, got {type(frame).__name__}")
    if not _NAME.match(name):
        raise InvalidInputError(f"name {name!r} may only hold letters, digits, '_', '.' and '-'")
    if target not in frame.columns:
        raise InvalidInputError(f"the frame has no target column {target!r}; its columns are {list(frame.columns)}")
    data_path = out / "data" / f"{name}.parquet"
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    if data_path.exists() and data_path.read_bytes() != buffer.getvalue():
        raise InvalidInputError(
            f"{str(out)!r} holds results for another frame named {name!r}; pass a new out directory or name"
        )
    data_path.parent.mkdir(parents=True, exist_ok=True)
    if not data_path.exists():
        atomic_write(data_path, lambda tmp: tmp.write_bytes(buffer.getvalue()))
    entry = {"file": f"data/{name}.parquet", "target": target, "name": name}
    if fold_column is not None:
        entry["folds"] = fold_column
    suite_path = out / "suite.yaml"
    atomic_write_text(suite_path, yaml.safe_dump({"name": name, "tasks": [entry]}, sort_keys=False))
    return suite_path
