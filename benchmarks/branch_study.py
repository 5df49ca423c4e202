"""Prior variants as short branches of a shipped checkpoint: every branch continues the same
checkpoint for the same steps with the same optimiser and seed, only the prior differs
(docs/PRETRAINING.md, "Prior variants as branches of the shipped checkpoint").

    python benchmarks/branch_study.py run start control outliers --openml-cache ../shared/data/openml-cache
    python benchmarks/branch_study.py run start control log-features --arch tabpfn-star --openml-cache ...
    python benchmarks/branch_study.py table

``run`` trains each named branch of ``--arch``'s shipped checkpoint (or ``--start``) with
``equibench pretrain --init-from`` (``BASE`` + its ``BRANCHES`` options; one thread each,
several names run one after the other; an unfinished branch resumes from ``--runs``), then
scores it; ``start`` scores the checkpoint the branches start from. Scores (stored as
``--out``/ARCH/NAME.json, or NAME-seedN with ``--seed N``; committed; a scored name is skipped):

* the recipe study's scale (benchmarks/recipe_study.py ``score``): held-out v1-prior loss and
  accuracy (512 rows), the bundled datasets 5-fold with one member, the study tasks fold 0;
* held-out loss and accuracy on the same prior with outlying cells in every dataset
  (``outlier_prob`` 1), to see whether a branch learned to discount them;
* the bundled datasets 5-fold at the classifier's default settings (as the quality bar).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import torch
from recipe_study import openml_means, score

from equibench.equivariance.experiment import ARCH_LABELS
from equibench.tables import markdown_table

#: The continued-pretraining settings every branch shares (those of the cool-down branch of
#: 2026-11-25 with the cosine schedule, which alone changed nothing).
BASE = [
    "--size", "small", "--pre-ln", "--schedule", "cosine", "--lr", "3e-4",
    "--warmup-steps", "20", "--steps", "300", "--batch-size", "8", "--rows", "1024", "--nan-prob", "0.3",
    "--tree-fraction", "0.3", "--device", "cpu", "--no-progress", "--checkpoint-every", "50",
    "--validate-every", "300",
]
#: name -> the prior options of the branch.
BRANCHES: dict[str, list[str]] = {
    "control": [],
    # measurement errors: half the datasets have up to 5% of their cells moved by 2-10 s.d.
    "outliers": ["--outlier-prob", "0.5"],
    # more small tables: as many datasets with 1-9 features as with 10-100
    "log-features": ["--feature-counts", "log-uniform"],
}
BUNDLED = ("iris", "wine", "breast_cancer", "digits")
ARCHS = tuple(ARCH_LABELS)


def label(name: str, seed: int) -> str:
    """The branch's name in results and runs: ``NAME``, or ``NAME-seedN`` for a seed other than 1."""
    return name if seed == 1 or name == "start" else f"{name}-seed{seed}"


def _pretrain_command(name: str, arch: str, start: Path, runs: Path, seed: int = 1) -> list[str]:
    out = runs / arch / label(name, seed)
    command = ["equibench", "pretrain", "--arch", arch, *BASE, "--seed", str(seed), *BRANCHES[name],
               "--init-from", str(start), "--out", str(out)]
    return command + (["--resume"] if (out / "train_state.pt").exists() else [])


def _scores(checkpoint: Path, openml_cache: Path | None) -> dict[str, float]:
    from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
    from equibench.model import load_checkpoint
    from equibench.pretrain import bundled_accuracy, prior_metrics, validation_prior_batches
    from equibench.prior import PriorConfig

    result = score(checkpoint, openml_cache)
    model, _ = load_checkpoint(checkpoint)
    model.eval()
    outliers = prior_metrics(model, validation_prior_batches(PriorConfig(rows=512, outlier_prob=1.0), 8, 8, "cpu"))
    result.update({f"outlier_{key}": value for key, value in outliers.items()})
    classifier = EquiTabPFNClassifier if model.arch == "equitabpfn" else TabPFNStarClassifier
    members = classifier().get_params()["n_estimators"]  # the classifier's default
    result.update({f"default_{key}": value for key, value in bundled_accuracy(model, n_estimators=members).items()})
    return result


def run(name: str, arch: str, seed: int, start: Path, out: Path, runs: Path, openml_cache: Path | None) -> None:
    from equibench.atomic_files import atomic_write_text
    from equibench.model import read_card

    branch = label(name, seed)
    target = out / arch / f"{branch}.json"
    if target.exists():
        print(f"{arch} {branch}: done already", flush=True)
        return
    if name == "start":
        command, checkpoint = "reference: the start checkpoint", start
    else:
        pretrain = _pretrain_command(name, arch, start, runs, seed)
        subprocess.run(pretrain, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        command, checkpoint = shlex.join(pretrain), runs / arch / branch / "model.pt"
    result = {"name": branch, "command": command, "start": str(start), "start_steps": read_card(start).steps,
              "steps": read_card(checkpoint).steps, **_scores(checkpoint, openml_cache)}
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, json.dumps(result, indent=2) + "\n")  # a kill leaves no half-written score
    print(f"{arch} {branch}: {json.dumps(result)}", flush=True)


def table(out: Path) -> str:
    """The scored branches as a Markdown table (accuracies in %)."""
    paths = sorted(out.glob("*/*.json"), key=lambda p: (ARCHS.index(p.parent.name), p.stem != "start", p.stem))
    frame = pd.DataFrame([{"model": ARCH_LABELS[p.parent.name], **json.loads(p.read_text())} for p in paths])
    summary = pd.DataFrame({
        "model": frame["model"], "branch": frame["name"],
        "prior loss": frame["prior_loss"].round(4), "outlier-prior loss": frame["outlier_prior_loss"].round(4),
        **{f"{n} (1 member)": (100 * frame[f"{n}_accuracy"]).round(1) for n in BUNDLED},
        **{f"{n} (defaults)": (100 * frame[f"default_{n}_accuracy"]).round(1) for n in BUNDLED},
    })
    return markdown_table(summary.assign(**openml_means(frame)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run_parser = sub.add_parser("run")
    run_parser.add_argument("names", nargs="+", choices=["start", *BRANCHES])
    run_parser.add_argument("--arch", choices=ARCHS, default="equitabpfn")
    run_parser.add_argument("--seed", type=int, default=1, help="the branches' seed (results: NAME-seedN unless 1)")
    run_parser.add_argument("--start", type=Path, help="checkpoint every branch starts from "
                            "(default: the architecture's shipped one, model/ARCH-small.pt)")
    run_parser.add_argument("--out", type=Path, default=Path("results/branch-study"))
    run_parser.add_argument("--runs", type=Path, default=Path("runs/branch-study"))
    run_parser.add_argument("--openml-cache", type=Path)
    table_parser = sub.add_parser("table")
    table_parser.add_argument("--out", type=Path, default=Path("results/branch-study"))
    args = parser.parse_args()
    if args.command == "table":
        print(table(args.out), end="")
        return
    torch.set_num_threads(1)
    cache = None
    if args.openml_cache:
        from equibench.tasks.openml import working_cache

        cache = working_cache(args.openml_cache, args.runs / "openml-cache")
    for name in args.names:
        started = time.perf_counter()
        run(name, args.arch, args.seed, args.start or Path(f"model/{args.arch}-small.pt"), args.out, args.runs, cache)
        print(f"{name}: {time.perf_counter() - started:.0f} s wall", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
