"""The one place where errors become what a shell user sees: a single ``error:`` line on
stderr, with the library's references written as the command's flags, and an exit status.
Commands let errors through; :class:`CommandGroup`, the app's group, catches them.
:class:`Command`, the class of every command, and :class:`CommandGroup` also keep value types
off flags in ``--help`` (Typer writes ``<bool>`` beside ``--dry-run``, as if it took a value).
"""

from __future__ import annotations

import ast
import contextlib
import os
import re
import shlex
import sys

import typer
import typer.rich_utils
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup, TyperOption

from ..errors import EquibenchError, FolderInUseError, InvalidInputError
from . import output

#: Exit status by error class, first match wins: 2 for what the user changes in the command
#: (bad input; an output folder that another run holds), 1 for any other deliberate failure
#: (a diverged training, something unavailable). Other exceptions are bugs: a traceback.
EXIT_CODES = ((InvalidInputError, 2), (ValueError, 2), (OSError, 2), (FolderInUseError, 2), (EquibenchError, 1))

#: The library steps a message may name (see :func:`with_flags`): command, flags other than --parameter-name.
STEPS = {"download_tasks": ("download", {"task_ids": "--tasks"}), "convert_official": ("convert-official", {}),
         "check_cache": ("download", {"cache": "--verify", "task_ids": "--tasks"}), "evaluate": ("evaluate", {"out_dir": "--out"})}
_NOT_LITERAL, _ALONE = object(), object()  # a reference's value when it is not a literal, when it names a parameter alone

_OS_ADVICE = {
    PermissionError: "choose a folder you can write to, or fix its permissions",
    IsADirectoryError: "pass a file path, not a folder",
    NotADirectoryError: "a part of the path is a file, not a folder: choose another path",
    FileNotFoundError: "check the path",
}


def message(error: Exception) -> str:
    """One line for ``error``; an OSError names its file and what to do."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        advice = _OS_ADVICE.get(type(error), "check the path and free disk space")
        return f"{error.strerror}: {str(error.filename)!r}; {advice}"
    return str(error)


def with_flags(text: str, command) -> str:
    """``text`` with the library's references (in backticks, see :mod:`equibench.errors`) to an option of
    ``command`` as its flag (`jobs`: --jobs, `resume=True`: --resume, `weights={'tabicl': 'x'}`: --weights
    tabicl=x), to a step of :data:`STEPS` as its command line (`check_cache(cache='c')`: `equibench download --verify c`)."""
    return re.sub(r"`([^`]*)`", lambda span: _written(span[1], command) or span[0], text)


def _written(span: str, command) -> str | None:
    """One span between backticks as ``command``'s flag or as a step's command line; None for any other."""
    try:
        call = ast.parse(f"_({span})", mode="eval").body
        ((name, value),) = _inputs(call)  # one reference
    except (SyntaxError, ValueError):
        return None
    step = call.args[0] if call.args and isinstance(call.args[0], ast.Call) else ast.Call(ast.Name(name), [], [])
    if isinstance(step.func, ast.Name) and step.func.id in STEPS:
        words, flags = ["equibench", STEPS[step.func.id][0]], STEPS[step.func.id][1]
        for parameter, value in _inputs(step):
            if value in (_NOT_LITERAL, _ALONE):
                return None
            flag = flags.get(parameter, f"--{parameter.replace('_', '-')}")
            words += [] if value is None else [flag, shlex.quote(str(value))]
        return f"`{' '.join(words)}`"
    option = next((option for option in getattr(command, "params", []) if option.name == name), None)
    if not isinstance(option, TyperOption) or value is _NOT_LITERAL:
        return None
    if value is _ALONE or option.is_flag and value is True:
        return option.opts[0]
    if option.is_flag:
        return (option.secondary_opts or [None])[0] if value is False else None
    if isinstance(value, dict):
        return " ".join(f"{option.opts[0]} {key}={path}" for key, path in value.items())
    return f"{option.opts[0]}={value}"


def _inputs(call: ast.Call) -> list[tuple[str | None, object]]:
    """The (name, value) pairs ``call`` passes (a list comma-joined), a call's in its place (`task_ids=select_tasks(suite='gt10')`)."""
    inputs = [(node.id, _ALONE) if isinstance(node, ast.Name) else (None, _NOT_LITERAL) for node in call.args]
    for keyword in call.keywords:
        try:
            value = keyword.value if isinstance(keyword.value, ast.Call) else ast.literal_eval(keyword.value)
        except (ValueError, TypeError):  # not a literal
            value = _NOT_LITERAL
        inputs += _inputs(value) if isinstance(value, ast.Call) else [
            (keyword.arg, ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value)]
    return inputs


class _FlagsWithoutTypes:
    """Shows no value type for the flags (``--dry-run``, ``--no-progress``, ``--help``) in
    ``--help``: a flag takes no value, so ``<bool>`` beside it reads as one."""

    def get_params(self, ctx: typer.Context) -> list:
        params = super().get_params(ctx)
        for param in params:
            if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
                param.metavar = ""
        return params


class Command(_FlagsWithoutTypes, TyperCommand):
    """The class of every command of the app: its output names its flags (:func:`with_flags`), its ``--help`` no value types."""

    def invoke(self, ctx: typer.Context):
        output.console.words = output.errors.words = lambda text: with_flags(text, self)
        return super().invoke(ctx)


class CommandGroup(_FlagsWithoutTypes, TyperGroup):
    """The app's command group: an error of a command it runs (see :data:`EXIT_CODES`)
    ends the command with one ``error:`` line and its exit status instead of a traceback.
    Its own flags (``--version``, ``--help``) show no value type in ``--help``."""

    def main(self, *args, **kwargs):
        # piped --help at PIPED_HELP_WIDTH, unless TERMINAL_WIDTH says otherwise; a terminal keeps its own width
        if not os.environ.get("TERMINAL_WIDTH") and not sys.stdout.isatty():
            typer.rich_utils.MAX_WIDTH = output.PIPED_HELP_WIDTH
        return super().main(*args, **kwargs)

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # the reader of stdout went away (e.g. `| head`): nothing left to say
            # stdout to /dev/null, so that the interpreter's last flush cannot fail again; an stdout
            # without a file descriptor (a test runner's) has nothing to flush
            with contextlib.suppress(OSError, ValueError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(code=1) from None
        except Exception as error:
            code = next((code for kind, code in EXIT_CODES if isinstance(error, kind)), None)
            if code is None:  # not an error the CLI reports as a line: a bug, with its traceback
                raise
            output.errors.print(f"[red]error:[/red] {escape(message(error))}", highlight=False)  # in the command's words
            raise typer.Exit(code=code) from None
        finally:
            output.console.words = output.errors.words = str  # a command run next sets its own
