"""Offline checks of the OpenML tasks in a cache in openml's on-disk layout.

    DIR/org/openml/www/tasks/<task id>/task.xml, datasplits.arff
    DIR/org/openml/www/datasets/<dataset id>/description.xml, features.xml, qualities.xml, dataset.arff

A task passes when its files are present and parseable, it is a classification task whose
target is a nominal attribute, its first repeat has 10 folds whose test parts cover every
row exactly once, every row has a declared class and at least two classes have rows, the
row count agrees with qualities.xml, and the files `equibench download` wrote still have
the checksums it recorded (see cache_manifest). Read-only: openml itself is not used (it
writes pickles into the cache and deletes the entries it cannot load).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers.expat import ExpatError

import arff
import xmltodict

from ..errors import BrokenFileError, UnsupportedTaskError
from .cache_manifest import Manifest, file_digest

#: where openml keeps what it fetched from www.openml.org, below its root cache directory
SERVER_DIR = Path("org", "openml", "www")
N_FOLDS = 10
TASK_FILES = ("datasplits.arff", "task.xml")  # task.xml last: it is what openml looks for first
DATASET_FILES = ("dataset.arff", "features.xml", "qualities.xml", "description.xml")
OPTIONAL_FILES = ("qualities.xml",)  # OpenML has datasets without computed qualities


@dataclass
class TaskCheck:
    """What a cache holds for one task; ``problems`` is empty when the task is usable."""

    task_id: str
    dataset_id: int | None = None
    name: str = ""
    rows: int | None = None
    features: int | None = None
    classes: int | None = None
    size_bytes: int = 0
    files: list[str] = field(default_factory=list)  # paths relative to the server directory
    missing: list[str] = field(default_factory=list)  # files that are not there
    problems: list[str] = field(default_factory=list)  # what is wrong with the files that are there
    unsupported: bool = False  # the task itself is not a 10-fold classification task

    @property
    def ok(self) -> bool:
        return not self.problems and not self.missing

    @property
    def status(self) -> str:
        return "ok" if self.ok else "broken" if self.problems else "missing"

    def describe(self) -> str:
        """What is wrong, in one line."""
        if task_file(self.task_id, "task.xml") in self.missing:
            return "not in the cache" + (f"; {'; '.join(self.problems)}" if self.problems else "")
        return "; ".join([f"{name} is missing" for name in self.missing] + self.problems)


def server_dir(cache: str | os.PathLike) -> Path:
    """The folder below an openml root cache directory that holds www.openml.org's files."""
    return Path(cache) / SERVER_DIR


def task_file(task_id: str | int, name: str) -> str:
    return f"tasks/{task_id}/{name}"


def dataset_file(dataset_id: int, name: str) -> str:
    return f"datasets/{dataset_id}/{name}"


def _xml(path: Path, root: str) -> dict:
    try:
        document = xmltodict.parse(path.read_bytes())
    except (ExpatError, OSError, ValueError) as error:
        raise BrokenFileError(f"{path.name} is not readable XML ({error})") from None
    if root not in document:
        raise BrokenFileError(f"{path.name} has no <{root}> element")
    return document[root]


def _as_list(value) -> list:
    return [] if value is None else value if isinstance(value, list) else [value]


def _task_description(path: Path) -> tuple[int, str, int]:
    """(dataset id, target name, number of folds) from task.xml."""
    task = _xml(path, "oml:task")
    if str(task.get("oml:task_type_id")) != "1":
        raise UnsupportedTaskError(f"task.xml describes a {task.get('oml:task_type')!r} task, not supervised classification")
    inputs = {item.get("@name"): item for item in _as_list(task.get("oml:input"))}
    try:
        data_set = inputs["source_data"]["oml:data_set"]
        procedure = inputs["estimation_procedure"]["oml:estimation_procedure"]
        parameters = {p["@name"]: p.get("#text") for p in _as_list(procedure.get("oml:parameter"))}
        return int(data_set["oml:data_set_id"]), str(data_set["oml:target_feature"]), int(parameters["number_folds"])
    except (KeyError, TypeError, ValueError) as error:
        raise BrokenFileError(f"task.xml lacks the dataset, target or fold count ({error})") from None


def _names(value) -> set[str]:
    """Attribute names of a description field that may hold one name, several, or a comma list."""
    return {name.strip() for item in _as_list(value) for name in str(item).split(",") if name.strip()}


