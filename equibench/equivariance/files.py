"""``equibench equivariance``: measure, then write the results folder (CSV, Markdown table,
figures and a README that says what each file holds)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from ..baselines.registry import method_spec
from ..baselines.settings import MethodOptions
from ..classifier.checkpoints import checkpoint_sha256
from ..errors import InvalidInputError
from ..model.checkpoint import packaged_checkpoint_dir
from ..tables import markdown_table
from .experiment import TRAIN_FRACTION, EquivarianceConfig, arch_label, measure_equivariance
from .figures import (
    PAPER_SOURCE,
    PAPER_TABPFN,
    PAPER_TABPFN_K10_E16,
    one_member,
    plot_equivariance_gap,
    plot_nine_point_toy,
)
from .methods import PROBABILITY_FLOOR
from .toy import TOY_ORDERINGS, differs_from_identity, method_toy, nine_point_toy, toy_models


def _mean_sem(mean: float, sem: float, spec: str, sem_spec: str) -> str:
    return f"{mean:{spec}}" + ("" if math.isnan(sem) else f" ± {sem:{sem_spec}}")


def results_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The results as table cells (strings): mean ± s.e.m. over datasets (std in the CSV)."""
    return pd.DataFrame({
        "checkpoint": frame["checkpoint"].astype(str).to_numpy(),
        "arch": [arch_label(arch) for arch in frame["arch"]],
        "K": frame["K"].astype(str).to_numpy(),
        "ensemble": frame["ensemble"].astype(str).to_numpy(),
        "arg-max changes (%)": [_mean_sem(100 * m, 100 * s, ".2f", ".2f") for m, s in
                                zip(frame["argmax_change_fraction"], frame["argmax_change_sem"])],
        "log-prob RMS": [_mean_sem(m, s, ".3g", ".2g") for m, s in zip(frame["logit_rms"], frame["logit_rms_sem"])],
        "datasets": frame["n_datasets"].astype(str).to_numpy(),
    })


def describe_checkpoint(path: Path) -> str:
    """A checkpoint as the README names it: a packaged one by file name (not this machine's
    path), any other by its path; both with the first 12 hex digits of the file's sha256."""
    digest = checkpoint_sha256(path)[:12]
    if path.resolve().parent == packaged_checkpoint_dir().resolve():
        return f"{path.name} (packaged, sha256 {digest})"
    return f"{path} (sha256 {digest})"


def _methods_lines(frame: pd.DataFrame) -> list[str]:
    """The README's paragraph on the methods measured with the user's weights, if any."""
    methods = frame.loc[frame.measured == "method", "checkpoint"].unique()
    if not len(methods):
        return []
    return [(f"Methods with the user's weights ({', '.join(f'`{label}`' for label in methods)}): each through its own "
             "classifier (its preprocessing included) with one member, fitted on (X, Y) and on (X, sigma(Y)) with the "
             f"same seed; the log-prob RMS compares their log-probabilities, floored at {PROBABILITY_FLOOR:g}."), ""]


