"""The ``equibench`` command line: a thin Typer layer over the library functions.

The app is assembled here from the commands of :mod:`.training`, :mod:`.evaluation` and
:mod:`.reporting`. Commands let errors through: :mod:`.failures` turns them into one
``error:`` line and an exit status, in one place. Heavy modules (torch, scikit-learn,
pandas) are imported inside the commands that need them, so that ``equibench --help`` and
the listing commands start fast.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .. import __version__
from . import conversion, evaluation, reporting, scoring, training
from .failures import Command, CommandGroup

__all__ = ["app"]

app = typer.Typer(cls=CommandGroup, no_args_is_help=True)  # its help: the docstring of _root
prior_app = typer.Typer(cls=CommandGroup, help="Inspect the synthetic pretraining prior.", no_args_is_help=True)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"equibench {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines."""


for _command in (
    reporting.info, training.pretrain, training.export, training.curves, evaluation.evaluate, evaluation.download,
    evaluation.methods, evaluation.suites, reporting.equivariance, reporting.report, scoring.score,
    reporting.boundaries,
    conversion.convert_official,
):
    app.command(cls=Command)(_command)
prior_app.command("preview", cls=Command)(training.prior_preview)
app.add_typer(prior_app, name="prior")
