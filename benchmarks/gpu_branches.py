"""Deeper branches of the cumulative run (benchmarks/deeper_branch.py) on a lent GPU machine.

``run`` continues several branches there at once, float32 as on the CPU, each with its prior
drawn by CPU worker processes (the same batches a CPU slice draws, so each branch stays one
stream). The first branch named trains for ``--minutes``, the others for
``--others-minutes`` (a faster architecture gets less); then each one behind the leader's
step continues alone toward it until the deadline, so that the branches end on equal (or
nearly equal) budgets. A check first scores iris with the shipped EquiTabPFN on the GPU.
Last, the branch folders' files (training state, evaluation weights, config, log) are packed
as one tar archive cut into parts of at most 15 MiB (a file coming back from the machine may
not exceed 16 MiB, and a 6-layer state is 19 MB); ``merge`` puts them in place here:

    python benchmarks/gpu_branches.py run equitabpfn/deeper-6 tabpfn-star/deeper-6 \\
        --minutes 7 --others-minutes 4.8 --deadline-minutes 9.3 --out $OUT       # on the device
    python benchmarks/gpu_branches.py merge /work/.device/N                       # here

A branch that starts there needs the weights it starts from (``source-COMMIT.pt``,
git-ignored) in the device call's ``carry``; a resumed one does not. The tree that travels is
limited to 64 MiB, and the committed results are more than that together, so ``aside`` first
moves every committed file under results/ that the slice does not need (other runs' states
and logs, evaluation results) to ``runs/gpu-branches-aside/`` (ignored by git), and ``back``
returns them after the call (refusing to overwrite anything written there since):

    python benchmarks/gpu_branches.py aside equitabpfn/deeper-6 tabpfn-star/deeper-6   # here, before
    python benchmarks/gpu_branches.py back                                             # here, after
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from cumulative_pretraining import steps_done
from deeper_branch import FROM_COMMIT, LAYERS, ROOT, branch_command
from gpu_slice import preflight

from equibench.atomic_files import atomic_write
from equibench.errors import FolderInUseError
from equibench.outdir_lock import locked_folder

#: The files of a branch folder that travel back; the training state last, so that a merge
#: killed halfway leaves the folder resumable from its old state and is done again by rerunning.
FILES = ("config.json", "log.jsonl", "model.pt", "train_state.pt")
ARCHIVE = "branches.tar"
MANIFEST = "slice.json"
PART_BYTES = 15 * 2**20
ASIDE = Path("runs/gpu-branches-aside")
#: A GPU slice checkpoints at its end (its files come back only then) and validates every 500 steps.
_GPU_SETTINGS = {"checkpoint_every": 500, "validate_every": 500}


def branch(text: str) -> tuple[str, str]:
    """``ARCH/BRANCH`` (e.g. ``equitabpfn/deeper-6``) as a pair, checked."""
    arch, _, name = text.partition("/")
    if arch not in FROM_COMMIT or name not in LAYERS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not ARCH/BRANCH with ARCH one of {sorted(FROM_COMMIT)} and BRANCH one of {sorted(LAYERS)}")
    return arch, name


def label(arch: str, name: str) -> str:
    return f"{arch}/{name}"


def gpu_command(arch: str, name: str, minutes: float, until_step: int, device: str, workers: int) -> list[str]:
    """``branch_command`` on ``device`` with ``workers`` prior processes."""
    return branch_command(name, arch, FROM_COMMIT[arch], round(minutes, 2), until_step=until_step, device=device,
                          prior_workers=workers, **_GPU_SETTINGS)


def run_all(commands: list[list[str]]) -> list[int]:
    """Run ``commands`` at once (one torch thread each); their exit statuses."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    processes = [subprocess.Popen(command, env=env) for command in commands]
    return [process.wait() for process in processes]


