"""The cumulative pretraining run: the chosen recipe, continued slice by slice across sessions.

Each slice resumes the run where the last one stopped, from the training state committed in
``results/pretraining/<arch>/`` (weights, optimiser state, RNG states, log), so a fresh clone
of the repository continues it exactly:

    python benchmarks/cumulative_pretraining.py continue --arch equitabpfn --minutes 150 [--threads 2]
    python benchmarks/cumulative_pretraining.py continue --arch tabpfn-star --until-step STEP
    python benchmarks/cumulative_pretraining.py score --arch equitabpfn --openml-cache DIR
    python benchmarks/cumulative_pretraining.py status
    python benchmarks/cumulative_pretraining.py validation

The recipe uses schedule-free AdamW, which has no horizon: ``--steps`` is only an upper
bound that each slice raises (``equibench pretrain --resume`` allows it for schedule-free),
and ``--time-limit`` ends the slice, checkpointed. A slice trains on one thread unless
``--threads`` says more (two on an idle 2-core machine: ~1.6x the steps). Both architectures
share every setting (prior, datasets per step, rows, seed); ``--until-step`` brings TabPFN* to the step that
EquiTabPFN reached, so the two stay on identical budgets. ``score`` appends the scores of
the current weights, on the recipe study's scale (benchmarks/recipe_study.py), to
``scores.jsonl`` beside the run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import pandas as pd
from recipe_study import score

from equibench.equivariance.experiment import ARCH_LABELS
from equibench.pretrain import model_file
from equibench.pretrain.run_dir import load_state
from equibench.tables import markdown_table

#: The chosen recipe (docs/PRETRAINING.md, "Recipe study"): every ``equibench pretrain`` option
#: except the architecture, the output folder, the step bound and the slice's time limit.
RECIPE = [
    "--size", "small", "--batch-size", "8", "--rows", "256", "--seed", "0",
    "--pre-ln", "--lr", "1e-3", "--warmup-steps", "50", "--schedule", "schedule-free",
    "--nan-prob", "0.3", "--tree-fraction", "0.3",
    # longer datasets from step 6001 (512 rows) and 7401 (1024 rows) on; a resume may change the
    # curriculum of steps still to come: at 256 rows the model falls behind KNN as the context
    # grows, and 512 rows lifted digits (docs/PRETRAINING.md, "Cumulative run")
    "--rows-curriculum", "6001:512,7401:1024",
    "--no-amp", "--no-progress",
    "--validate-every", "500", "--validation-batches", "8",
]
ARCHS = tuple(ARCH_LABELS)
BUNDLED = ("iris", "wine", "breast_cancer", "digits")
#: How far one slice may go at most; the time limit normally ends it first.
_SLICE_STEPS = 100_000


def run_dir(root: Path, arch: str) -> Path:
    return root / arch


def steps_done(folder: Path) -> int:
    """The last step whose state is saved (0 before the first slice)."""
    log = folder / "log.jsonl"
    if not (folder / "train_state.pt").exists() or not log.exists():
        return 0
    return int(load_state(folder)["step"])


def continue_run(root: Path, arch: str, minutes: float | None, until_step: int | None, device: str = "cpu",
                 prior_workers: int = 0, checkpoint_every: int = 50, threads: int = 1) -> None:
    """Run one slice: resume ``arch``'s run (or start it) until ``until_step`` or the time limit,
    on ``device`` (float32 on any device) with ``threads`` torch/OpenMP threads, the prior drawn
    by ``prior_workers`` CPU processes (0: in the training process), checkpointed every
    ``checkpoint_every`` steps and at the end.

    The slice replaces this process (exec), so Ctrl-C and SIGTERM reach `equibench pretrain`
    itself, which stops after the step in flight, checkpointed, and its exit status is this
    command's."""
    folder = run_dir(root, arch)
    done = steps_done(folder)
    target = until_step if until_step is not None else done + _SLICE_STEPS
    if target <= done:
        print(f"{arch}: already at step {done} (asked for {target}); nothing to do", flush=True)
        return
    command = [sys.executable, "-m", "equibench", "pretrain", "--arch", arch, *RECIPE, "--device", device,
               "--prior-workers", str(prior_workers), "--checkpoint-every", str(checkpoint_every), "--out", str(folder), "--steps", str(target)]
    if minutes is not None:
        command += ["--time-limit", str(minutes)]
    if done:
        command.append("--resume")
    print(" ".join(command), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    os.execve(sys.executable, command, env)


def score_run(root: Path, arch: str, openml_cache: Path | None) -> dict:
    """Score the run's current evaluation weights and append them to ``scores.jsonl``."""
    folder = run_dir(root, arch)
    result = {"arch": arch, "step": steps_done(folder), **score(model_file(folder), openml_cache)}
    with open(folder / "scores.jsonl", "a") as handle:
        handle.write(json.dumps(result) + "\n")
    print(json.dumps(result), flush=True)
    return result


def validation_records(log: Path) -> list[dict]:
    """The validation records of a run's ``log.jsonl``, in order."""
    records = (json.loads(line) for line in log.read_text().splitlines())
    return [record for record in records if record.get("kind") == "validation"]


def validation_table(root: Path) -> str:
    """Every validation of both runs (``log.jsonl``) as one Markdown table, by step."""
    rows = []
    for arch in ARCHS:
        log = run_dir(root, arch) / "log.jsonl"
        if not log.exists():
            continue
        rows += [{"step": record["step"], "model": ARCH_LABELS[arch],
                  "prior loss": f"{record['prior_loss']:.4f}",
                  "prior acc.": f"{100 * record['prior_accuracy']:.1f}",
                  **{name: f"{100 * record[f'{name}_accuracy']:.1f}" for name in BUNDLED}}
                 for record in validation_records(log)]
    return markdown_table(pd.DataFrame(rows).sort_values(["step", "model"], kind="stable"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("results/pretraining"))
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("continue", help="run one slice of the cumulative run")
    go.add_argument("--arch", choices=ARCHS, required=True)
    go.add_argument("--minutes", type=float, help="wall minutes of this slice (checkpointed when it ends)")
    go.add_argument("--until-step", type=int, help="stop at this step (default: only the time limit)")
    go.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (a GPU machine's slice)")
    go.add_argument("--prior-workers", type=int, default=0,
                    help="CPU processes drawing the prior ahead of the steps (the same batches; for a GPU slice)")
    go.add_argument("--checkpoint-every", type=int, default=50, help="steps between checkpoints (and at the end)")
    go.add_argument("--threads", type=int, default=1,
                    help="torch/OpenMP threads of the slice (default 1, leaving the other core free; "
                         "2 on an otherwise idle 2-core machine trains ~1.6x faster)")
    rate = sub.add_parser("score", help="score the current weights (recipe study scale)")
    rate.add_argument("--arch", choices=ARCHS, required=True)
    rate.add_argument("--openml-cache", type=Path)
    rate.add_argument("--work", type=Path, default=Path("runs/cumulative"), help="scratch folder")
    sub.add_parser("status", help="steps done per architecture")
    sub.add_parser("validation", help="the validations of both runs as a Markdown table")
    args = parser.parse_args()
    if args.command == "continue":
        if args.threads < 1:
            parser.error(f"--threads takes a positive number, got {args.threads}")
        continue_run(args.root, args.arch, args.minutes, args.until_step, args.device, args.prior_workers,
                     args.checkpoint_every, args.threads)
    elif args.command == "score":
        cache = None
        if args.openml_cache:
            from equibench.tasks.openml import working_cache

            cache = working_cache(args.openml_cache, args.work / "openml-cache")
        score_run(args.root, args.arch, cache)
    elif args.command == "validation":
        print(validation_table(args.root))
    else:
        for arch in ARCHS:
            print(f"{arch}: step {steps_done(run_dir(args.root, arch))}")


if __name__ == "__main__":
    main()
