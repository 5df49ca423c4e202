"""Commands that report: ``equivariance`` (measures and draws), ``report`` (from stored
results) and ``info`` (this installation)."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from .. import __version__
from . import output
from .options import JsonOption, int_list


def equivariance(
    checkpoints: Annotated[Optional[list[Path]], typer.Option("--checkpoints", help="Checkpoint file (repeat the option for several); default: the packaged EquiTabPFN and TabPFN* ones.")] = None,
    classes: Annotated[str, typer.Option(help="Class counts K, e.g. 2,4,8,10 or 2-10 (TabPFN* skips K > 10).")] = "2,4,8,10",
    ensembles: Annotated[str, typer.Option(help="Permutation-ensemble sizes, e.g. 1,2,4,8,16.")] = "1,2,4,8,16",
    datasets: Annotated[int, typer.Option(help="Prior datasets per K.")] = 512,
    rows: Annotated[int, typer.Option(help="Rows per prior dataset: the first half are train rows, the rest test rows.")] = 256,
    seed: Annotated[int, typer.Option(help="Seeds the prior datasets and the class permutations.")] = 0,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("results/equivariance"),
    toy: Annotated[bool, typer.Option("--toy/--no-toy", help="Also draw the 9-point 3x3-grid illustration.")] = True,
    toy_grid: Annotated[int, typer.Option(help="Points per side of the toy's prediction grid.")] = 150,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "cpu",
    progress: Annotated[bool, typer.Option(help="Show the progress bar (on stderr).")] = True,
) -> None:
    """Equivariance error (% arg-max changes when the classes are permuted) vs K and ensemble size, plus the 9-point toy."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..equivariance import EquivarianceConfig, run_equivariance

    bar = Progress(TextColumn("[bold]equivariance"), BarColumn(), MofNCompleteColumn(), TextColumn("(checkpoint, K)"),
                   TimeElapsedColumn(), console=output.errors, disable=not progress)
    task = bar.add_task("equivariance", total=None)

    def advance(done: int, total: int) -> None:
        # the bar starts once the checkpoints loaded: a bad input stays a single error line
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total)

    config = EquivarianceConfig(
        classes=int_list(classes, "--classes"), ensembles=int_list(ensembles, "--ensembles"),
        datasets=datasets, rows=rows, seed=seed, device=device,
        **({"checkpoints": tuple(checkpoints)} if checkpoints else {}),
    )
    try:
        frame = run_equivariance(
            config, out, toy=toy, toy_grid=toy_grid, log=lambda line: bar.console.print(line, highlight=False),
            progress=advance,
        )
    finally:
        if bar.live.is_started:
            bar.stop()
    table = output.table("checkpoint", "K", *(f"E={size}" for size in config.ensembles),
                         title="arg-max changes (% of test rows) by ensemble size E")
    for (label, n_classes), group in frame.groupby(["checkpoint", "K"], sort=False):
        table.add_row(label, str(n_classes), *(f"{100 * value:.2f}" for value in group.argmax_change_fraction))
    output.console.print(table)
    for note in frame.attrs["notes"]:
        output.console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    output.console.print(f"results in {out}/ (README.md lists the files)")


def report(
    results: Annotated[list[Path], typer.Option(help="A results directory of `equibench evaluate` (repeat for several).")],
    out: Annotated[Path, typer.Option(help="Output directory (REPORT.md, tables/, figures/).")] = Path("results/report"),
) -> None:
    """Tables, figures and REPORT.md from stored evaluation results (runs no model)."""
    from ..report import build_report

    path = build_report(results, out)
    output.console.print(str(path), highlight=False, soft_wrap=True)


def info_data() -> dict:
    """What `equibench info` reports, as plain data."""
    import torch

    from ..model import CheckpointError, packaged_checkpoints, read_card

    if torch.cuda.is_available():
        device = {"type": "cuda", "name": torch.cuda.get_device_name(0)}
    else:
        device = {"type": "cpu", "threads": torch.get_num_threads()}
    checkpoints = []
    for path in packaged_checkpoints():
        try:
            card = read_card(path)
        except CheckpointError as error:
            checkpoints.append({"file": path.name, "path": str(path), "error": str(error)})
            continue
        checkpoints.append({"file": path.name, "path": str(path), **card.__dict__})
    return {"equibench": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "device": device, "checkpoints": checkpoints}


def info(as_json: JsonOption = False) -> None:
    """Versions, compute device and the checkpoints packaged with this installation."""
    data = info_data()
    if as_json:
        output.print_json(data)
        return
    output.console.print(f"[bold]equibench[/bold] {__version__}")
    output.console.print(f"python {data['python']}, torch {data['torch']}")
    device = data["device"]
    if device["type"] == "cuda":
        output.console.print(f"device: cuda ({device['name']})")
    else:
        output.console.print(f"device: cpu ({device['threads']} threads); no CUDA device")
    if not data["checkpoints"]:
        output.console.print(
            "packaged checkpoints: none yet. Pass checkpoint=PATH (a file written by "
            "`equibench pretrain`) to the classifiers."
        )
        return
    table = output.table("file", "arch", "size", "parameters", "steps", "datasets seen", "train time",
                   title="packaged checkpoints")
    details = []
    for card in data["checkpoints"]:
        if "error" in card:
            table.add_row(card["file"], "[red]unreadable[/red]", "", "", "", "", "")
            details.append(f"{card['file']}: {escape(card['error'])}")
            continue
        table.add_row(
            card["file"], card["arch"], card["size"], f"{card['n_parameters']:,}", str(card["steps"]),
            f"{card['datasets_seen']:,}", f"{card['wall_time_s'] / 3600:.1f} h",
        )
        metrics = ", ".join(
            f"{k.removesuffix('_accuracy')} {v:.3f}" for k, v in card["metrics"].items() if k.endswith("_accuracy")
        )
        details.append(f"{card['file']}: trained on {card['hardware']}; validation accuracy: {metrics}")
    output.console.print(table)
    for line in details:
        output.console.print(line, highlight=False)
