"""Shell completion of option values (``equibench --install-completion`` sets it up): the
suites of ``--suite``, the methods of ``--methods``, the ``METHOD=PATH`` of ``--weights`` and
the strategies of ``--contexts``. Each runs at every Tab, so they import only the light
registries (no numpy, pandas or scikit-learn)."""

from __future__ import annotations

from pathlib import Path

from ..baselines.registry import FAST_METHODS, METHODS
from ..classifier.context_rules import CONTEXTS, MAX_TRAIN_ROWS

#: Suite files that ``--suite`` takes besides the built-in names.
SUITE_FILE_SUFFIXES = (".toml", ".yaml", ".yml")


def _paths(incomplete: str, keep, folders_at_once: bool = False) -> list[tuple[str, str]]:
    """(path, help) pairs of the entries whose path starts with ``incomplete``: the folders (to go
    on into; unless ``folders_at_once``, only once a path is begun) and the other entries that
    ``keep(entry)`` gives a help text (else None)."""
    folder, _, start = incomplete.rpartition("/")
    where = Path(folder + "/" if folder or incomplete.startswith("/") else ".")
    try:
        entries = sorted(where.iterdir())
    except OSError:
        return []
    prefix = incomplete[: len(incomplete) - len(start)]
    values = []
    for entry in entries:
        if not entry.name.startswith(start) or (entry.name.startswith(".") and not start.startswith(".")):
            continue
        if entry.is_dir():
            if incomplete or folders_at_once:
                values.append((f"{prefix}{entry.name}/", "folder"))
        elif text := keep(entry):
            values.append((f"{prefix}{entry.name}", text))
    return values


def complete_suite(incomplete: str) -> list[tuple[str, str]]:
    """(value, help) pairs for ``--suite``: the built-in suites, then the suite files and, once a
    path is begun, the folders (to go on into) whose path starts with ``incomplete``."""
    from ..tasks.suites import BUILTIN_SUITES

    values = [(name, f"{len(suite.task_ids)} tasks") for name, suite in BUILTIN_SUITES.items()
              if name.startswith(incomplete)]
    return values + _paths(incomplete, lambda entry: "suite file" if entry.suffix in SUITE_FILE_SUFFIXES else None)


def _complete_list(incomplete: str, choices: dict[str, str]) -> list[tuple[str, str]]:
    """(value, help) pairs for a comma-separated list of ``choices`` (name -> help): the given
    names kept, the last one completed, without repeats."""
    given, _, last = incomplete.rpartition(",")
    chosen = set(given.split(","))
    prefix = f"{given}," if given else ""
    return [(prefix + name, label) for name, label in choices.items() if name.startswith(last) and name not in chosen]


def complete_methods(incomplete: str) -> list[tuple[str, str]]:
    """(value, help) pairs for the comma-separated ``--methods``: the registry's names, ``all``
    first only (it takes every method: nothing goes with it) and ``fast`` (then not its methods)."""
    given = incomplete.rpartition(",")[0].split(",")
    if "all" in given:
        return []
    choices = {} if any(given) else {"all": "every method"}
    if "fast" not in given:
        choices["fast"] = "the PFNs and the classical methods"
    choices.update({name: spec.label for name, spec in METHODS.items() if "fast" not in given or name not in FAST_METHODS})
    return _complete_list(incomplete, choices)


def complete_contexts(incomplete: str) -> list[tuple[str, str]]:
    """(value, help) pairs for the comma-separated ``--contexts``."""
    helps = {"auto": f"local contexts above {MAX_TRAIN_ROWS} training rows", "local": "local contexts always",
             "subsample": f"a stratified subsample of {MAX_TRAIN_ROWS} rows"}
    return _complete_list(incomplete, {name: helps.get(name, "") for name in CONTEXTS})


def complete_weights(incomplete: str) -> list[tuple[str, str]]:
    """(value, help) pairs for ``--weights METHOD=PATH``: ``METHOD=`` of the methods that take
    weights, then after the ``=`` the files (folders, for a method that takes a folder)."""
    method, equals, path = incomplete.partition("=")
    spec = METHODS.get(method)
    if not equals or spec is None or spec.weights is None:
        return [(f"{name}=", spec.weights.what) for name, spec in METHODS.items()
                if spec.weights is not None and name.startswith(incomplete)]
    files = spec.weights.metavar == "FILE"  # else a folder, which the folders offered are
    paths = _paths(path, lambda entry: "file" if files else None, folders_at_once=True)
    return [(f"{method}={value}", text) for value, text in paths]
