"""Task suites: the paper's ``gt10`` and ``le10`` (OpenML task ids of the EquiTabPFN paper's dataset tables), the offline
``demo`` suite, ``large`` (tables past the PFNs' context cap), and user suites from a YAML or TOML file::

    # my-suite.toml                       # my-suite.yaml
    name = "mine"                         name: mine
    tasks = [5, 7, "demo-iris"]           tasks: [5, 7, demo-iris]

A task may also be your own CSV or parquet table (see ``user_data``)::

    tasks = [5, {file = "patients.csv", target = "outcome", folds = "fold"}]
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InvalidInputError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

# Tasks, tables and OpenML load numpy, pandas and scikit-learn (and YAML files PyYAML): imported where
# used, so that listing the suites (`equibench suites`, shell completion) starts as fast as `--help`.
if TYPE_CHECKING:
    from .task import Task
    from .user_data import FileTask

#: The demo tasks' names: the keys of :data:`.task.DEMO_TASKS` (checked by a test), here without
#: the loaders' imports.
DEMO_NAMES = ("iris", "wine", "breast_cancer", "digits", "synthetic-15", "synthetic-30")
#: Task id prefix of a suite's table file tasks: :data:`.user_data.PREFIX` (checked by a test).
FILE_PREFIX = "file-"

GT10 = (5, 7, 41, 3022, 3481, 3567, 3952, 9956, 125922, 146032)
LE10 = (
    3, 4, 9, 11, 14, 15, 16, 18, 22, 23, 25, 27, 29, 31, 35, 37, 39, 40, 45, 47, 48, 49, 50, 53, 54, 59,
    2079, 2867, 3512, 3540, 3543, 3549, 3560, 3561, 3602, 3620, 3647, 3731, 3739, 3748, 3779, 3797, 3902,
    3903, 3913, 3917, 3918, 9946, 9957, 9971, 9978, 9979, 9984, 10089, 10093, 10101, 14954, 14967, 125920,
    125921, 145793, 145799, 145836, 145847, 145984, 146024, 146063, 146065, 146192, 146210, 146800, 146817,
    146818, 146819, 146821, 146822,
)

#: Large tables (5,620 to 48,842 rows, 2 to 26 classes): letter, mushroom, nursery, optdigits,
#: pendigits, satimage, MagicTelescope, adult; past the PFNs' context cap, for local contexts.
LARGE = (6, 24, 26, 28, 32, 2074, 3954, 7592)


@dataclass(frozen=True)
class Suite:
    name: str
    task_ids: tuple[str, ...]  # OpenML task ids as strings, "demo-<name>" or "file-<name>"
    files: tuple[FileTask, ...] = field(default=())  # the tables behind the "file-<name>" tasks

    @property
    def needs_openml(self) -> bool:
        return any(not task_id.startswith(("demo-", FILE_PREFIX)) for task_id in self.task_ids)


BUILTIN_SUITES = {
    "gt10": Suite("gt10", tuple(map(str, GT10))),
    "le10": Suite("le10", tuple(map(str, LE10))),
    "demo": Suite("demo", tuple(f"demo-{name}" for name in DEMO_NAMES)),
    "large": Suite("large", tuple(map(str, LARGE))),
}


_SUITE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _task_id(value) -> str:
    text = str(value).strip()
    if text.startswith("demo-"):
        if text.removeprefix("demo-") not in DEMO_NAMES:
            raise InvalidInputError(f"unknown demo task {text!r}; choose from {', '.join('demo-' + n for n in DEMO_NAMES)}")
        return text
    if isinstance(value, bool) or not text.isdigit():
        raise InvalidInputError(
            f"task {value!r} is neither an OpenML task id (a positive integer), demo-<name>, nor a table entry "
            '{file = "data.csv", target = "label"}'
        )
    return str(int(text))


def load_suite(name_or_path: str | os.PathLike) -> Suite:
    """A built-in suite by name, or a suite file (.toml, .yaml, .yml)."""
    if str(name_or_path) in BUILTIN_SUITES:
        return BUILTIN_SUITES[str(name_or_path)]
    path = Path(name_or_path)
    if not path.is_file():
        raise InvalidInputError(
            f"`suite` {str(name_or_path)!r} is neither a built-in suite ({', '.join(BUILTIN_SUITES)}) nor an existing "
            "suite file (.toml/.yaml with a 'tasks' list of OpenML task ids)"
        )
    if path.suffix not in (".toml", ".yaml", ".yml"):
        raise InvalidInputError(f"suite file {str(path)!r} must end in .toml, .yaml or .yml")
    import yaml

    try:
        text = path.read_text()
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, yaml.YAMLError) as error:
        raise InvalidInputError(f"cannot read suite file {str(path)!r}: {error}") from error
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), list) or not data["tasks"]:
        raise InvalidInputError(f"suite file {str(path)!r} needs a non-empty 'tasks' list, e.g. tasks = [5, 7, 41]")
    from .user_data import file_task_from_entry

    task_ids, files = [], []
    for value in data["tasks"]:
        if isinstance(value, dict):
            files.append(file_task_from_entry(value, path.parent, f"suite file {str(path)!r}"))
            task_ids.append(files[-1].task_id)
        else:
            task_ids.append(_task_id(value))
    duplicates = sorted({t for t in task_ids if task_ids.count(t) > 1})
    if duplicates:
        raise InvalidInputError(f"suite file {str(path)!r} lists tasks more than once: {duplicates}")
    name = data.get("name", path.stem)
    if not isinstance(name, (str, int)) or isinstance(name, bool) or not _SUITE_NAME.fullmatch(str(name)) or ".." in str(name):
        raise InvalidInputError(
            f"suite file {str(path)!r} has the name {name!r}; a suite name becomes part of file names, so use 1 to 100 "
            "letters, digits, '_', '.' or '-' (starting with a letter or digit, no '..'), e.g. name = \"my-suite\""
        )
    return Suite(str(name), tuple(task_ids), tuple(files))


def load_task(task_id: str, openml_cache: str | os.PathLike | None, files: tuple[FileTask, ...] = ()) -> Task:
    """The task ``task_id`` of a suite: a demo task, a table file among ``files``, or an
    OpenML task from ``openml_cache``."""
    from .openml import load_task as load_openml_task
    from .task import demo_task
    from .user_data import load_file_task

    if task_id.startswith("demo-"):
        return demo_task(task_id.removeprefix("demo-"))
    if task_id.startswith(FILE_PREFIX):
        spec = next((spec for spec in files if spec.task_id == task_id), None)
        if spec is None:
            raise InvalidInputError(f"task {task_id} is a table file task, but its suite's file entry was not given")
        return load_file_task(spec)
    return load_openml_task(int(task_id), openml_cache)