def _read_arff(path: Path) -> tuple[list[tuple[str, object]], list[list]]:
    try:
        with path.open(encoding="utf8") as handle:
            content = arff.load(handle, return_type=arff.DENSE_GEN)
            return content["attributes"], list(content["data"])
    except (arff.ArffException, OSError, UnicodeDecodeError, ValueError, IndexError) as error:
        raise BrokenFileError(f"{path.name} is not a readable ARFF file ({type(error).__name__}: {error})") from None


def _check_data(path: Path, target: str, ignored: set[str]) -> tuple[int, int, list]:
    """(rows, features, class labels of the rows) of dataset.arff."""
    attributes, rows = _read_arff(path)
    names = [name for name, _ in attributes]
    if target not in names:
        raise BrokenFileError(f"dataset.arff has no target attribute {target!r}")
    column = names.index(target)
    if not isinstance(attributes[column][1], list):
        raise UnsupportedTaskError(f"the target {target!r} of dataset.arff is not a nominal attribute")
    features = sum(1 for name in names if name != target and name not in ignored)
    return len(rows), features, [row[column] for row in rows]


def _check_folds(path: Path, n_rows: int, n_folds: int) -> None:
    """The first repeat's ``n_folds`` test parts cover every row exactly once."""
    attributes, splits = _read_arff(path)
    names = [name for name, _ in attributes]
    if not {"type", "rowid", "repeat", "fold"} <= set(names):
        raise BrokenFileError("datasplits.arff lacks one of the attributes type, rowid, repeat, fold")
    kind, rowid, repeat, fold = (names.index(name) for name in ("type", "rowid", "repeat", "fold"))
    first_repeat = [split for split in splits if int(split[repeat]) == 0]
    folds = {int(split[fold]) for split in first_repeat}
    tested = Counter(int(split[rowid]) for split in first_repeat if split[kind] == "TEST")
    if folds != set(range(n_folds)):
        raise BrokenFileError(f"datasplits.arff has folds {sorted(folds)[:12]}, expected 0..{n_folds - 1}")
    outside = [row for row in tested if not 0 <= row < n_rows]
    untested = n_rows - sum(1 for row in range(n_rows) if row in tested)
    repeated = sum(1 for count in tested.values() if count > 1)
    if outside or untested or repeated:
        raise BrokenFileError(
            f"datasplits.arff: {untested} rows are in no test fold, {repeated} in several, "
            f"{len(outside)} row ids are not rows of the data ({n_rows} rows)"
        )


def check_task(
    root: str | os.PathLike, task_id: str | int, deep: bool = True, manifest: Manifest | None = None,
    checksums: bool | None = None,
) -> TaskCheck:
    """Check task ``task_id`` in the server directory ``root`` (see :func:`server_dir`).

    ``deep=False`` only checks that the files are present, the XML parses and the sizes
    agree with ``manifest``; ``deep=True`` also parses the data and the folds. With
    ``checksums`` (default: ``deep``) the files ``manifest`` recorded are compared by checksum."""
    root = Path(root)
    check = TaskCheck(str(task_id))
    checksums = deep if checksums is None else checksums

    def present(name: str, optional: bool = False) -> Path | None:
        path = root / name
        if path.is_file():
            check.files.append(name)
            check.size_bytes += path.stat().st_size
            recorded = manifest.files.get(name) if manifest else None
            if recorded and (path.stat().st_size != recorded["bytes"] or checksums and file_digest(path) != recorded["sha256"]):
                check.problems.append(f"{name} changed since it was downloaded (size or checksum differs)")
            return path
        if not optional:
            check.files.append(name)
            check.missing.append(name)
        return None

    try:
        task_xml = present(task_file(task_id, "task.xml"))
        splits = present(task_file(task_id, "datasplits.arff"))
        if task_xml is None:
            return check
        check.dataset_id, target, n_folds = _task_description(task_xml)
        if n_folds != N_FOLDS:
            check.problems.append(f"task {task_id} has {n_folds}-fold cross-validation, not {N_FOLDS}-fold")
            check.unsupported = True
        files = {name: present(dataset_file(check.dataset_id, name), name in OPTIONAL_FILES) for name in DATASET_FILES}
        description = _xml(files["description.xml"], "oml:data_set_description") if files["description.xml"] else {}
        check.name = str(description.get("oml:name", ""))
        if files["features.xml"]:
            features = _as_list(_xml(files["features.xml"], "oml:data_features").get("oml:feature"))
            if target not in {str(feature.get("oml:name")) for feature in features}:
                check.problems.append(f"features.xml does not list the target {target!r}")
        qualities_xml = _xml(files["qualities.xml"], "oml:data_qualities") if files["qualities.xml"] else {}
        qualities = {str(q.get("oml:name")): q.get("oml:value") for q in _as_list(qualities_xml.get("oml:quality"))}
        if not deep or files["dataset.arff"] is None:
            return check
        ignored = _names(description.get("oml:ignore_attribute")) | _names(description.get("oml:row_id_attribute"))
        check.rows, check.features, labels = _check_data(files["dataset.arff"], target, ignored)
        counts = Counter(label for label in labels if label is not None)
        check.classes = len(counts)
        if len(counts) < 2:
            check.problems.append(f"the target {target!r} has {len(counts)} class(es) with rows; a classification task needs 2")
        if unlabelled := check.rows - sum(counts.values()):
            check.problems.append(f"{unlabelled} rows of dataset.arff have no class label")
        expected_rows = qualities.get("NumberOfInstances")
        if expected_rows is not None and float(expected_rows) != check.rows:
            check.problems.append(f"dataset.arff has {check.rows} rows, qualities.xml says {float(expected_rows):g}")
        if splits is not None:
            _check_folds(splits, check.rows, n_folds)
    except BrokenFileError as error:
        check.problems.append(str(error))
        check.unsupported = check.unsupported or isinstance(error, UnsupportedTaskError)
    return check


