"""The ``equibench`` command line: a thin Typer layer over the library functions."""

from __future__ import annotations

import platform

import torch
import typer
from rich.console import Console
from rich.table import Table

from . import __version__
from .model import CheckpointError, packaged_checkpoints, read_card

app = typer.Typer(
    help="Pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()


@app.callback()
def _root() -> None:
    """Pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines."""


@app.command()
def info() -> None:
    """Versions, compute device and the checkpoints packaged with this installation."""
    console.print(f"[bold]equibench[/bold] {__version__}")
    console.print(f"python {platform.python_version()}, torch {torch.__version__}")
    if torch.cuda.is_available():
        device = f"cuda ({torch.cuda.get_device_name(0)})"
    else:
        device = f"cpu ({torch.get_num_threads()} threads); no CUDA device"
    console.print(f"device: {device}")
    checkpoints = packaged_checkpoints()
    if not checkpoints:
        console.print(
            "packaged checkpoints: none yet. Pass checkpoint=PATH (a file written by "
            "`equibench pretrain`) to the classifiers."
        )
        return
    table = Table(title="packaged checkpoints")
    for column in ("file", "arch", "size", "parameters", "steps", "datasets seen", "hardware", "metrics"):
        table.add_column(column)
    for path in checkpoints:
        try:
            card = read_card(path)
        except CheckpointError as error:
            table.add_row(path.name, "[red]unreadable[/red]", "", "", "", "", "", str(error))
            continue
        metrics = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in card.metrics.items())
        table.add_row(
            path.name, card.arch, card.size, f"{card.n_parameters:,}", str(card.steps),
            f"{card.datasets_seen:,}", card.hardware, metrics,
        )
    console.print(table)


if __name__ == "__main__":
    app()