def pack(branches: list[tuple[str, str]], start: dict[str, int], out: Path, part_bytes: int = PART_BYTES) -> list[Path]:
    """The branches' files and a manifest (each branch's step before and after the slice) as one
    tar archive in parts ``out/branches.tar.000``, ``.001``, ... of at most ``part_bytes``."""
    manifest = {label(*b): {"from": start[label(*b)], "to": steps_done(ROOT / b[0] / b[1])} for b in branches}
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob(f"{ARCHIVE}.*")):
        raise SystemExit(f"{out} already holds {ARCHIVE} parts of another slice; pack into an empty folder")
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / ARCHIVE
        with tarfile.open(archive, "w") as tar:
            (Path(scratch) / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
            tar.add(Path(scratch) / MANIFEST, arcname=MANIFEST)
            for arch, name in branches:
                for file in FILES:
                    tar.add(ROOT / arch / name / file, arcname=f"{arch}/{name}/{file}")
        parts = []
        with open(archive, "rb") as whole:
            while chunk := whole.read(part_bytes):
                parts.append(out / f"{ARCHIVE}.{len(parts):03d}")
                parts[-1].write_bytes(chunk)
    print(f"packed {manifest} in {len(parts)} parts", flush=True)
    return parts


def merge(fetched: Path) -> None:
    """Put a slice's branch files (``pack``'s parts in ``fetched``) in the branch folders here.
    Refused, changing nothing, unless every branch here is still at the step the slice started from."""
    parts = sorted(fetched.glob(f"{ARCHIVE}.[0-9][0-9][0-9]"))
    if not parts:
        raise SystemExit(f"no {ARCHIVE}.000 ... in {fetched}: pass the folder the slice's files were fetched to")
    if [part.suffix for part in parts] != [f".{index:03d}" for index in range(len(parts))]:
        raise SystemExit(f"the parts in {fetched} are not {ARCHIVE}.000 to .{len(parts) - 1:03d} without a gap "
                         "(one did not come back?); nothing merged")
    with tempfile.TemporaryDirectory() as scratch:
        unpacked = Path(scratch)
        with open(unpacked / ARCHIVE, "wb") as whole:
            for part in parts:
                whole.write(part.read_bytes())
        with tarfile.open(unpacked / ARCHIVE) as tar:
            tar.extractall(unpacked, filter="data")
        manifest = json.loads((unpacked / MANIFEST).read_text())
        for key, steps in manifest.items():
            here = steps_done(ROOT / key)
            if here != steps["from"]:
                raise SystemExit(f"{ROOT / key} is at step {here} here but the slice started from step "
                                 f"{steps['from']}: its files would lose the steps made since; nothing merged")
        for key, steps in manifest.items():
            folder = ROOT / key
            try:
                with locked_folder(folder, "stop the run training there, then merge again"):
                    if steps_done(folder) != steps["from"]:
                        raise SystemExit(f"{folder} moved on while merging; merge the other branches' parts by hand")
                    for file in FILES:
                        atomic_write(folder / file, lambda tmp, file=file: shutil.copyfile(unpacked / key / file, tmp))
            except FolderInUseError as error:
                raise SystemExit(str(error)) from None
            print(f"{key}: step {steps['from']} -> {steps_done(folder)}", flush=True)


def git_files(*options: str) -> list[Path]:
    """The files ``git ls-files OPTIONS`` lists, present in the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", *options], check=True, capture_output=True).stdout
    return [Path(name) for name in listed.decode().split("\0") if name and Path(name).is_file()]


def travelling_bytes() -> int:
    """The size of what a device call sends: tracked files and untracked files git does not ignore."""
    return sum(path.stat().st_size for path in git_files() + git_files("--others", "--exclude-standard"))


def set_aside(branches: list[tuple[str, str]], aside: Path = ASIDE) -> list[Path]:
    """Move the committed files under results/ that are not in the ``branches``' folders to
    ``aside`` (same relative paths); returns the moved paths."""
    needed = [ROOT / arch / name for arch, name in branches]
    moving = [path for path in git_files("results") if not any(path.is_relative_to(folder) for folder in needed)]
    for path in moving:
        if (aside / path).exists():
            raise SystemExit(f"{aside / path} already holds a file set aside: run `back` first")
    for path in moving:
        (aside / path).parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, aside / path)
    print(f"moved {len(moving)} files ({sum((aside / p).stat().st_size for p in moving) / 1e6:.1f} MB) to {aside}; "
          f"the tree now sends {travelling_bytes() / 2**20:.1f} MiB before `carry`", flush=True)
    return moving


def bring_back(aside: Path = ASIDE) -> list[Path]:
    """Return every file ``set_aside`` moved to ``aside`` to its place; refused, moving nothing,
    where a file has been written at its place since."""
    moved = sorted(path.relative_to(aside) for path in aside.rglob("*") if path.is_file()) if aside.exists() else []
    taken = [path for path in moved if path.exists()]
    if taken:
        raise SystemExit(f"{taken[0]} exists again (written since it was set aside); compare it with "
                         f"{aside / taken[0]} and move one of them by hand; nothing moved back")
    for path in moved:
        os.replace(aside / path, path)
    print(f"moved {len(moved)} files back from {aside}", flush=True)
    return moved


def run(args: argparse.Namespace) -> None:
    started = time.monotonic()
    preflight(args.device)
    branches = args.branches
    start = {label(*b): steps_done(ROOT / b[0] / b[1]) for b in branches}
    print(f"before the slice: {start}", flush=True)
    minutes = [args.minutes] + [args.others_minutes or args.minutes] * (len(branches) - 1)
    codes = run_all([gpu_command(*b, m, 10**6, args.device, args.prior_workers) for b, m in zip(branches, minutes)])
    steps = {b: steps_done(ROOT / b[0] / b[1]) for b in branches}
    lead = max(steps.values())
    behind = [b for b in branches if steps[b] < lead]
    # packing and the trip back need about a minute of the deadline
    minutes_left = args.deadline_minutes - (time.monotonic() - started) / 60 - 1.0
    print(f"after the shared phase: {steps}; {minutes_left:.1f} minutes left for {behind}", flush=True)
    if not any(codes) and behind and minutes_left > 0.5:
        codes += run_all([gpu_command(*b, minutes_left, lead, args.device, 2 * args.prior_workers) for b in behind])
    pack(branches, start, args.out)
    if any(codes):
        raise SystemExit(f"a branch's slice failed (exit statuses {codes}); each packed branch is at its last checkpoint")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    slice_ = sub.add_parser("run", help="on the device machine: the branches' slice, then their files to --out")
    slice_.add_argument("branches", nargs="+", type=branch, help="ARCH/BRANCH, the slowest first")
    slice_.add_argument("--out", type=Path, required=True, help="where the packed parts are written")
    slice_.add_argument("--minutes", type=float, required=True, help="the first branch's share of the shared phase")
    slice_.add_argument("--others-minutes", type=float, help="the other branches' share (default: --minutes)")
    slice_.add_argument("--deadline-minutes", type=float, required=True,
                        help="from the start of this script: the catch-up phase ends before it")
    slice_.add_argument("--device", default="cuda")
    slice_.add_argument("--prior-workers", type=int, default=7, help="prior processes per branch")
    fetch = sub.add_parser("merge", help="here, after the call: the fetched parts into the branch folders")
    fetch.add_argument("fetched", type=Path, help="the folder the fetched parts lie in")
    aside = sub.add_parser("aside", help="here, before the call: large committed files the slice does not need aside")
    aside.add_argument("branches", nargs="+", type=branch, help="ARCH/BRANCH, the branches the slice trains")
    sub.add_parser("back", help="here, after the call: the files set aside back in place")
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    elif args.command == "merge":
        merge(args.fetched)
    elif args.command == "aside":
        set_aside(args.branches)
    else:
        bring_back()


if __name__ == "__main__":
    sys.exit(main())
