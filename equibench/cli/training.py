"""Commands of the pretraining workflow: ``pretrain``, ``export``, ``curves`` and
``prior preview``."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from dataclasses import fields
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

from ..errors import InvalidInputError

# torch-free configuration modules: --help shows their defaults without importing torch
from ..model.config import ARCH_ALIASES, ARCHITECTURES, SIZES
from ..pretrain.config import SCHEDULES, TrainConfig
from ..pretrain.recipe import RECIPES_DIR
from ..prior.config import FEATURE_COUNTS, PriorConfig
from . import output
from .options import check_out_file


def _shown(config: type, name: str) -> str:
    """The default of field ``name`` of the configuration dataclass ``config``, as --help shows
    it (what a flag takes when neither it nor a recipe sets it)."""
    value = next(field.default for field in fields(config) if field.name == name)
    return "on" if value is True else "off" if value is False else str(value)


Arch = Enum("Arch", {name: name for name in sorted({*ARCHITECTURES, *ARCH_ALIASES})}, type=str)
Size = Enum("Size", {name: name for name in SIZES}, type=str)
Schedule = Enum("Schedule", {name: name for name in SCHEDULES}, type=str)
FeatureCounts = Enum("FeatureCounts", {name: name for name in FEATURE_COUNTS}, type=str)
WeightsDtype = Enum("WeightsDtype", {name: name for name in ("float32", "float16", "bfloat16")}, type=str)


STOP_REQUESTED = (b"stopping after the step in flight, checkpointed (Ctrl-C again stops at once, losing the steps "
                  b"since the last checkpoint)\n")


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event):
    """While the block runs, the first Ctrl-C or SIGTERM sets ``stop`` (the run stops after the
    step in flight, checkpointed); a second one raises KeyboardInterrupt at once."""
    def request(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        os.write(sys.stderr.fileno(), STOP_REQUESTED)  # async-signal-safe, unlike print

    if threading.current_thread() is not threading.main_thread():  # only the main thread gets signals
        yield
        return
    # a signal this process was started ignoring (SIGINT in a shell's background job) stays ignored
    numbers = [n for n in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(n) is not signal.SIG_IGN]
    previous = {number: signal.signal(number, request) for number in numbers}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _after_interrupt(out: Path) -> str:
    """What a run stopped at once (a second Ctrl-C) left in ``out`` and how to go on."""
    from ..pretrain.run_dir import STATE_FILE, load_state

    try:
        step = load_state(out)["step"]
    except (InvalidInputError, FileNotFoundError):
        return (f"{escape(str(out))} holds no checkpoint of this run yet; start it again with the same command plus "
                "--overwrite")
    return (f"{escape(str(out))} keeps its last checkpoint, step {step} ({STATE_FILE}); continue with the same command "
            "plus --resume")


def _parse_curriculum(text: str | None) -> tuple[tuple[int, int], ...]:
    """``"STEP:ROWS,STEP:ROWS"`` as ((step, rows), ...)."""
    if not text:
        return ()
    try:
        return tuple((int(step), int(rows)) for step, rows in (entry.split(":") for entry in text.split(",")))
    except ValueError:
        raise InvalidInputError(
            f"--rows-curriculum takes 'STEP:ROWS,STEP:ROWS' with whole numbers (e.g. '1:128,2001:384'), got {text!r}"
        ) from None


def _list_recipes(value: str | None) -> str | None:
    """``--recipe list``: print the shipped recipes and exit (before --out is asked for)."""
    if value != "list":
        return value
    for path in sorted(RECIPES_DIR.glob("*.toml")):
        description = tomllib.loads(path.read_text()).get("description", "")
        output.console.print(f"[bold]{path.stem}[/bold]  {escape(description)}", highlight=False)
    raise typer.Exit()


#: ``equibench pretrain`` with neither --out nor --recipe: this shipped recipe (the first stage of
#: the packaged checkpoints: schedule-free, so a model stopped at any step is usable) for this
#: many minutes (unless --time-limit says otherwise), into the default --out, runs/pretrain-<arch>.
QUICK_START_RECIPE = "small-cpu"
QUICK_START_MINUTES = 5.0


#: Steps averaged at each end of the run for the loss-drop line.
LOSS_WINDOW = 20


def _loss_drop(out: Path) -> str | None:
    """The loss at the start and the end of the run's log: on the fixed validation batches of
    the prior where the run validated twice (the untrained model and the weights it stopped
    with), else the training loss (means over LOSS_WINDOW steps); None when the log holds no losses."""
    from ..pretrain.curves import read_log

    try:
        steps, validations = read_log(out)
    except (OSError, InvalidInputError):
        return None
    if "prior_loss" in validations and validations["prior_loss"].notna().sum() >= 2:
        checked = validations.dropna(subset=["prior_loss"])
        first, last = checked.iloc[0], checked.iloc[-1]
        return (f"validation loss (fixed prior batches) {first['prior_loss']:.3f} at step {int(first['step'])} -> "
                f"{last['prior_loss']:.3f} at step {int(last['step'])}")
    losses = steps["loss"].dropna() if "loss" in steps else steps.iloc[:0]
    if losses.empty:
        return None
    window = max(1, min(LOSS_WINDOW, len(losses) // 2))
    first, last = losses.iloc[:window].mean(), losses.iloc[-window:].mean()
    return (f"training loss {first:.3f} -> {last:.3f} over steps 1..{int(steps['step'].iloc[-1])} "
            f"(means of the first and last {window} steps)")


def _will_train(out: Path, resume: bool, overwrite: bool) -> bool:
    """Whether a run in ``out`` gets past the checks of its folder (a new run: no files of
    another run there, or --overwrite; --resume: a saved state)."""
    from ..pretrain.run_dir import RUN_FILES, STATE_FILE

    if resume:
        return (out / STATE_FILE).exists()
    return overwrite or not any((out / name).exists() for name in RUN_FILES)


def pretrain(
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Output directory (train_state.pt, model.pt, log.jsonl); default runs/pretrain-<arch>.", show_default=False)] = None,
    recipe: Annotated[Optional[str], typer.Option(callback=_list_recipes, is_eager=True, help=f"Start from a recipe: a shipped one by name ('--recipe list' describes them) or a TOML file; the flags given replace its values. Without one, the defaults shown apply, except with no --out either: then a quick start, the {QUICK_START_RECIPE} recipe for {QUICK_START_MINUTES:g} minutes (see --time-limit).")] = None,
    arch: Annotated[Arch, typer.Option(help="equitabpfn, or tabpfn (= tabpfn-star, the non-equivariant model).")] = "equitabpfn",
    size: Annotated[Optional[Size], typer.Option(help="Named model size.", show_default=_shown(TrainConfig, "size"))] = None,
    steps: Annotated[Optional[int], typer.Option(help="Optimizer steps.", show_default=_shown(TrainConfig, "steps"))] = None,
    batch_size: Annotated[Optional[int], typer.Option(help="Datasets per micro-batch (per process).", show_default=_shown(TrainConfig, "batch_size"))] = None,
    grad_accumulation: Annotated[Optional[int], typer.Option(help="Micro-batches per optimizer step.", show_default=_shown(TrainConfig, "grad_accumulation"))] = None,
    rows: Annotated[Optional[int], typer.Option(help="Rows per synthetic dataset (train + test).", show_default=_shown(PriorConfig, "rows"))] = None,
    nan_prob: Annotated[Optional[float], typer.Option(help="Share of prior datasets given missing values.", show_default=_shown(PriorConfig, "nan_prob"))] = None,
    lr: Annotated[Optional[float], typer.Option(help="Peak learning rate.", show_default=_shown(TrainConfig, "lr"))] = None,
    warmup_steps: Annotated[Optional[int], typer.Option(help="Linear warm-up steps before the cosine decay.", show_default=_shown(TrainConfig, "warmup_steps"))] = None,
    weight_decay: Annotated[Optional[float], typer.Option(help="AdamW weight decay.", show_default=_shown(TrainConfig, "weight_decay"))] = None,
    grad_clip: Annotated[Optional[float], typer.Option(help="Clip the gradient norm at this value.", show_default=_shown(TrainConfig, "grad_clip"))] = None,
    adam_beta2: Annotated[Optional[float], typer.Option(help="Adam's second-moment decay beta2.", show_default=_shown(TrainConfig, "adam_beta2"))] = None,
    schedule: Annotated[Optional[Schedule], typer.Option(help="Learning-rate schedule after the warm-up: cosine decay, warm-up-stable-decay (wsd), or schedule-free AdamW (no horizon).", show_default=_shown(TrainConfig, "schedule"))] = None,
    decay_fraction: Annotated[Optional[float], typer.Option(help="wsd: share of the steps in the final cool-down.", show_default=_shown(TrainConfig, "decay_fraction"))] = None,
    rows_curriculum: Annotated[Optional[str], typer.Option(help="Short-to-long curriculum 'STEP:ROWS,...': from STEP on, datasets have ROWS rows (before the first STEP, --rows); '' for none.")] = None,
    tree_fraction: Annotated[Optional[float], typer.Option(help="Share of prior datasets whose target is a sum of random axis-aligned trees (0: the paper's v1 prior).", show_default=_shown(PriorConfig, "tree_fraction"))] = None,
    feature_counts: Annotated[Optional[FeatureCounts], typer.Option(help="How many features a prior dataset uses: uniform in 1..100 (the paper's v1 prior) or log-uniform (half the datasets with 1-9).", show_default=_shown(PriorConfig, "feature_counts"))] = None,
    outlier_prob: Annotated[Optional[float], typer.Option(help="Share of prior datasets with outlying cells: up to 5% of their values moved by 2-10 standard deviations after the target was drawn (0: the paper's v1 prior).", show_default=_shown(PriorConfig, "outlier_prob"))] = None,
    max_classes: Annotated[Optional[int], typer.Option(help="Most classes of a prior dataset (TabPFN* takes at most 10).", show_default=_shown(PriorConfig, "max_classes"))] = None,
    p_binary: Annotated[Optional[float], typer.Option(help="Share of prior batches with two classes.", show_default=_shown(PriorConfig, "p_binary"))] = None,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda or cuda:N.", show_default=_shown(TrainConfig, "device"))] = None,
    amp: Annotated[Optional[bool], typer.Option("--amp/--no-amp", help="bf16 autocast (default: on for CUDA only).")] = None,
    prior_workers: Annotated[Optional[int], typer.Option(help="Worker processes that draw the prior's batches on the CPU ahead of the steps (0: drawn in the training process, on --device). The batches equal a CPU run's.", show_default=_shown(TrainConfig, "prior_workers"))] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seeds the model init and the prior stream.", show_default=_shown(TrainConfig, "seed"))] = None,
    checkpoint_every: Annotated[Optional[int], typer.Option(help="Steps between atomic checkpoints.", show_default=_shown(TrainConfig, "checkpoint_every"))] = None,
    max_file_mb: Annotated[Optional[float], typer.Option(help="Write train_state.pt in parts of at most this many MB (an index plus train_state.pt.*.part-* files, read back transparently); default: one file.")] = None,
    validate_every: Annotated[Optional[int], typer.Option(help="Steps between validations.", show_default=_shown(TrainConfig, "validate_every"))] = None,
    validation_batches: Annotated[Optional[int], typer.Option(help="Fixed prior batches used for validation.", show_default=_shown(TrainConfig, "validation_batches"))] = None,
    bundled_validation: Annotated[Optional[bool], typer.Option("--bundled-validation/--no-bundled-validation", help="Also validate on iris, wine, breast_cancer, digits.", show_default=_shown(TrainConfig, "bundled_validation"))] = None,
    resume: Annotated[bool, typer.Option(help="Continue the run saved in --out exactly.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Start a new run in --out, replacing the model.pt, config.json, log.jsonl and train_state.pt there.")] = False,
    d_model: Annotated[Optional[int], typer.Option(help="Override the size's width.")] = None,
    n_layers: Annotated[Optional[int], typer.Option("--layers", help="Override the size's layer count.")] = None,
    n_heads: Annotated[Optional[int], typer.Option("--heads", help="Override the size's attention heads.")] = None,
    mlp_hidden: Annotated[Optional[int], typer.Option(help="Override the size's MLP width.")] = None,
    norm_first: Annotated[Optional[bool], typer.Option("--pre-ln/--post-ln", help="Pre- or post-LayerNorm blocks (default: the size's, post-LN as in the paper).")] = None,
    qk_norm: Annotated[Optional[bool], typer.Option("--qk-norm/--no-qk-norm", help="RMS-normalise queries and keys (default: the size's, off).")] = None,
    init_from: Annotated[Optional[Path], typer.Option(help="Start from this checkpoint's weights (continued pretraining; same arch and size, or a pre-LN checkpoint with more --layers, the new ones starting as identities).")] = None,
    time_limit: Annotated[Optional[float], typer.Option(help=f"Minutes: stop, checkpointed, before a step would end later (for wall-time limits); continue with --resume. Default: none, or {QUICK_START_MINUTES:g} for the quick start (no --out, no --recipe).", show_default=False)] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Pretrain EquiTabPFN or TabPFN* on the synthetic prior (torchrun for several processes).

    With no options, a quick start: the small-cpu recipe (the first stage of the packaged
    checkpoints) for 5 minutes into runs/pretrain-equitabpfn, a demo of the loop; `equibench pretrain
    --resume` trains it 5 minutes more.

    Ctrl-C or SIGTERM stops the run after the step in flight, checkpointed (exit status 130);
    continue it with the same command plus --resume."""
    from ..pretrain import Recipe, load_recipe
    from ..pretrain import pretrain as run_pretraining

    def given(**values) -> dict:
        return {key: value.value if isinstance(value, Enum) else value for key, value in values.items()
                if value is not None}

    train = given(
        steps=steps, batch_size=batch_size, grad_accumulation=grad_accumulation, lr=lr, warmup_steps=warmup_steps,
        weight_decay=weight_decay, grad_clip=grad_clip, adam_beta2=adam_beta2, schedule=schedule,
        decay_fraction=decay_fraction, rows_curriculum=None if rows_curriculum is None else _parse_curriculum(rows_curriculum),
        seed=seed, device=device, amp=amp, prior_workers=prior_workers, checkpoint_every=checkpoint_every,
        max_file_mb=max_file_mb, validate_every=validate_every, validation_batches=validation_batches,
        bundled_validation=bundled_validation, init_from=None if init_from is None else str(init_from),
    )
    prior_values = given(rows=rows, nan_prob=nan_prob, tree_fraction=tree_fraction, outlier_prob=outlier_prob,
                         feature_counts=feature_counts, max_classes=max_classes, p_binary=p_binary)
    model = given(size=size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, mlp_hidden=mlp_hidden,
                  norm_first=norm_first, qk_norm=qk_norm)
    arch_name = ARCH_ALIASES.get(Arch(arch).value, Arch(arch).value)
    quick_start = out_dir is None and recipe is None
    out_dir = out_dir or Path("runs") / f"pretrain-{arch_name}"
    if quick_start:
        recipe = QUICK_START_RECIPE
        time_limit = QUICK_START_MINUTES if time_limit is None else time_limit
        train.setdefault("bundled_validation", False)  # the prior batches validate in seconds, not minutes
    chosen = Recipe() if recipe is None else load_recipe(recipe)
    config, prior = chosen.configs(arch_name, train, prior_values, model)
    if time_limit is not None and not time_limit > 0:
        raise InvalidInputError(f"--time-limit takes a positive number of minutes, got {time_limit}")
    if resume and overwrite:
        raise InvalidInputError("--resume continues the run in --out and --overwrite replaces it: pass one of them")
    if quick_start and _will_train(out_dir, resume, overwrite):  # else the library's error stays the one line
        output.errors.print(f"quick start: the {recipe} recipe for {time_limit:g} minutes into {escape(str(out_dir))} "
                            "(--out and --recipe choose otherwise)", highlight=False)
    stop = threading.Event()
    try:
        with stop_on_signals(stop):
            outcome = run_pretraining(
                config, prior, out_dir, resume=resume, progress=progress,
                time_limit_s=None if time_limit is None else 60 * time_limit, overwrite=overwrite, stop=stop,
                console=output.errors,
            )
    except KeyboardInterrupt:
        output.errors.print(f"[yellow]interrupted:[/yellow] {_after_interrupt(out_dir)}", highlight=False)
        raise typer.Exit(code=130) from None
    _report_outcome(outcome, out_dir, config.arch, time_limit if quick_start else None)


