"""Late-run optimiser branches of the cumulative run: continue the run's state committed at
``--from-commit`` up to ``--until-step`` with its schedule-free optimiser changed in one way,
everything else equal (recipe, data stream, one thread), and compare the validations with the
run itself, which went through the same steps unchanged: the control (docs/PRETRAINING.md,
"Late-run optimiser branches").

    python benchmarks/late_branches.py run window-2000 lr-5e-4 --arch tabpfn-star \
        --from-commit c43105c --until-step 16400
    python benchmarks/late_branches.py table --arch tabpfn-star

A branch's name says its change, applied before every optimiser step of the branch:

* ``window-H``: the averaged (evaluation) weights give each new iterate at least 1/H of the
  weight, i.e. they average about the last H iterates instead of every iterate of the run;
* ``lr-X``: the iterate's learning rate becomes X (the averaging weights keep the run's peak).

The branch trains in ``--runs``/ARCH/NAME (an unfinished one resumes); its validations are
kept in ``--out``/ARCH/NAME.jsonl (committed), after a first record saying where it started.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
from pathlib import Path

import pandas as pd
import schedulefree
import torch
from cumulative_pretraining import ARCHS, BUNDLED, RECIPE, validation_records

from equibench.equivariance.experiment import ARCH_LABELS
from equibench.pretrain.run_dir import load_state
from equibench.tables import markdown_table

#: The files of a run folder that its committed state consists of.
STATE_FILES = ("config.json", "log.jsonl", "train_state.pt")
#: Where a branch folder records where it started.
START_FILE = "branch.json"
_SCHEDULE_FREE_STEP = schedulefree.AdamWScheduleFree.step
_NAME = re.compile(r"^(window-(?P<window>[1-9][0-9]*)|lr-(?P<lr>[0-9.]+(e-?[0-9]+)?))$")


def branch_change(name: str) -> tuple[int | None, float | None]:
    """(averaging window, lr) of the branch ``name``; None where it keeps the run's."""
    match = _NAME.match(name)
    if match is None:
        raise argparse.ArgumentTypeError(f"a branch is named window-H or lr-X (e.g. window-2000, lr-5e-4), got {name!r}")
    window, lr = match["window"], match["lr"]
    return (int(window) if window else None), (float(lr) if lr else None)


def branch_name(text: str) -> str:
    branch_change(text)
    return text


def change_optimizer(window: int | None, lr: float | None) -> None:
    """Make every schedule-free step of this process apply the branch's change first."""

    def step(self, closure=None):
        for group in self.param_groups:
            if lr is not None:
                group["lr"] = lr  # the run's constant-lr scheduler resets it after each step
            if window is not None:  # next averaging weight / (sum + it) >= 1 / window
                group["weight_sum"] = min(group["weight_sum"], (window - 1) * group["lr_max"] ** group["weight_lr_power"])
        return _SCHEDULE_FREE_STEP(self, closure)

    schedulefree.AdamWScheduleFree.step = step


def start_branch(folder: Path, name: str, arch: str, commit: str) -> dict:
    """Fill ``folder`` with the run's state at ``commit``, once (later calls resume the branch);
    returns where the branch started."""
    if not (folder / START_FILE).exists():
        folder.mkdir(parents=True, exist_ok=True)
        for file in STATE_FILES:
            blob = subprocess.run(["git", "show", f"{commit}:results/pretraining/{arch}/{file}"],
                                  check=True, capture_output=True).stdout
            (folder / file).write_bytes(blob)
        step = int(load_state(folder)["step"])
        start = {"kind": "branch", "name": name, "arch": arch, "from_commit": commit, "start_step": step}
        (folder / START_FILE).write_text(json.dumps(start) + "\n")
    return json.loads((folder / START_FILE).read_text())


def validations(log: Path, after_step: int) -> list[dict]:
    """The validation records of ``log`` after ``after_step``."""
    return [record for record in validation_records(log) if record["step"] > after_step]


def run(name: str, arch: str, commit: str, until_step: int, runs: Path, out: Path) -> None:
    from equibench.atomic_files import atomic_write_text
    from equibench.cli import app

    folder = runs / arch / name
    start = start_branch(folder, name, arch, commit)
    arguments = ["pretrain", "--arch", arch, *RECIPE, "--checkpoint-every", "50", "--out", str(folder),
                 "--steps", str(until_step), "--resume"]
    change_optimizer(*branch_change(name))
    app(args=arguments, standalone_mode=False)
    header = {**start, "until_step": until_step, "command": shlex.join(["equibench", *arguments])}
    lines = [header, *validations(folder / "log.jsonl", start["start_step"])]
    (out / arch).mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / arch / f"{name}.jsonl", "".join(json.dumps(r) + "\n" for r in lines))


def table(arch: str, out: Path, root: Path) -> str:
    """The branches' validations beside the run's own (the control) at the same steps."""
    rows = []
    branches = sorted((out / arch).glob("*.jsonl"))
    starts = set()
    for path in branches:
        header, *records = [json.loads(line) for line in path.read_text().splitlines()]
        starts.add(header["start_step"])
        rows += [{"branch": header["name"], **record} for record in records]
    if not rows:
        return f"no branches of {arch} in {out / arch}\n"
    steps = {row["step"] for row in rows} | starts
    rows += [{"branch": "control (the run)", **r} for r in validations(root / arch / "log.jsonl", 0) if r["step"] in steps]
    frame = pd.DataFrame(rows).sort_values(["step", "branch"], kind="stable")
    summary = pd.DataFrame({
        "step": frame["step"], "model": ARCH_LABELS[arch], "branch": frame["branch"],
        "prior loss": frame["prior_loss"].map("{:.4f}".format),
        "prior acc.": (100 * frame["prior_accuracy"]).map("{:.1f}".format),
        **{name: (100 * frame[f"{name}_accuracy"]).map("{:.1f}".format) for name in BUNDLED},
    })
    return markdown_table(summary)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("names", nargs="+", type=branch_name)
    go.add_argument("--arch", choices=ARCHS, required=True)
    go.add_argument("--from-commit", required=True, help="the commit whose run state every branch starts from")
    go.add_argument("--until-step", type=int, required=True)
    go.add_argument("--runs", type=Path, default=Path("runs/late-branches"))
    go.add_argument("--out", type=Path, default=Path("results/late-branches"))
    show = sub.add_parser("table")
    show.add_argument("--arch", choices=ARCHS, required=True)
    show.add_argument("--out", type=Path, default=Path("results/late-branches"))
    show.add_argument("--root", type=Path, default=Path("results/pretraining"), help="the cumulative run's folders")
    args = parser.parse_args()
    if args.command == "table":
        print(table(args.arch, args.out, args.root), end="")
        return
    torch.set_num_threads(1)
    for name in args.names:
        run(name, args.arch, args.from_commit, args.until_step, args.runs, args.out)


if __name__ == "__main__":
    main()