def _readme(config: EquivarianceConfig, frame: pd.DataFrame, toy: dict | None, seconds: float) -> str:
    n_train = math.floor(TRAIN_FRACTION * config.rows)
    paper = ", ".join(f"K={k} {v}%" for k, v in PAPER_TABPFN.items())
    lines = [
        "# Target-equivariance error", "",
        f"Checkpoints: {', '.join(describe_checkpoint(p) for p in config.checkpoints)}.",
        (f"K in {list(config.classes)}, ensemble sizes {list(config.ensembles)}, {config.datasets} prior datasets "
         f"per K ({config.rows} rows: {n_train} train, {config.rows - n_train} test; all K classes among the train "
         f"rows), seed {config.seed}, device {config.device}; {seconds:.0f} s."), "",
        ("Per dataset, sigma is a random non-identity class permutation; a test row counts as changed when the "
         f"class predicted on (X, Y) is beaten (by more than {config.tie_tolerance:g} in log-probability) in "
         "sigma^-1 f(X, sigma(Y)). The log-prob RMS compares log softmax(logits / "
         f"{config.softmax_temperature:g}) of the two. An ensemble of E members averages the mapped-back softmax "
         "outputs over E relabellings of the training labels (member 0 the identity, the others random; the "
         "permuted run uses the same relabellings composed with sigma)."), "",
        *_methods_lines(frame),
        "## Files", "",
        ("- `equivariance.csv`: one row per (checkpoint, K, ensemble) and per (method, K): mean, std and s.e.m. over "
         "datasets of the arg-max change fraction and the log-prob RMS; `measured` says whether a checkpoint's "
         "network or a method's classifier was measured."),
        "- `equivariance.md`: the same as a table (%, mean ± s.e.m.).",
        ("- `equivariance-gap.png` / `.pdf`: left, % arg-max changes vs K with one member, one line per checkpoint "
         f"(grey: the paper's fully trained TabPFN, {paper}); right, vs ensemble size, one line per K for "
         f"TabPFN*, EquiTabPFN at its worst K (grey star: paper, K=10 with 16 members, {PAPER_TABPFN_K10_E16}%). "
         f"The grey reference points are the {PAPER_SOURCE}."),
    ]
    if toy is not None:
        lines.append("- `nine-point-toy.png` / `.pdf`: 9 training points on a 3x3 grid, one class each, predicted "
                     "class (mapped back to the original identity) on a dense grid under 3 class orderings; an "
                     "equivariant model gives identical panels.")
    lines += ["", "## One ensemble member", "", markdown_table(results_display(one_member(frame)))]
    if toy is not None:
        lines += ["## 9-point toy: % of the grid differing from the identity ordering", ""]
        lines += [f"- {label}: " + ", ".join(f"{name} {value:.1f}%" for name, value in zip(TOY_ORDERINGS, values))
                  for label, values in toy.items()]
        lines.append("")
    if frame.attrs.get("notes"):
        lines += ["## Notes", ""] + [f"- {note}" for note in frame.attrs["notes"]] + [""]
    return "\n".join(lines)


def run_equivariance(config: EquivarianceConfig, out: Path, toy: bool = True, toy_grid: int = 150,
                     log: Callable[[str], None] = lambda _: None,
                     progress: Callable[[int, int], None] = lambda done, total: None,
                     toy_methods: tuple[str, ...] = (), options: MethodOptions | None = None) -> pd.DataFrame:
    """Measure (``config.methods`` with ``options``' weights), then write equivariance.csv/.md,
    equivariance-gap.png/.pdf, nine-point-toy.png/.pdf (unless ``toy`` is False) and README.md
    into ``out``. The toy also has a row per method of ``toy_methods`` (registry names, e.g.
    ``tabpfn-v1``, run with ``options``' weights) that can run here; the others are named, with
    why, in the notes."""
    if toy_grid < 2:
        raise InvalidInputError(f"`toy_grid` needs at least 2 points per side, got {toy_grid}")
    for name in toy_methods:
        method_spec(name)
    started = time.perf_counter()
    options = options or MethodOptions(device=config.device)
    frame = measure_equivariance(config, log, progress, options)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "equivariance.csv", index=False)
    notes = "".join(f"\n- {note}" for note in frame.attrs["notes"])
    (out / "equivariance.md").write_text(markdown_table(results_display(frame)) + (f"\nNotes:{notes}\n" if notes else ""))
    plot_equivariance_gap(frame, out / "equivariance-gap")
    differs = None
    if toy:
        predictions = nine_point_toy(toy_models(config.checkpoints), toy_grid, config.device, config.seed)
        external, skipped = method_toy(toy_methods, options, toy_grid, config.seed)
        predictions.update(external)
        frame.attrs["notes"] += [f"9-point toy: {label} not drawn ({reason})" for label, reason in skipped.items()]
        plot_nine_point_toy(predictions, out / "nine-point-toy")
        differs = differs_from_identity(predictions)
    (out / "README.md").write_text(_readme(config, frame, differs, time.perf_counter() - started))
    return frame
