"""Shell completion of option values (``equibench --install-completion`` sets it up): the
suites of ``--suite`` and the methods of ``--methods``. Each runs at every Tab, so each
imports only the light registries (no numpy, pandas or scikit-learn)."""

from __future__ import annotations

from pathlib import Path

#: Suite files that ``--suite`` takes besides the built-in names.
SUITE_FILE_SUFFIXES = (".toml", ".yaml", ".yml")


def complete_suite(incomplete: str) -> list[tuple[str, str]]:
    """(value, help) pairs for ``--suite``: the built-in suites, then the suite files and, once a
    path is begun, the folders (to go on into) whose path starts with ``incomplete``."""
    from ..tasks.suites import BUILTIN_SUITES

    values = [(name, f"{len(suite.task_ids)} tasks") for name, suite in BUILTIN_SUITES.items()
              if name.startswith(incomplete)]
    folder, _, start = incomplete.rpartition("/")
    where = Path(folder + "/" if folder or incomplete.startswith("/") else ".")
    try:
        entries = sorted(where.iterdir())
    except OSError:
        return values
    prefix = incomplete[: len(incomplete) - len(start)]
    for entry in entries:
        if not entry.name.startswith(start) or (entry.name.startswith(".") and not start.startswith(".")):
            continue
        if entry.is_dir() and incomplete:
            values.append((f"{prefix}{entry.name}/", "folder"))
        elif entry.suffix in SUITE_FILE_SUFFIXES:
            values.append((f"{prefix}{entry.name}", "suite file"))
    return values


def complete_methods(incomplete: str) -> list[tuple[str, str]]:
    """(value, help) pairs for the comma-separated ``--methods``: the given names kept, the
    last one completed from the registry's names, ``all`` and ``fast``, without repeats."""
    from ..baselines.registry import METHODS

    given, _, last = incomplete.rpartition(",")
    chosen = set(given.split(","))
    prefix = f"{given}," if given else ""
    choices = {"all": "every method", "fast": "the PFNs and the classical methods",
               **{name: spec.label for name, spec in METHODS.items()}}
    return [(prefix + name, label) for name, label in choices.items() if name.startswith(last) and name not in chosen]
