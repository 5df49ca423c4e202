"""What the commands print: consoles whose lines are never cut, tables and JSON.

Results go to :data:`console` (stdout); progress bars, warnings and errors to :data:`errors`
(stderr). Commands reach both as attributes of this module, so tests can swap them.
"""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table


def _console(stderr: bool = False) -> Console:
    """A console whose lines are never hard-wrapped or cut: piped output uses unlimited
    width (tables at their natural width), a terminal soft-wraps long lines."""
    console = Console(stderr=stderr, soft_wrap=True)
    if not console.is_terminal:
        console.width = 100_000
    return console


console = _console()
errors = _console(stderr=True)


def table(*columns: str, title: str | None = None) -> Table:
    """A table whose cells fold onto more lines in a narrow terminal, never cut with an ellipsis."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def print_json(data) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    typer.echo(json.dumps(data, indent=2, default=str))
