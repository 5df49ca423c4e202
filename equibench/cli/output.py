"""What the commands print: consoles whose lines are never cut, tables and JSON.

Results go to :data:`console` (stdout); progress bars, warnings and errors to :data:`errors`
(stderr), in the command's words. Commands reach both as attributes of this module, so tests can swap them.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table


class _Console(Console):
    words = staticmethod(str)  # the running command's words for a text (set by :class:`~.failures.Command`)

    def render_str(self, text: str, **kwargs):
        return super().render_str(self.words(text), **kwargs)


def _console(stderr: bool = False) -> Console:
    """A console whose lines are never hard-wrapped or cut: piped output uses unlimited
    width (tables at their natural width), a terminal soft-wraps long lines."""
    console = _Console(stderr=stderr, soft_wrap=True)
    if not console.is_terminal:
        console.width = 100_000
    return console


console = _console()
errors = _console(stderr=True)

#: Width of ``--help`` when it is piped: rich would lay it out 80 columns wide and cut long
#: option names with an ellipsis ("--grad-accumula…") and fold choices mid-word; at 160 every
#: option name and choice list fits on its line.
PIPED_HELP_WIDTH = 160


def table(*columns: str, title: str | None = None) -> Table:
    """A table whose cells fold onto more lines in a narrow terminal, never cut with an ellipsis."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def print_json(data) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    typer.echo(json.dumps(data, indent=2, default=str))