def _report_outcome(outcome, out: Path, arch: str, quick_start_minutes: float | None) -> None:
    """What a finished or stopped run prints: where the model is, the loss drop of a stopped run,
    what a quick start's model is, how to use it; exit status 130 after a stop request (a
    finished run has no ``stopped_by``)."""
    from ..classifier.classifiers import CLASSIFIERS

    if outcome.finished:
        output.console.print(f"model written to {outcome.model_path}", highlight=False)
    else:
        cause = {"time limit": "--time-limit", "stop request": "Ctrl-C or SIGTERM"}[outcome.stopped_by]
        output.console.print(
            f"stopped by {cause} at step {outcome.step} of {outcome.steps}, checkpointed; {outcome.model_path} "
            "holds the model so far. Continue with the same command plus --resume.", highlight=False,
        )
        drop = _loss_drop(out)
        if drop is not None:
            output.console.print(drop, highlight=False)
        if quick_start_minutes is not None:
            output.console.print(
                f"a {quick_start_minutes:g}-minute model is a demo of the training loop, not a usable classifier: "
                "the packaged checkpoints trained for 11.6 and 49.4 hours (docs/MODEL_CARD.md); docs/PRETRAINING.md "
                "gives the commands of full runs", highlight=False)
    classifier = CLASSIFIERS[arch].__name__
    path = outcome.model_path.as_posix()
    output.console.print(escape(f"use it:   from equibench import {classifier}; {classifier}(checkpoint=\"{path}\")\n"
                                f"score it: equibench score {shlex.quote(path)}"), highlight=False, soft_wrap=True)
    if outcome.stopped_by == "stop request":
        raise typer.Exit(code=130)


