"""Is the cumulative run's slow fall its model's size? Deeper branches of its state (issue 13).

Late in the cumulative run EquiTabPFN's held-out loss falls by ~0.0002 per 1,000 steps, and
nothing in the optimiser was left to take (docs/PRETRAINING.md: cool-down, shorter average,
lower lr, suffix averages). These branches start from the run's weights at a committed step
and train on the run's prior (1024-row datasets, 8 per step), side by side:

- ``restart-4``: the same 4 layers with a fresh optimiser: what restarting alone does;
- ``deeper-6``: 6 layers, the 2 new ones exact identities at first (``equibench pretrain
  --init-from --layers``), so both branches start from the same loss.

Since 2026-11-27 the ``deeper-6`` branches (EquiTabPFN's and TabPFN*'s, on identical budgets)
are the shipped checkpoints' run, continued here on CPU cores and by ``gpu_branches.py`` on a
lent GPU (docs/PRETRAINING.md).

Both use schedule-free AdamW at lr 3e-4 after a 200-step warm-up (a fresh average at the
run's lr 1e-3 would first undo what the run learned), seed 1, and validate every 250 steps
(500 on a GPU) on the same 1024-row prior datasets. Each branch is a run folder that ``run`` resumes, so it
continues over sessions from its committed state:

    python benchmarks/deeper_branch.py run restart-4 deeper-6 --arch equitabpfn --minutes 60 [--threads 1]
    python benchmarks/deeper_branch.py table --arch equitabpfn

``run`` with several branches trains them one after the other, each for ``--minutes`` (two
processes with one branch each use two cores). The weights they start from are exported
(float32, ``source-COMMIT.pt``, not committed: rebuilt when a branch starts without it) from
the run's state at the commit ``FROM_COMMIT`` names; a resumed branch does not need them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from suffix_average import committed_state

from equibench.model import save_checkpoint
from equibench.pretrain import STATE_FILE
from equibench.pretrain.run_dir import model_from_state
from equibench.tables import markdown_table

ROOT = Path("results/deeper-branches")
#: The run's commit whose state each architecture's branches start from (both at step 65316).
FROM_COMMIT = {"equitabpfn": "b0729923", "tabpfn-star": "51a1d81d"}
LAYERS = {"restart-4": 4, "deeper-6": 6}
#: Every `equibench pretrain` option of the branches but the architecture, layers, folder, limits and
#: the settings free on resume (device, prior workers, checkpoint and validation intervals).
BRANCH_RECIPE = [
    "--size", "small", "--pre-ln", "--batch-size", "8", "--rows", "1024", "--seed", "1",
    "--lr", "3e-4", "--warmup-steps", "200", "--schedule", "schedule-free",
    "--nan-prob", "0.3", "--tree-fraction", "0.3", "--no-amp", "--no-progress",
    "--validation-batches", "8",
]
#: Upper bound of a branch's steps (schedule-free: raised freely on resume; the time limit ends a slice).
_MAX_STEPS = 100_000


def source_path(arch: str, commit: str) -> Path:
    return ROOT / arch / f"source-{commit}.pt"


def source_checkpoint(arch: str, commit: str) -> Path:
    """The run's evaluation weights at ``commit`` as a float32 checkpoint (written once)."""
    path = source_path(arch, commit)
    if path.exists():
        return path
    with tempfile.TemporaryDirectory() as scratch:
        model, card = model_from_state(committed_state(arch, commit, Path(scratch)))
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_checkpoint(model, path, card)


def branch_command(name: str, arch: str, commit: str, minutes: float, *, until_step: int = _MAX_STEPS,
                   device: str = "cpu", prior_workers: int = 0, checkpoint_every: int = 50,
                   validate_every: int = 250) -> list[str]:
    """`equibench pretrain` resuming (or starting) one branch for ``minutes``, up to ``until_step``;
    the validations on a GPU may be sparser (a multiple of 250 keeps the steps comparable)."""
    folder = ROOT / arch / name
    resume = (folder / STATE_FILE).exists()
    # a resumed branch reads its lineage from its state: the weights it started from are not needed
    source = source_path(arch, commit) if resume else source_checkpoint(arch, commit)
    command = [
        sys.executable, "-m", "equibench", "pretrain", "--arch", arch, *BRANCH_RECIPE,
        "--layers", str(LAYERS[name]), "--init-from", str(source),
        "--out", str(folder), "--steps", str(until_step), "--time-limit", str(minutes),
        "--device", device, "--prior-workers", str(prior_workers),
        "--checkpoint-every", str(checkpoint_every), "--validate-every", str(validate_every),
    ]
    return command + (["--resume"] if resume else [])


def run_branch(name: str, arch: str, commit: str, minutes: float, threads: int, until_step: int = _MAX_STEPS) -> int:
    """Resume (or start) one branch on the CPU for ``minutes``, up to ``until_step``; returns
    `equibench pretrain`'s exit status."""
    command = branch_command(name, arch, commit, minutes, until_step=until_step)
    print(" ".join(command), flush=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    return subprocess.run(command, env=env).returncode


def table(arch: str) -> str:
    """Each branch's validations (1024-row prior loss and accuracy, bundled accuracies) by step."""
    rows = []
    for name in LAYERS:
        log = ROOT / arch / name / "log.jsonl"
        if not log.exists():
            continue
        for line in log.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "validation":
                rows.append({"step": record["step"], "branch": name, "prior loss": f"{record['prior_loss']:.4f}",
                             "prior acc.": f"{100 * record['prior_accuracy']:.1f}",
                             **{dataset: f"{100 * record[f'{dataset}_accuracy']:.1f}"
                                for dataset in ("iris", "wine", "breast_cancer", "digits")
                                if f"{dataset}_accuracy" in record}})
    if not rows:
        return f"no branch of {arch} has validated yet ({ROOT / arch})"
    return markdown_table(pd.DataFrame(rows).sort_values("step", kind="stable"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="resume or start branches, one after the other")
    run.add_argument("branches", nargs="+", choices=list(LAYERS))
    run.add_argument("--arch", choices=list(FROM_COMMIT), required=True)
    run.add_argument("--minutes", type=float, required=True, help="time limit of each branch's slice")
    run.add_argument("--threads", type=int, default=1)
    run.add_argument("--until-step", type=int, default=_MAX_STEPS,
                     help="stop there (e.g. the other architecture's step, for equal budgets)")
    show = commands.add_parser("table", help="the branches' validations side by side")
    show.add_argument("--arch", choices=list(FROM_COMMIT), required=True)
    args = parser.parse_args()
    if args.command == "table":
        print(table(args.arch))
        return
    for name in args.branches:
        status = run_branch(name, args.arch, FROM_COMMIT[args.arch], args.minutes, args.threads, args.until_step)
        if status != 0:
            sys.exit(status)


if __name__ == "__main__":
    main()
