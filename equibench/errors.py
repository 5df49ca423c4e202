"""The errors equibench raises on purpose, in one family.

Catch :class:`EquibenchError` for all of them, or one of the few subclasses users act on.
Bad input is also a ``ValueError`` and an unavailable resource also a ``RuntimeError``, so
code written against the builtin types keeps working. Messages name parameters and steps in
backticks (`jobs`, `resume=True`, `check_cache(cache='c')`), never flags: see ``equibench.cli``.
"""

from __future__ import annotations


class EquibenchError(Exception):
    """Base of every error equibench raises deliberately."""


class InvalidInputError(EquibenchError, ValueError):
    """A parameter, file or table given to equibench is not usable as it is."""


class CheckpointError(InvalidInputError):
    """A checkpoint is missing, corrupt, of another architecture than asked for, or does not
    match its own description."""


class FitStateError(InvalidInputError):
    """A fit-state file is missing, damaged, or was written by another format version."""


class BrokenFileError(InvalidInputError):
    """A cached file is present but cannot be used."""


class UnsupportedTaskError(BrokenFileError):
    """The files are sound but describe a task equibench cannot evaluate (fetching again won't help)."""


class TooManyClassesError(InvalidInputError):
    """TabPFN* was asked for more classes than its fixed output layer has."""

    @classmethod
    def for_counts(cls, max_classes: int, n_classes: int) -> TooManyClassesError:
        return cls(
            f"TabPFN* has {max_classes} output classes but the data has {n_classes}. Use "
            "EquiTabPFNClassifier, which handles any number of classes, or wrap TabPFN* in an "
            "error-correcting output code (ECOC) ensemble: "
            "equibench.ECOCClassifier(TabPFNStarClassifier())."
        )


class UnavailableError(EquibenchError, RuntimeError):
    """Something equibench needs is not here: a task, a method's package or weights."""


class TaskUnavailableError(UnavailableError):
    """A task is neither in the cache nor reachable on the OpenML server."""


class MethodUnavailableError(UnavailableError):
    """The method cannot run here (missing package or weights): its cells are *skipped*,
    with ``str(error)`` as the reason."""


class MissingDependencyError(MethodUnavailableError, ImportError):
    """An optional package a method needs is not installed; ``hint`` says how to get it."""

    def __init__(self, method: str, module: str, pip_name: str):
        self.hint = f'pip install "{pip_name}"'
        super().__init__(f"method {method!r} needs the Python package {module!r}: {self.hint}")


class FolderInUseError(EquibenchError, RuntimeError):
    """Another process holds the output folder's lock."""


class NonFiniteLossError(EquibenchError, RuntimeError):
    """Training diverged: the loss (or the weights) became NaN or infinite."""


class WorkerLostError(EquibenchError, RuntimeError):
    """A worker process ended unexpectedly (killed, or out of memory) while the run needed it."""


def first_line(error: BaseException, limit: int | None = None) -> str:
    """``TypeName: the first line of its message``, that line cut at ``limit`` characters."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:limit] if lines else ''}"
