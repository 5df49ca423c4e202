"""The ``equibench`` command line: a thin Typer layer over the library functions.

Heavy modules (torch, scikit-learn, pandas) are imported inside the commands that need
them, so that ``equibench --help`` and the listing commands start fast.
"""

from __future__ import annotations

import contextlib
import json
import platform
import signal
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import __version__

#: Mirrors equibench.model.SIZES (checked by a test) so that the CLI need not import torch.
SIZE_NAMES = ("tiny", "small", "medium", "base")
#: Mirrors equibench.optim.SCHEDULES (checked by a test), for the same reason.
SCHEDULE_NAMES = ("cosine", "wsd", "schedule-free")

app = typer.Typer(
    help="Pretrain, evaluate and report EquiTabPFN against TabPFN* and tabular baselines.",
    no_args_is_help=True,
)


def _console(stderr: bool = False) -> Console:
    """A console whose lines are never hard-wrapped or cut: piped output uses unlimited
    width (tables at their natural width), a terminal soft-wraps long lines."""
    console = Console(stderr=stderr, soft_wrap=True)
    if not console.is_terminal:
        console.width = 100_000
    return console


console = _console()
errors = _console(stderr=True)


def _table(*columns: str, title: str | None = None) -> Table:
    """A table whose cells fold onto more lines in a narrow terminal, never cut with an ellipsis."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _print_json(data) -> None:
    """Machine-readable output: one JSON document on stdout, nothing else."""
    typer.echo(json.dumps(data, indent=2, default=str))


def _fail(error: Exception, code: int = 2) -> typer.Exit:
    """Print an actionable error on one unwrapped line; the command exits with ``code`` (2: bad input)."""
    errors.print(f"[red]error:[/red] {escape(_message(error))}", highlight=False)
    return typer.Exit(code=code)


def _message(error: Exception) -> str:
    """One line for ``error``; an OSError names its file and what to do."""
    if isinstance(error, OSError) and error.filename is not None and error.strerror:
        advice = {
            PermissionError: "choose a folder you can write to, or fix its permissions",
            IsADirectoryError: "pass a file path, not a folder",
            NotADirectoryError: "a part of the path is a file, not a folder: choose another path",
            FileNotFoundError: "check the path",
        }.get(type(error), "check the path and free disk space")
        return f"{error.strerror}: {str(error.filename)!r}; {advice}"
    return str(error)


@contextlib.contextmanager
def _stop_on_sigterm():
    """Turn SIGTERM into KeyboardInterrupt while the block runs, so a terminated run stops
    like a Ctrl-C one: stored work kept, workers stopped, a clear message."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


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


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def info_data() -> dict:
    """What `equibench info` reports, as plain data."""
    import torch

    from .model import CheckpointError, packaged_checkpoints, read_card

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