def export(
    run_or_checkpoint: Annotated[Path, typer.Argument(
        help="A pretraining output directory (its model.pt, rebuilt from its train_state.pt where missing) or a "
             "model.pt file.")],
    out: Annotated[Path, typer.Option(help="Destination file, e.g. model/checkpoints/equitabpfn-small.pt.")],
    weights_dtype: Annotated[WeightsDtype, typer.Option(help="Storage precision of the weights.")] = "float16",
    overwrite: Annotated[bool, typer.Option(help="Replace --out when it exists.")] = False,
) -> None:
    """Copy a trained model into a (smaller) shippable checkpoint, keeping its model card."""
    from ..model import load_checkpoint, save_checkpoint
    from ..pretrain import MODEL_FILE, STATE_FILE, model_file

    check_out_file(out, overwrite, "model.pt")
    source = run_or_checkpoint
    if source.is_dir():
        source = model_file(source) if (source / STATE_FILE).exists() else source / MODEL_FILE
    model, card = load_checkpoint(source)
    path = save_checkpoint(model, out, card, weights_dtype=WeightsDtype(weights_dtype).value)
    output.console.print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, {card.steps} steps)")


def curves(
    runs: Annotated[list[Path], typer.Argument(help="Pretraining output directories (label = folder name, with "
                                                    "its parents where two are named alike).")],
    out_path: Annotated[Path, typer.Option("--out", help="PNG (or PDF) file to write.")],
    smoothing: Annotated[int, typer.Option(help="Moving-average window of the training loss (steps).")] = 50,
) -> None:
    """Training curves (loss, validation accuracies vs step) of one or more pretraining runs."""
    from ..pretrain import plot_training_curves
    from ..pretrain.curves import run_labels

    path = plot_training_curves(run_labels(runs), out_path, smoothing=smoothing)
    output.console.print(f"wrote {path}")


def prior_preview(
    out_path: Annotated[Path, typer.Option("--out", help="PNG (or PDF) file to write.")],
    rows: Annotated[int, typer.Option(help="Rows per synthetic dataset.")] = 1152,
    seed: Annotated[int, typer.Option(help="Seed of the sampled batches.")] = 0,
    n_batches: Annotated[int, typer.Option("--batches", help="Batches sampled for the distributions.")] = 64,
) -> None:
    """A figure of sampled datasets (2-D projections by class) and the K, F and class-balance distributions."""
    from ..prior import PriorConfig, preview_prior

    path = preview_prior(out_path, PriorConfig(rows=rows), seed=seed, n_batches=n_batches)
    output.console.print(f"wrote {path}")