def check_cache(cache: str | os.PathLike, task_ids, deep: bool = True) -> list[TaskCheck]:
    """:func:`check_task` for each of ``task_ids`` in the root cache directory ``cache``."""
    manifest = Manifest.load(cache)
    return [check_task(server_dir(cache), task_id, deep=deep, manifest=manifest) for task_id in task_ids]


def cached_task_ids(cache: str | os.PathLike) -> list[str]:
    """The task ids a cache has a folder (or a download record) for, in numeric order."""
    tasks = server_dir(cache) / "tasks"
    found = {path.name for path in tasks.iterdir() if path.is_dir() and path.name.isdigit()} if tasks.is_dir() else set()
    return sorted(found | set(Manifest.load(cache).tasks), key=int)


def cache_gap_messages(suite, cache: str | os.PathLike | None) -> list[str]:
    """One line naming the OpenML tasks of ``suite`` that ``cache`` lacks (no task.xml), with the
    step that fetches them, unless it holds none of them (the run's end, or its refusal, says so
    once), and one naming those it holds damaged or incomplete files of (quick check: files
    present, XML readable, sizes as downloaded), with the step that checks them; nothing when
    the folder is not an openml cache at all."""
    openml_ids = [task_id for task_id in suite.task_ids if not task_id.startswith(("demo-", "file-"))]
    if cache is None or not openml_ids or not (Path(cache) / "org").is_dir():
        return []
    checks = [check for check in check_cache(cache, openml_ids, deep=False) if not check.ok]
    lacking = [check.task_id for check in checks if task_file(check.task_id, "task.xml") in check.missing]
    damaged = [check for check in checks if check.task_id not in lacking]
    lines = []
    if lacking and len(lacking) < len(openml_ids):
        lines.append(
            f"the OpenML cache {str(cache)!r} lacks {len(lacking)} of the suite's {len(openml_ids)} OpenML tasks "
            f"({', '.join(lacking)}): their cells are not run (missing) unless openml can download them now. Fetch "
            f"them first with `download_tasks(cache={str(cache)!r}, task_ids={lacking!r})`")
    if damaged:
        lines.append(
            f"the OpenML cache {str(cache)!r} holds damaged or incomplete files of {len(damaged)} of the suite's "
            f"{len(openml_ids)} OpenML tasks (task {damaged[0].task_id}: {damaged[0].describe()}"
            f"{'; ...' if len(damaged) > 1 else ''}): a task openml cannot load fails. Check them with "
            f"`check_cache(cache={str(cache)!r}, task_ids={[check.task_id for check in damaged]!r})`")
    return lines
