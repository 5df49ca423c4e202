"""Commands that report: ``equivariance`` (measures and draws), ``report`` (from stored
results) and ``info`` (this installation)."""

from __future__ import annotations

import contextlib
import platform
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from .. import __version__
from ..baselines.settings import MethodOptions
from ..errors import InvalidInputError
from ..pretrain.hardware_history import NOT_RECORDED
from . import output
from .options import JsonOption, WeightsOption, comma_list, int_list, weights_map


@contextlib.contextmanager
def _progress_bar(name: str, unit: str, show: bool):
    """A bar on stderr for the ``(done, total)`` callback it yields; the bar and its task start at
    the callback's first call, once the inputs were checked: a bad input stays a single error line."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from ..progress import Progress

    bar = Progress(TextColumn(f"[bold]{name}"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                   TimeElapsedColumn(), console=output.errors, disable=not show)

    def advance(done: int, total: int) -> None:
        if not bar.task_ids:
            bar.start()
            bar.add_task(name, total=total)
        bar.update(bar.task_ids[0], completed=done, total=total)

    try:
        yield advance
    finally:
        if bar.live.is_started:
            bar.stop()


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
    toy_methods: Annotated[str, typer.Option(help="Methods of `equibench methods` also drawn in the toy, one member each (the paper's TabPFN and TabPFN-v2 by default); those that cannot run here are named in the notes; empty for none.")] = "tabpfn-v1,tabpfn-v2",
    weights: WeightsOption = None,
    device: Annotated[str, typer.Option(help="cpu, cuda or auto.")] = "cpu",
    progress: Annotated[bool, typer.Option(help="Show the progress bar (on stderr).")] = True,
) -> None:
    """Equivariance error (% arg-max changes when the classes are permuted) vs K and ensemble size, plus the 9-point toy; also of each PFN method given --weights (e.g. tabpfn-v2, tabicl, equitabpfn-official), through its classifier with one member."""
    from ..equivariance import EquivarianceConfig, run_equivariance
    from ..equivariance.methods import weighted_methods

    options = MethodOptions(weights=weights_map(weights), device=device)
    config = EquivarianceConfig(
        classes=int_list(classes, "--classes"), ensembles=int_list(ensembles, "--ensembles"),
        datasets=datasets, rows=rows, seed=seed, device=device, methods=weighted_methods(options),
        **({"checkpoints": tuple(checkpoints)} if checkpoints else {}),
    )
    with _progress_bar("equivariance", "(checkpoint or method, K)", progress) as advance:
        frame = run_equivariance(
            config, out, toy=toy, toy_grid=toy_grid, log=lambda line: output.errors.print(line, highlight=False),
            progress=advance, toy_methods=comma_list(toy_methods), options=options,
        )
    sizes = sorted(frame.ensemble.unique())
    table = output.table("checkpoint or method", "K", *(f"E={size}" for size in sizes),
                         title="arg-max changes (% of test rows) by ensemble size E")
    for (label, n_classes), group in frame.groupby(["checkpoint", "K"], sort=False):
        changes = dict(zip(group.ensemble, group.argmax_change_fraction))
        table.add_row(label, str(n_classes), *(f"{100 * changes[size]:.2f}" if size in changes else "" for size in sizes))
    output.console.print(table)
    for note in frame.attrs["notes"]:
        output.console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    output.console.print(f"results in {out}/ (README.md lists the files)")


def boundaries(
    out: Annotated[Path, typer.Option(help="Output directory (decision-boundaries.png/.pdf/.csv).")] = Path("runs/boundaries"),
    methods: Annotated[Optional[str], typer.Option(help="Comma-separated methods (see `equibench methods`). Default: equitabpfn, tabpfn-star, tabpfn-v1, tabpfn-v2, tabicl, knn, linear-model, random-forest, xgboost. Those that cannot run here are named, with why, in the caption.", show_default=False)] = None,
    samples: Annotated[int, typer.Option(help="Points per dataset (60% train, 40% test).")] = 100,
    grid: Annotated[int, typer.Option(help="Prediction points per side of each panel.")] = 50,
    seed: Annotated[int, typer.Option(help="Seeds the datasets, their splits and the methods.")] = 0,
    weights: WeightsOption = None,
    device: Annotated[str, typer.Option(help="Device of the PFN methods: cpu, cuda, auto.")] = "cpu",
    progress: Annotated[bool, typer.Option(help="Show the progress bar (on stderr).")] = True,
) -> None:
    """Binary decision boundaries of several methods on 3 two-dimensional datasets (moons, circles, linearly separable), the PFNs with one member."""
    from ..boundaries import BoundaryConfig, caption, run_boundaries

    config = BoundaryConfig(
        **({} if methods is None else {"methods": comma_list(methods)}),
        samples=samples, grid=grid, seed=seed,
        options=MethodOptions(weights=weights_map(weights), device=device),
    )
    with _progress_bar("boundaries", "(method, dataset)", progress) as advance:
        result, files = run_boundaries(config, out, progress=advance)
    frame = result.table()
    table = output.table("dataset", *frame.label.unique(), title="test accuracy")
    for dataset, rows in frame.groupby("dataset", sort=False):
        table.add_row(dataset, *(f"{value:.3f}" if status == "ok" else "skipped"
                                 for value, status in zip(rows.accuracy, rows.status)))
    output.console.print(table)
    output.console.print(escape(caption(result)), highlight=False)
    output.console.print("wrote " + ", ".join(escape(str(path)) for path in files), highlight=False, soft_wrap=True)


#: Where ``report`` looks for results when --results is not given (relative to the current
#: directory: the checkout's committed results), and where it writes their report.
RESULTS_ROOT = Path("results")
COMMITTED_REPORT = RESULTS_ROOT / "report"
#: ``report``'s --out when --results names other folders (the committed report stays as it is).
OTHER_REPORT = Path("runs") / "report"


def found_results(root: Path = RESULTS_ROOT) -> list[Path]:
    """The folders ``root``/<name> that hold results of ``equibench evaluate`` (cells/*.json or a
    results.csv), sorted by name: in a checkout, results/demo, results/gt10, results/large and results/le10."""
    if not root.is_dir():
        return []
    return sorted(folder for folder in root.iterdir() if folder.is_dir() and (
        (folder / "results.csv").is_file() or any((folder / "cells").glob("*.json"))))


def report_folders(results: list[Path] | None, out: Path | None) -> tuple[list[Path], Path]:
    """``report``'s inputs and output folder: those given, else the results/<name> folders here
    (:func:`found_results`); the output results/report when the inputs are those folders, else
    runs/report."""
    found = found_results()
    if not results:
        if not found:
            raise InvalidInputError(
                f"no results to report: {str(Path.cwd() / RESULTS_ROOT)!r} holds no folder of `equibench evaluate` "
                "results; pass --results DIR (a folder `equibench evaluate --out DIR` wrote), or run it in the "
                "equibench checkout")
        results = found
    if out is None:
        committed = {path.resolve() for path in found}
        out = COMMITTED_REPORT if found and {path.resolve() for path in results} == committed else OTHER_REPORT
    return list(results), out


def report(
    results_dirs: Annotated[Optional[list[Path]], typer.Option("--results", help="A results directory of `equibench evaluate` (repeat for several). Default: every results/<name> folder here that holds results (in the checkout: the committed results/demo, results/gt10, results/large, results/le10).", show_default=False)] = None,
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Output directory (REPORT.md, tables/, figures/). Default: results/report for the default results (it regenerates the committed report), else runs/report.", show_default=False)] = None,
) -> None:
    """Tables, figures and REPORT.md from stored evaluation results (runs no model).

    With no options, in the checkout: the committed report (results/report) regenerated from the
    committed results (results/demo, results/gt10, results/large, results/le10), byte for byte."""
    from ..report import build_report

    results_dirs, out_dir = report_folders(results_dirs, out_dir)
    path = build_report(results_dirs, out_dir)  # a failure stays one error line
    output.console.print(f"read {', '.join(escape(str(folder)) for folder in results_dirs)}", highlight=False, soft_wrap=True)
    output.console.print(str(path), highlight=False, soft_wrap=True)


def read_quality(checkpoint: Path) -> dict | None:
    """The scorecard shipped beside the packaged ``checkpoint`` (<name>.json, the JSON of
    ``equibench score --out``): its checkpoint, verdict, criterion lines, whether the bar was
    met, when and how it was scored; None when there is none, an ``error`` saying why when it
    is unreadable (not JSON, another format, a field missing) or scored another file."""
    import hashlib
    import json

    from ..scoring.bar import Criterion
    from ..scoring.scorecard import SCORECARD_FORMAT

    path = checkpoint.with_suffix(".json")
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise TypeError(f"a JSON {type(data).__name__}, not an object")
        if data.get("format") != SCORECARD_FORMAT:
            return {"source": str(path), "error": f"its scorecard {path.name} is unreadable: scorecard format "
                    f"{data.get('format')!r}, where this equibench reads format {SCORECARD_FORMAT}"}
        criteria = [Criterion.from_dict(criterion).line() for criterion in data["criteria"]]
        quality = {"source": str(path), "checkpoint": data["checkpoint"], "verdict": data["verdict"],
                   "met": data["met"], "criteria": criteria, "date": data["date"], "command": data["command"]}
        sha256 = str(data["sha256"])
    except FileNotFoundError:
        return None
    except KeyError as error:
        return {"source": str(path), "error": f"its scorecard {path.name} is unreadable: it has no {error.args[0]!r} field"}
    except (OSError, ValueError, TypeError, AttributeError) as error:
        return {"source": str(path), "error": f"its scorecard {path.name} is unreadable: not an `equibench score` "
                f"JSON scorecard ({error})"}
    if sha256 != hashlib.sha256(checkpoint.read_bytes()).hexdigest():
        return {"source": str(path), "error": f"it scored another file (sha256 {sha256[:12]}...)"}
    return quality


def _hardware_steps(history: list[dict]) -> dict[str, int]:
    """Steps per hardware of a card's ``hardware_history``, in order of first use."""
    steps: dict[str, int] = {}
    for segment in history or []:
        name = segment["hardware"] or NOT_RECORDED
        steps[name] = steps.get(name, 0) + segment["last_step"] - segment["first_step"] + 1
    return steps


def info_data() -> dict:
    """What `equibench info` reports, as plain data: per packaged checkpoint its card and its
    quality (:func:`read_quality`: the scorecard installed beside it)."""
    import torch

    from ..model import CheckpointError, packaged_checkpoints, read_card

    if torch.cuda.is_available():
        device = {"type": "cuda", "name": torch.cuda.get_device_name(0)}
    elif torch.backends.mps.is_available():
        device = {"type": "mps", "name": "Apple MPS"}
    else:
        device = {"type": "cpu", "threads": torch.get_num_threads()}
    checkpoints = []
    for path in packaged_checkpoints():
        try:
            card = read_card(path)
        except CheckpointError as error:
            checkpoints.append({"file": path.name, "path": str(path), "error": str(error)})
            continue
        quality = read_quality(path)
        checkpoints.append({"file": path.name, "path": str(path), **card.__dict__,
                            **({"quality": quality} if quality else {})})
    return {"equibench": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "device": device, "checkpoints": checkpoints}


def _model_shape(card: dict) -> str:
    """The size, with the layer count where the card's settings change it: ``small, 6 layers``."""
    layers = (card.get("training") or {}).get("model_overrides", {}).get("n_layers")
    return card["size"] if layers is None else f"{card['size']}, {layers} layers"


def _validation(card: dict) -> str:
    """The accuracies of the card's last validation: ``prior 0.712, iris 0.960, ...``."""
    return ", ".join(f"{key.removesuffix('_accuracy')} {value:.3f}" for key, value in (card.get("metrics") or {}).items()
                     if key.endswith("_accuracy")) or "none recorded"


def _quality_lines(card: dict, verbose: bool) -> tuple[str, list[str]]:
    """The quality column of ``info``'s table and the lines under it."""
    quality = card.get("quality")
    if quality is None or "error" in quality:
        why = "no `equibench score` scorecard beside it" if quality is None else escape(quality["error"])
        return "not scored", [f"{card['file']}: not scored against the quality bar here ({why}; "
                              f"`equibench score {escape(card['path'])}` measures it); its last validation accuracy: "
                              f"{_validation(card)}"]
    column = "[green]meets the bar[/green]" if quality["met"] else "[yellow]bar not met[/yellow]"
    shown = quality["criteria"] if verbose else [c for c in quality["criteria"] if not c.endswith(": met")]
    lines = [f"{card['file']}: {escape(quality['verdict'])} (scored {escape(quality['date'][:10])}: "
             f"{escape(quality['source'])})"]
    return column, lines + [f"  {escape(line)}" for line in shown]


def info(
    as_json: JsonOption = False,
    verbose: Annotated[bool, typer.Option("--verbose", help="Also every criterion of the quality bar and the step ranges each hardware trained.")] = False,
) -> None:
    """The packaged checkpoints (what they are, how good), then this installation's versions and device."""
    data = info_data()
    if as_json:
        output.print_json(data)
        return
    hardware = _print_checkpoints(data["checkpoints"], verbose)
    output.console.print(f"[bold]equibench[/bold] {__version__}; python {data['python']}, torch {data['torch']}")
    device = data["device"]
    if device["type"] in ("cuda", "mps"):
        output.console.print(f"device: {device['type']} ({device['name']})")
    else:
        threads = device["threads"]
        output.console.print(f"device: cpu ({threads} thread{'' if threads == 1 else 's'}); no CUDA device")
    if verbose:
        for line in hardware:
            output.console.print(line, highlight=False)
    elif hardware:
        output.console.print("(`--verbose` adds every criterion of the bar and the hardware that trained each "
                             "checkpoint; `--json` prints the whole cards)", highlight=False)


def _print_checkpoints(checkpoints: list[dict], verbose: bool) -> list[str]:
    """Print the table of the packaged checkpoints, their quality and their cards; return the
    lines on the hardware that trained them (long: ``info`` prints them last, with --verbose)."""
    if not checkpoints:
        output.console.print("packaged checkpoints: none yet. Pass checkpoint=PATH (a file written by "
                             "`equibench pretrain`) to the classifiers.")
        return []
    table = output.table("file", "arch", "size", "parameters", "steps", "datasets seen", "quality",
                         title="packaged checkpoints")
    quality, cards, hardware = [], [], []
    for card in checkpoints:
        if "error" in card:
            table.add_row(card["file"], "[red]unreadable[/red]", "", "", "", "", "")
            quality.append(f"{card['file']}: {escape(card['error'])}")
            continue
        column, lines = _quality_lines(card, verbose)
        table.add_row(card["file"], card["arch"], _model_shape(card), f"{card['n_parameters']:,}", f"{card['steps']:,}",
                      f"{card['datasets_seen']:,}", column)
        quality += lines
        validation = "" if column == "not scored" else f"last validation accuracy {_validation(card)}; "
        cards.append(f"{card['file']} card: {validation}{card['wall_time_s'] / 3600:.1f} h of training; prior rows "
                     f"up to {card['prior'].get('rows')}; seed {card['seed']}; made by equibench "
                     f"{card['equibench_version']} on {card['created'][:10]}")
        steps = "; ".join(f"{count:,} on {name}" for name, count in _hardware_steps(card.get("hardware_history")).items())
        hardware.append(f"{card['file']} steps by hardware: {escape(steps or 'not recorded')}")
        hardware.append(f"{card['file']} step ranges: {escape(card['hardware'])}")
    output.console.print(table)
    for line in quality + cards:
        output.console.print(line, highlight=False)
    return hardware
