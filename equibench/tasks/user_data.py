"""Your own tables as evaluation tasks: a CSV or parquet file with a target column (and
optionally a fold column), named in a suite file.

A suite file entry (paths relative to the suite file; ``evaluate.evaluate_frame`` writes one
for a data frame)::

    tasks = [5, {file = "data/patients.csv", target = "outcome", folds = "fold", name = "patients"}]

The task id is ``file-<name>`` (name defaults to the file's stem). Without a fold column the
rows get seeded, stratified 10 folds, as the demo tasks do; a fold column holds each row's
test fold, 0..n-1 with n >= 3 (TabZilla's protocol takes a test, a validation and a train part).

Refused before any cell runs, naming the column: a column name given twice (pandas would
read a repeated target as the feature ``target.1``), missing labels, labels of several types
(numbers and text), a single class, or a fold whose train part holds a single class. An
object column of a data frame that mixes types is stored as the classifiers read it: numbers
when every value is one, else text.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from ..atomic_files import atomic_write, atomic_write_text
from ..errors import InvalidInputError, first_line
from ..frames import as_pandas
from .cache_manifest import file_digest
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


def file_task_from_entry(entry: dict, base_dir: Path, where: str) -> FileTask:
    """The :class:`FileTask` of a suite file entry ``{file, target, folds?, name?}``."""
    unknown = sorted(set(entry) - {"file", "target", "folds", "name"})
    if unknown or not isinstance(entry.get("file"), str) or not isinstance(entry.get("target"), str):
        raise InvalidInputError(
            f"{where}: a table entry needs 'file' and 'target' (and optionally 'folds', 'name'), got {entry!r}; "
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
        raise InvalidInputError(f"{where}: 'folds' names a column of {entry['file']!r}, got {folds!r}")
    return FileTask(f"{PREFIX}{name}", name, str(path), entry["target"], folds, file_digest(path))


def _header(path: Path) -> list[str]:
    """The column names as the file writes them (pandas renames a repeated CSV name ``y`` to ``y.1``)."""
    if path.suffix.lower() == ".csv":
        first = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False)
        return first.iloc[0].tolist() if len(first) else []
    import pyarrow.parquet as pq

    return pq.read_schema(path).names


def _refuse_repeated_columns(names, where: str) -> None:
    """An InvalidInputError naming the column names ``names`` holds more than once (empty names aside)."""
    repeated = sorted({str(name) for name in names if str(name) and list(names).count(name) > 1})
    if repeated:
        raise InvalidInputError(
            f"{where} has several columns named {', '.join(map(repr, repeated))}; give every column its own name "
            "(a repeated target would otherwise be read as a feature)"
        )


def _read_table(path: Path) -> pd.DataFrame:
    _refuse_repeated_columns(_reading(path, _header), f"table file {str(path)!r}")
    if path.suffix.lower() == ".csv":
        return _reading(path, lambda path: pd.read_csv(path, low_memory=False))  # one type guess per column
    return _reading(path, pd.read_parquet)


def _reading(path: Path, read):
    """``read(path)``, with what makes a table file unreadable as one InvalidInputError line."""
    try:
        return read(path)
    except Exception as error:  # pandas and pyarrow raise many types for unreadable files
        raise InvalidInputError(f"cannot read table file {str(path)!r}: {first_line(error)}") from error


def _label_kind(value) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, numbers.Number):
        return "number"
    return "text" if isinstance(value, str) else type(value).__name__


def check_labels(y: pd.Series, target: str, where: str) -> None:
    """Refuse a target column with no rows, with missing labels, with labels of several kinds
    (numbers and text, ...), or with fewer than two classes."""
    if len(y) == 0:
        raise InvalidInputError(f"{where} has no rows (only a header?); give it rows with at least two classes in "
                                f"column {target!r}")
    if y.isna().any():
        raise InvalidInputError(
            f"target column {target!r} of {where} has {int(y.isna().sum())} missing values; drop those rows"
        )
    if y.dtype == object:
        examples = {}
        for value in y:
            examples.setdefault(_label_kind(value), value)
        if len(examples) > 1:
            found = ", ".join(f"{kind} ({value!r})" for kind, value in examples.items())
            raise InvalidInputError(
                f"target column {target!r} of {where} mixes labels of several types: {found}; make them one type "
                f"(e.g. frame[{target!r}].astype(str))"
            )
    classes = pd.unique(y)
    if len(classes) < 2:
        raise InvalidInputError(
            f"target column {target!r} of {where} holds a single class ({classes[0]!r} in all {len(y)} rows); "
            "classification needs at least two"
        )


def _check_train_parts(y: np.ndarray, test_folds: np.ndarray, spec: FileTask) -> None:
    """Refuse folds whose train part (every fold but the test and the validation one) holds one class."""
    n_folds = int(test_folds.max()) + 1
    for fold in range(n_folds):
        train = y[(test_folds != fold) & (test_folds != (fold + 1) % n_folds)]
        if len(np.unique(train)) < 2:
            counts = pd.Series(y).value_counts()
            raise InvalidInputError(
                f"the train part of fold {fold} of {spec.path!r} holds only class {train[0]!r} (folds {fold} and "
                f"{(fold + 1) % n_folds} are its test and validation parts; the rarest class, {counts.index[-1]!r}, "
                f"has {counts.iloc[-1]} rows): add rows of the rare classes"
                + (", or give a 'folds' column that spreads them" if spec.folds is None else " or spread them over "
                   f"the folds of column {spec.folds!r}")
            )


def load_file_task(spec: FileTask) -> Task:
    """The :class:`Task` of a table file, checked against the content the suite was planned with."""
    path = Path(spec.path)
    if not path.is_file() or file_digest(path) != spec.sha256:
        raise InvalidInputError(
            f"table file {spec.path!r} of task {spec.task_id} is missing or changed since the run was planned; "
            "restore it, or start a new `out_dir`"
        )
    frame = _read_table(path)
    for column, role in ((spec.target, "target"), (spec.folds, "folds")):
        if column is not None and column not in frame.columns:
            raise InvalidInputError(f"{spec.path!r} has no {role} column {column!r}; its columns are {list(frame.columns)}")
    check_labels(frame[spec.target], spec.target, repr(spec.path))
    X = frame.drop(columns=[c for c in (spec.target, spec.folds) if c is not None]).reset_index(drop=True)
    if X.shape[1] == 0:
        raise InvalidInputError(f"{spec.path!r} has no feature columns besides the target")
    y = frame[spec.target].to_numpy()
    if spec.folds is None:
        if len(y) < 10:
            raise InvalidInputError(f"{spec.path!r} has {len(y)} rows; 10 folds need at least 10 (or give a 'folds' column)")
        test_folds = stratified_folds(y)
    else:
        test_folds = _fold_column(frame[spec.folds], spec)
    _check_train_parts(y, test_folds, spec)
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


def _uniform_object_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each object column of mixed Python types as the classifiers read it: numbers
    when every value is one (as floats), else text; missing values stay missing."""
    frame = frame.copy()
    for name in frame.columns:
        column = frame[name]
        if column.dtype != object or len({type(value) for value in column.dropna()}) < 2:
            continue
        numeric = pd.to_numeric(column, errors="coerce")
        all_numbers = numeric.notna().sum() == column.notna().sum()
        frame[name] = numeric if all_numbers else column.astype(str).where(column.notna())
    return frame


