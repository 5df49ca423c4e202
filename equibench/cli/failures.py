"""The one place where errors become what a shell user sees: a single ``error:`` line on
stderr, with the library's parameter names written as the command's flags, and an exit
status. Commands let errors through; :class:`CommandGroup`, the app's group, catches them.
:class:`Command`, the class of every command, and :class:`CommandGroup` also keep value types
off flags in ``--help`` (Typer writes ``<bool>`` beside ``--dry-run``, as if it took a value).
"""

from __future__ import annotations

import os
import re
import sys

import typer
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup, TyperOption

from ..errors import EquibenchError, FolderInUseError, InvalidInputError
from . import output

#: Exit status by error class, first match wins: 2 for what the user changes in the command
#: (bad input; an output folder that another run holds), 1 for any other deliberate failure
#: (a diverged training, something unavailable). Other exceptions are bugs: a traceback.
EXIT_CODES = ((InvalidInputError, 2), (ValueError, 2), (OSError, 2), (FolderInUseError, 2), (EquibenchError, 1))

#: Library parameters whose option has another name (same meaning and unit).
OPTION_NAMES = {"timeout_s": "timeout", "n_layers": "layers", "n_heads": "heads", "out_dir": "out", "results_dirs": "results",
                "n_batches": "batches", "out_path": "out"}

_OS_ADVICE = {
    PermissionError: "choose a folder you can write to, or fix its permissions",
    IsADirectoryError: "pass a file path, not a folder",
    NotADirectoryError: "a part of the path is a file, not a folder: choose another path",
    FileNotFoundError: "check the path",
}


def exit_code(error: BaseException) -> int | None:
    """The exit status for ``error``; None when it is not one the CLI reports as a line."""
    return next((code for kind, code in EXIT_CODES if isinstance(error, kind)), None)


def message(error: Exception) -> str:
    """One line for ``error``; an OSError names its file and what to do."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        advice = _OS_ADVICE.get(type(error), "check the path and free disk space")
        return f"{error.strerror}: {str(error.filename)!r}; {advice}"
    return str(error)


def with_flags(text: str, command) -> str:
    """``text`` with the library parameters that are options of ``command`` written as its
    flags: ``name=True`` and ``name=False`` of a flag anywhere ("pass resume=True" -> "pass
    --resume", "--no-resume" where the flag has that form), ``name=value`` of any option
    anywhere (Python's quotes dropped: "device='cpu'" -> "--device=cpu"), one entry of a mapping
    option ("weights={'tabicl': 'x.ckpt'}" -> "--weights tabicl=x.ckpt"), a config field
    (``PriorConfig.max_classes`` -> ``--max-classes``), ``name_with_underscores`` anywhere, and a
    one-word name only where it opens the message ("jobs must be ..." -> "--jobs must be ...").
    ``command`` is the (click) command that ran, or None."""
    if command is None:
        return text
    options = [option for option in command.params if isinstance(option, TyperOption)]
    flags = {option.name: option.opts[0] for option in options}
    flags.update({alias: flags[name] for alias, name in OPTION_NAMES.items() if name in flags})
    switches = {option.name: (option.opts[0], option.secondary_opts[0] if option.secondary_opts else None)
                for option in options if option.is_flag}
    if switches:
        names = "|".join(re.escape(name) for name in sorted(switches, key=len, reverse=True))
        text = re.sub(rf"(?<![\w./\\-])({names})=(True|False)\b",
                      lambda match: switches[match.group(1)][match.group(2) == "False"] or match.group(), text)
    if not flags:
        return text
    every = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True))
    text = re.sub(rf"(?<![\w./\\-])({every})=\{{'([^']+)': (?:'([^']*)'|(\w+))\}}",
                  lambda match: f"{flags[match.group(1)]} {match.group(2)}={match.group(3) or match.group(4) or ''}",
                  text)
    text = re.sub(rf"(?<![\w./\\-])({every})=(?:'([^'\s]*)'|\"([^\"\s]*)\"|(?=[\w.:/-]))",
                  lambda match: f"{flags[match.group(1)]}={match.group(2) or match.group(3) or ''}", text)
    text = re.sub(rf"\b[A-Z]\w*Config\.({every})\b(?![\w/\\-]|\.\w)", lambda match: flags[match.group(1)], text)
    names = "|".join(re.escape(name) for name in sorted(flags, key=len, reverse=True) if "_" in name)
    if names:
        # not inside a path or a longer name ("Model.n_heads", "runs/nan_prob/model.pt")
        text = re.sub(rf"(?<![\w./\\-])({names})(?![\w/\\-]|\.\w)", lambda match: flags[match.group(1)], text)
    first = re.match(r"\w+\b", text)
    if first and first.group() in flags and "_" not in first.group():
        text = flags[first.group()] + text[first.end():]
    return text


def without_flag_types(params: list) -> list:
    """``params`` with no value type shown for the flags (``--dry-run``, ``--no-progress``,
    ``--help``) in ``--help``: a flag takes no value, so ``<bool>`` beside it reads as one."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""
    return params


class Command(TyperCommand):
    """The class of every command of the app: its flags show no value type in ``--help``."""

    def get_params(self, ctx: typer.Context) -> list:
        return without_flag_types(super().get_params(ctx))


class CommandGroup(TyperGroup):
    """The app's command group: an error of a command it runs (see :data:`EXIT_CODES`)
    ends the command with one ``error:`` line and its exit status instead of a traceback.
    Its own flags (``--version``, ``--help``) show no value type in ``--help``."""

    def get_params(self, ctx: typer.Context) -> list:
        return without_flag_types(super().get_params(ctx))

    def main(self, *args, **kwargs):
        output.widen_piped_help()
        return super().main(*args, **kwargs)

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except BrokenPipeError:  # the reader of stdout went away (e.g. `| head`): nothing left to say
            _silence_stdout()
            raise typer.Exit(code=1) from None
        except Exception as error:
            code = exit_code(error)
            if code is None:
                raise
            command = self.get_command(ctx, ctx.invoked_subcommand) if ctx.invoked_subcommand else None
            output.errors.print(f"[red]error:[/red] {escape(with_flags(message(error), command))}", highlight=False)
            raise typer.Exit(code=code) from None


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's last flush cannot fail again."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # an stdout without a file descriptor (a test runner's) has nothing to flush
        pass