@app.command()
def info(as_json: JsonOption = False) -> None:
    """Versions, compute device and the checkpoints packaged with this installation."""
    data = info_data()
    if as_json:
        _print_json(data)
        return
    console.print(f"[bold]equibench[/bold] {__version__}")
    console.print(f"python {data['python']}, torch {data['torch']}")
    device = data["device"]
    if device["type"] == "cuda":
        console.print(f"device: cuda ({device['name']})")
    else:
        console.print(f"device: cpu ({device['threads']} threads); no CUDA device")
    if not data["checkpoints"]:
        console.print(
            "packaged checkpoints: none yet. Pass checkpoint=PATH (a file written by "
            "`equibench pretrain`) to the classifiers."
        )
        return
    table = _table("file", "arch", "size", "parameters", "steps", "datasets seen", "train time",
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
    console.print(table)
    for line in details:
        console.print(line, highlight=False)


Arch = Enum("Arch", {name: name for name in ("equitabpfn", "tabpfn", "tabpfn-star")}, type=str)
_ARCH_ALIASES = {"tabpfn": "tabpfn-star"}
Size = Enum("Size", {name: name for name in SIZE_NAMES}, type=str)
Schedule = Enum("Schedule", {name: name for name in SCHEDULE_NAMES}, type=str)
WeightsDtype = Enum("WeightsDtype", {name: name for name in ("float32", "float16", "bfloat16")}, type=str)


def _parse_curriculum(text: str | None) -> tuple[tuple[int, int], ...]:
    """``"STEP:ROWS,STEP:ROWS"`` as ((step, rows), ...)."""
    if not text:
        return ()
    try:
        return tuple((int(step), int(rows)) for step, rows in (entry.split(":") for entry in text.split(",")))
    except ValueError:
        raise ValueError(
            f"--rows-curriculum takes 'STEP:ROWS,STEP:ROWS' with whole numbers (e.g. '1:128,2001:384'), got {text!r}"
        ) from None


@app.command()
def pretrain(
    out: Annotated[Path, typer.Option(help="Output directory (train_state.pt, model.pt, log.jsonl).")],
    arch: Annotated[Arch, typer.Option(help="equitabpfn, or tabpfn (= tabpfn-star, the non-equivariant model).")] = "equitabpfn",
    size: Annotated[Size, typer.Option(help="Named model size.")] = "small",
    steps: Annotated[int, typer.Option(help="Optimizer steps.")] = 1000,
    batch_size: Annotated[int, typer.Option(help="Datasets per micro-batch (per process).")] = 8,
    grad_accumulation: Annotated[int, typer.Option(help="Micro-batches per optimizer step.")] = 1,
    rows: Annotated[int, typer.Option(help="Rows per synthetic dataset (train + test).")] = 1152,
    nan_prob: Annotated[float, typer.Option(help="Share of prior datasets given missing values.")] = 0.0,
    lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 1e-4,
    warmup_steps: Annotated[int, typer.Option(help="Linear warm-up steps before the cosine decay.")] = 100,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay.")] = 0.0,
    grad_clip: Annotated[float, typer.Option(help="Clip the gradient norm at this value.")] = 1.0,
    adam_beta2: Annotated[float, typer.Option(help="Adam's second-moment decay beta2.")] = 0.999,
    schedule: Annotated[Schedule, typer.Option(help="Learning-rate schedule after the warm-up: cosine decay, warm-up-stable-decay (wsd), or schedule-free AdamW (no horizon).")] = "cosine",
    decay_fraction: Annotated[float, typer.Option(help="wsd: share of the steps in the final cool-down.")] = 0.2,
    rows_curriculum: Annotated[Optional[str], typer.Option(help="Short-to-long curriculum 'STEP:ROWS,...': from STEP on, datasets have ROWS rows (before the first STEP, --rows).")] = None,
    tree_fraction: Annotated[float, typer.Option(help="Share of prior datasets whose target is a sum of random axis-aligned trees (0: the paper's v1 prior).")] = 0.0,
    max_classes: Annotated[int, typer.Option(help="Most classes of a prior dataset (TabPFN* takes at most 10).")] = 10,
    p_binary: Annotated[float, typer.Option(help="Share of prior batches with two classes.")] = 0.5,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    amp: Annotated[Optional[bool], typer.Option("--amp/--no-amp", help="bf16 autocast (default: on for CUDA only).")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the model init and the prior stream.")] = 0,
    checkpoint_every: Annotated[int, typer.Option(help="Steps between atomic checkpoints.")] = 100,
    validate_every: Annotated[int, typer.Option(help="Steps between validations.")] = 200,
    validation_batches: Annotated[int, typer.Option(help="Fixed prior batches used for validation.")] = 8,
    bundled_validation: Annotated[bool, typer.Option(help="Also validate on iris, wine, breast_cancer, digits.")] = True,
    resume: Annotated[bool, typer.Option(help="Continue the run saved in --out exactly.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Start a new run in --out, replacing the model.pt, config.json, log.jsonl and train_state.pt there.")] = False,
    d_model: Annotated[Optional[int], typer.Option(help="Override the size's width.")] = None,
    layers: Annotated[Optional[int], typer.Option(help="Override the size's layer count.")] = None,
    heads: Annotated[Optional[int], typer.Option(help="Override the size's attention heads.")] = None,
    mlp_hidden: Annotated[Optional[int], typer.Option(help="Override the size's MLP width.")] = None,
    norm_first: Annotated[Optional[bool], typer.Option("--pre-ln/--post-ln", help="Pre- or post-LayerNorm blocks (default: the size's, post-LN as in the paper).")] = None,
    qk_norm: Annotated[Optional[bool], typer.Option("--qk-norm/--no-qk-norm", help="RMS-normalise queries and keys (default: the size's, off).")] = None,
    init_from: Annotated[Optional[Path], typer.Option(help="Start from this checkpoint's weights (continued pretraining; same arch and size).")] = None,
    time_limit: Annotated[Optional[float], typer.Option(help="Minutes: stop, checkpointed, before a step would end later (for wall-time limits); continue with --resume.")] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Pretrain EquiTabPFN or TabPFN* on the synthetic prior (torchrun for several processes)."""
    from .pretrain import NonFiniteLossError, TrainConfig
    from .pretrain import pretrain as run_pretraining
    from .prior import PriorConfig

    overrides = {
        key: value
        for key, value in {"d_model": d_model, "n_layers": layers, "n_heads": heads, "mlp_hidden": mlp_hidden,
                           "norm_first": norm_first, "qk_norm": qk_norm}.items()
        if value is not None
    }
    try:
        curriculum = _parse_curriculum(rows_curriculum)
        config = TrainConfig(
            arch=_ARCH_ALIASES.get(Arch(arch).value, Arch(arch).value), size=Size(size).value, steps=steps, batch_size=batch_size,
            grad_accumulation=grad_accumulation, lr=lr, warmup_steps=warmup_steps, weight_decay=weight_decay,
            grad_clip=grad_clip, adam_beta2=adam_beta2, schedule=Schedule(schedule).value,
            decay_fraction=decay_fraction, rows_curriculum=curriculum, seed=seed, device=device, amp=amp, checkpoint_every=checkpoint_every, validate_every=validate_every,
            validation_batches=validation_batches, bundled_validation=bundled_validation, model_overrides=overrides,
            init_from=None if init_from is None else str(init_from),
        )
        prior = PriorConfig(rows=rows, nan_prob=nan_prob, tree_fraction=tree_fraction, max_classes=max_classes,
                            p_binary=p_binary)
        if time_limit is not None and not time_limit > 0:
            raise ValueError(f"--time-limit takes a positive number of minutes, got {time_limit}")
        if resume and overwrite:
            raise ValueError("--resume continues the run in --out and --overwrite replaces it: pass one of them")
        outcome = run_pretraining(
            config, prior, out, resume=resume, progress=progress,
            time_limit_s=None if time_limit is None else 60 * time_limit, overwrite=overwrite,
        )
    except NonFiniteLossError as error:
        raise _fail(error, code=1) from None
    except (ValueError, OSError) as error:  # a CheckpointError is a ValueError
        raise _fail(error) from None
    if outcome.finished:
        console.print(f"model written to {outcome.model_path}")
    else:
        console.print(
            f"stopped by --time-limit at step {outcome.step} of {outcome.steps}, checkpointed; {outcome.model_path} "
            "holds the model so far. Continue with the same command plus --resume."
        )


@app.command()
def export(
    run_or_checkpoint: Annotated[Path, typer.Argument(help="A pretraining output directory or a model.pt file.")],
    out: Annotated[Path, typer.Option(help="Destination file, e.g. model/checkpoints/equitabpfn-small.pt.")],
    weights_dtype: Annotated[WeightsDtype, typer.Option(help="Storage precision of the weights.")] = "float16",
    overwrite: Annotated[bool, typer.Option(help="Replace --out when it exists.")] = False,
) -> None:
    """Copy a trained model into a (smaller) shippable checkpoint, keeping its model card."""
    from .model import load_checkpoint, save_checkpoint

    source = run_or_checkpoint / "model.pt" if run_or_checkpoint.is_dir() else run_or_checkpoint
    try:
        if out.is_dir():
            raise ValueError(f"--out {str(out)!r} is a folder; pass a file path such as {str(out / 'model.pt')!r}")
        if out.exists() and not overwrite:
            raise ValueError(f"--out {str(out)!r} already exists; pass --overwrite to replace it, or another path")
        model, card = load_checkpoint(source)
        path = save_checkpoint(model, out, card, weights_dtype=WeightsDtype(weights_dtype).value)
    except (ValueError, OSError) as error:
        raise _fail(error) from None
    console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {card.steps} steps)")


@app.command()
def curves(
    runs: Annotated[list[Path], typer.Argument(help="Pretraining output directories (label = folder name).")],
    out: Annotated[Path, typer.Option(help="PNG (or PDF) file to write.")],
    smoothing: Annotated[int, typer.Option(help="Moving-average window of the training loss (steps).")] = 50,
) -> None:
    """Training curves (loss, validation accuracies vs step) of one or more pretraining runs."""
    from .training_curves import plot_training_curves

    try:
        path = plot_training_curves({run.name: run for run in runs}, out, smoothing=smoothing)
    except (ValueError, OSError) as error:
        raise _fail(error) from None
    console.print(f"wrote {path}")


prior_app = typer.Typer(help="Inspect the synthetic pretraining prior.", no_args_is_help=True)
app.add_typer(prior_app, name="prior")


@prior_app.command("preview")
def prior_preview(
    out: Annotated[Path, typer.Option(help="PNG (or PDF) file to write.")],
    rows: Annotated[int, typer.Option(help="Rows per synthetic dataset.")] = 1152,
    seed: Annotated[int, typer.Option(help="Seed of the sampled batches.")] = 0,
    batches: Annotated[int, typer.Option(help="Batches sampled for the distributions.")] = 64,
) -> None:
    """A figure of sampled datasets (2-D projections by class) and the K, F and class-balance distributions."""
    from .prior import PriorConfig
    from .prior_preview import preview_prior

    try:
        path = preview_prior(out, PriorConfig(rows=rows), seed=seed, n_batches=batches)
    except (ValueError, OSError) as error:
        raise _fail(error) from None
    console.print(f"wrote {path}")


def _int_list(text: str, option: str) -> tuple[int, ...]:
    """``"0,1,2"`` or ``"0-2"`` (or a mix) -> (0, 1, 2)."""
    values = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, _, high = part.partition("-")
        try:
            low, high = int(low), int(high) if high else None
        except ValueError:
            raise ValueError(f"{option} takes comma-separated integers or ranges like 0-2, got {text!r}") from None
        if high is not None and high < low:
            raise ValueError(f"{option}: the range {part} runs backwards; write it low-high, e.g. {high}-{low}")
        values.extend(range(low, high + 1) if high is not None else [low])
    if not values:
        raise ValueError(f"{option} is empty; give e.g. {option} 0,1,2")
    return tuple(dict.fromkeys(values))


def _method_list(text: str) -> tuple[str, ...]:
    from .baselines.registry import FAST_METHODS, METHODS

    names = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        names.extend({"all": list(METHODS), "fast": FAST_METHODS}.get(part, [part]))
    return tuple(dict.fromkeys(names))


@app.command()
def evaluate(
    suite: Annotated[str, typer.Option(help="gt10, le10, demo, or a suite file (.toml/.yaml with a `tasks` list of OpenML task ids, demo-<name> and {file, target, folds} entries for your own CSV/parquet tables).")],
    out: Annotated[Optional[Path], typer.Option(help="Results directory (default results/<suite>).")] = None,
    methods: Annotated[str, typer.Option(help="Comma-separated methods; `all`, `fast` (PFNs + classical) or names (see `equibench methods`).")] = "all",
    folds: Annotated[Optional[str], typer.Option(help="Folds to run, e.g. 0,1,2 or 0-2 (default: all).")] = None,
    ensembles: Annotated[str, typer.Option(help="Ensemble sizes of the PFN methods, e.g. 1,4,16 (one variant each).")] = "1",
    jobs: Annotated[Optional[int], typer.Option(help="Cells run in parallel worker processes on this machine (default: its cores / --threads-per-cell, or 1 with a --device other than cpu; 1 runs them in this process).", show_default=False)] = None,
    scheduler: Annotated[Optional[str], typer.Option(envvar="EQUIBENCH_SCHEDULER", help="Run the cells on a Dask cluster: its scheduler address (tcp://host:8786), a scheduler file (.json), or local:N for N worker processes here. See docs/DISTRIBUTED.md.")] = None,
    openml_cache: Annotated[Optional[Path], typer.Option(help="OpenML cache in openml's layout (copied, never modified); default $OPENML_CACHE_DIR.")] = None,
    tabpfn_weights: Annotated[Optional[Path], typer.Option(help="Folder with TabPFN v1/v2 weights; default $EQUIBENCH_TABPFN_WEIGHTS. Without, their cells are skipped.")] = None,
    equitabpfn_checkpoint: Annotated[str, typer.Option(help="EquiTabPFN checkpoint file, or `default` (the packaged one).")] = "default",
    tabpfn_star_checkpoint: Annotated[str, typer.Option(help="TabPFN* checkpoint file, or `default`.")] = "default",
    seed: Annotated[int, typer.Option(help="Seed of every method and of the preprocessing.")] = 0,
    device: Annotated[str, typer.Option(help="Device of the PFN methods: cpu, cuda, auto.")] = "cpu",
    threads_per_cell: Annotated[int, typer.Option(help="Torch and BLAS threads of every cell, whatever --jobs or --scheduler: threads change the numbers, so this is a run setting like --seed.")] = 1,
    dry_run: Annotated[bool, typer.Option(help="List the cells (and which are already done) without running them.")] = False,
    rerun_changed: Annotated[bool, typer.Option(help="Replace stored cells of methods whose settings (checkpoint, weights) changed; all cells if --threads-per-cell changed.")] = False,
    allow_failures: Annotated[bool, typer.Option(help="Exit 0 even when cells of this run failed (they are stored as failed rows either way).")] = False,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Evaluate methods on every task and fold of a suite; rerun the same command to resume.

    Exit status: 0 done, 1 cells of this run failed (rerun to retry them; see --allow-failures),
    2 bad input, 130 interrupted (Ctrl-C or SIGTERM; rerun to resume)."""
    from .backends import LocalBackend, check_backend_options, make_backend
    from .evaluate import EvaluateConfig
    from .evaluate import evaluate as run_evaluation
    from .model import CheckpointError
    from .openml_data import TaskUnavailableError
    from .outdir_lock import FolderInUseError

    try:
        config = EvaluateConfig(
            suite=suite, methods=_method_list(methods), folds=None if folds is None else _int_list(folds, "--folds"),
            ensembles=_int_list(ensembles, "--ensembles"), seed=seed,
            openml_cache=None if openml_cache is None else str(openml_cache),
            tabpfn_weights=None if tabpfn_weights is None else str(tabpfn_weights),
            equitabpfn_checkpoint=equitabpfn_checkpoint, tabpfn_star_checkpoint=tabpfn_star_checkpoint, device=device,
            threads_per_cell=threads_per_cell,
        )
        out = out or Path("results") / Path(suite).stem
        check_backend_options(jobs, scheduler)
        if jobs is None and device != "cpu":
            jobs = 1  # one process owns the GPU rather than one CUDA context per core
        with _stop_on_sigterm(), LocalBackend() if dry_run else make_backend(jobs, scheduler, threads_per_cell) as backend:
            summary = run_evaluation(
                config, out, backend=backend, dry_run=dry_run, progress=progress, console=errors,
                rerun_changed=rerun_changed,
            )
    except (ValueError, OSError, CheckpointError, TaskUnavailableError, FolderInUseError) as error:
        raise _fail(error) from None
    except KeyboardInterrupt:
        errors.print(f"[yellow]interrupted:[/yellow] every finished cell is stored in {escape(str(out))}; rerun the "
                     "same command to resume", highlight=False)
        raise typer.Exit(code=130) from None
    if summary.damaged:
        errors.print(f"[yellow]{len(summary.damaged)} stored cells were damaged and "
                     f"{'will be' if dry_run else 'were'} recomputed[/yellow], e.g. {escape(next(iter(summary.damaged.values())))}",
                     highlight=False)
    for task_id, message in summary.task_errors.items():
        errors.print(f"[yellow]task {task_id} unavailable:[/yellow] {escape(message)}", highlight=False)
    if dry_run:
        done = {cell.key for cell in summary.cells} - {cell.key for cell in summary.pending}
        table = _table("task", "fold", "method", "variant", "state", title=f"{len(summary.cells)} cells, {len(summary.pending)} to run")
        for cell in summary.cells:
            table.add_row(cell.task_id, str(cell.fold), cell.method, cell.variant, "done" if cell.key in done else "pending")
        console.print(table)
        return
    written = ", ".join(f"{n} {status}" for status, n in sorted(summary.counts.items())) or "nothing new"
    console.print(f"{len(summary.cells)} cells ({len(summary.cells) - len(summary.pending)} already done); this run: {written}")
    console.print(f"results in {out}/results.csv")
    if summary.counts["failed"]:
        errors.print(f"[red]{summary.counts['failed']} cells of this run failed[/red]: see the reason column of "
                     f"{escape(str(out))}/results.csv and {escape(str(out))}/tracebacks/; rerun the command to retry them",
                     highlight=False)
        if not allow_failures:
            raise typer.Exit(code=1)


@app.command()
def download(
    suite: Annotated[Optional[str], typer.Option(help="gt10, le10 or a suite file (.toml/.yaml); its OpenML tasks are fetched (demo tasks need none).")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="The OpenML cache to fill (created if missing); give it to `evaluate --openml-cache` later.")] = None,
    tasks: Annotated[Optional[str], typer.Option(help="Only these OpenML task ids, e.g. 5,7,41 (of the suite, if one is given).")] = None,
    verify: Annotated[Optional[Path], typer.Option(help="Check this cache offline instead (files parse, 10 folds cover every row once, classes); the tasks of --suite/--tasks, default all it holds.")] = None,
    server: Annotated[str, typer.Option(help="OpenML REST API to fetch from (a mirror or a local server).")] = "https://www.openml.org/api/v1/xml",
    retries: Annotated[int, typer.Option(help="Further attempts at a task after a transient error (connection, timeout, 5xx), with doubling waits.")] = 4,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the server to connect or send data.")] = 60.0,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Fetch a suite's OpenML tasks into a portable cache (resumable), or --verify a cache offline."""
    from .cache_check import cached_task_ids, check_cache, fix_command
    from .download import DownloadOptions, download_tasks, select_tasks, tasks_table

    try:
        task_list = None if tasks is None else [str(task_id) for task_id in _int_list(tasks, "--tasks")]
        if verify is not None:
            if cache is not None:
                raise ValueError("--verify names the cache to check; leave out --cache")
            if not (verify / "org").is_dir():
                raise ValueError(f"{str(verify)!r} is not an OpenML cache (no org/ folder inside); pass the folder given to --cache")
            task_ids = select_tasks(suite, task_list) if suite or task_list else cached_task_ids(verify)
            checks = check_cache(verify, [task_id for task_id in task_ids if not task_id.startswith("demo-")])
        else:
            if cache is None:
                raise ValueError("--cache DIR is required: the folder to download into (or pass --verify DIR)")
            options = DownloadOptions(server=server, retries=retries, timeout_s=timeout)
            summary = download_tasks(select_tasks(suite, task_list), cache, options, progress=progress, console=errors)
    except ValueError as error:
        raise _fail(error) from None
    if verify is not None:
        console.print(tasks_table([(check, check.status) for check in checks], f"{len(checks)} tasks in {verify}"))
        bad = [check for check in checks if not check.ok]
        for check in bad:
            console.print(f"[red]task {check.task_id}[/red]: {escape(check.describe())}", highlight=False)
        if bad:
            console.print(f"fix: {escape(fix_command(verify, [check.task_id for check in bad]))}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=1)
        console.print(f"all {len(checks)} tasks complete; evaluate offline with --openml-cache {escape(str(verify))}")
        return
    console.print(tasks_table([(result.check, result.status) for result in summary.results], f"{cache}"))
    for result in summary.results:
        if result.error:
            console.print(f"[red]task {result.check.task_id}[/red]: {escape(result.error)}", highlight=False)
    if summary.failed:
        console.print(f"[red]missing tasks[/red]: {', '.join(summary.failed)}; rerun the same command to retry them "
                      "(what is complete is kept)", highlight=False)
        raise typer.Exit(code=1)
    console.print(f"cache complete; check it with `equibench download --verify {escape(str(cache))}`, "
                  f"use it with `equibench evaluate --openml-cache {escape(str(cache))}`", highlight=False)


def methods_data() -> list[dict]:
    """What `equibench methods` reports, as plain data."""
    import importlib.util

    from .baselines.registry import METHODS

    rows = []
    for spec in METHODS.values():
        missing = spec.requires is not None and importlib.util.find_spec(spec.requires.module) is None
        rows.append({
            "method": spec.name, "label": spec.label, "variants": "ensemble sizes" if spec.ensembles else "default",
            "ready": not missing, "install": f"pip install \"{spec.requires.pip}\"" if missing else None,
            "needs_weights": spec.needs_weights,
        })
    return rows


@app.command()
def methods(as_json: JsonOption = False) -> None:
    """The methods `equibench evaluate` can run, and whether each can run here."""
    rows = methods_data()
    if as_json:
        _print_json(rows)
        return
    table = _table("method", "label", "variants", "status")
    for row in rows:
        status = f"[yellow]needs {escape(row['install'])}[/yellow]" if row["install"] else "[green]ready[/green]"
        if row["needs_weights"]:
            status += " (and --tabpfn-weights)"
        table.add_row(row["method"], row["label"], row["variants"], status)
    console.print(table)


@app.command()
def suites(as_json: JsonOption = False) -> None:
    """The built-in task suites, with all their task ids."""
    from .suites import BUILTIN_SUITES

    if as_json:
        _print_json([{"suite": s.name, "tasks": len(s.task_ids), "task_ids": list(s.task_ids)} for s in BUILTIN_SUITES.values()])
        return
    table = _table("suite", "tasks", "task ids")
    for suite in BUILTIN_SUITES.values():
        table.add_row(suite.name, str(len(suite.task_ids)), ", ".join(suite.task_ids))
    console.print(table)


@app.command()
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

    from .equivariance import EquivarianceConfig, run_equivariance

    bar = Progress(TextColumn("[bold]equivariance"), BarColumn(), MofNCompleteColumn(), TextColumn("(checkpoint, K)"),
                   TimeElapsedColumn(), console=errors, disable=not progress)
    task = bar.add_task("equivariance", total=None)

    def report(done: int, total: int) -> None:
        # the bar starts once the checkpoints loaded: a bad input stays a single error line
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total)

    try:
        config = EquivarianceConfig(
            classes=_int_list(classes, "--classes"), ensembles=_int_list(ensembles, "--ensembles"),
            datasets=datasets, rows=rows, seed=seed, device=device,
            **({"checkpoints": tuple(checkpoints)} if checkpoints else {}),
        )
        try:
            frame = run_equivariance(
                config, out, toy=toy, toy_grid=toy_grid, log=lambda line: bar.console.print(line, highlight=False),
                progress=report,
            )
        finally:
            if bar.live.is_started:
                bar.stop()
    except (ValueError, OSError) as error:
        raise _fail(error) from None
    table = _table("checkpoint", "K", *(f"E={size}" for size in config.ensembles),
                   title="arg-max changes (% of test rows) by ensemble size E")
    for (label, n_classes), group in frame.groupby(["checkpoint", "K"], sort=False):
        table.add_row(label, str(n_classes), *(f"{100 * value:.2f}" for value in group.argmax_change_fraction))
    console.print(table)
    for note in frame.attrs["notes"]:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    console.print(f"results in {out}/ (README.md lists the files)")


@app.command()
def report(
    results: Annotated[list[Path], typer.Option(help="A results directory of `equibench evaluate` (repeat for several).")],
    out: Annotated[Path, typer.Option(help="Output directory (REPORT.md, tables/, figures/).")] = Path("results/report"),
) -> None:
    """Tables, figures and REPORT.md from stored evaluation results (runs no model)."""
    from .outdir_lock import FolderInUseError
    from .report import build_report

    try:
        path = build_report(results, out)
    except (ValueError, OSError, FolderInUseError) as error:
        raise _fail(error) from None
    console.print(str(path), highlight=False, soft_wrap=True)


if __name__ == "__main__":
    app()