def frame_suite(frame, target: str, out: Path, name: str, fold_column: str | None) -> Path:
    """Store ``frame`` as ``out/data/<name>.parquet`` and write the suite file
    ``out/suite.yaml`` that names it (with ``fold_column`` as its folds, if given); the
    suite file's path. A different frame of the same name in ``out`` is refused."""
    frame = as_pandas(frame)
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInputError(f"evaluate_frame needs a data frame, got {type(frame).__name__}")
    if not _NAME.match(name):
        raise InvalidInputError(f"name {name!r} may only hold letters, digits, '_', '.' and '-'")
    _refuse_repeated_columns(list(frame.columns), "the frame")
    if target not in frame.columns:
        raise InvalidInputError(f"the frame has no target column {target!r}; its columns are {list(frame.columns)}")
    if fold_column is not None and fold_column not in frame.columns:  # before anything is written
        raise InvalidInputError(
            f"the frame has no fold column {fold_column!r} (fold_column); its columns are {list(frame.columns)}"
        )
    check_labels(frame[target], target, "the frame")
    frame = _uniform_object_columns(frame)
    data_path = out / "data" / f"{name}.parquet"
    data = frame.to_parquet(index=False)  # the file's bytes
    if data_path.exists() and data_path.read_bytes() != data:
        raise InvalidInputError(
            f"{str(out)!r} holds results for another frame named {name!r}; pass a new out directory or name"
        )
    if not data_path.exists():  # atomic_write makes the data folder
        atomic_write(data_path, lambda tmp: tmp.write_bytes(data))
    entry = {"file": f"data/{name}.parquet", "target": target, "name": name}
    if fold_column is not None:
        entry["folds"] = fold_column
    suite_path = out / "suite.yaml"
    atomic_write_text(suite_path, yaml.safe_dump({"name": name, "tasks": [entry]}, sort_keys=False))
    return suite_path
