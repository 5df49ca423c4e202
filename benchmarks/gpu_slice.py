"""One slice of the cumulative run on a lent GPU machine, both architectures at once.

The cumulative run (benchmarks/cumulative_pretraining.py) trains on CPU cores; when a session
is lent a GPU for a few minutes, ``run`` continues both architectures there, float32 as on
the CPU, each with its prior drawn by CPU worker processes (``--prior-workers``: the same
batches a CPU slice draws, so the run stays one stream). Both runs first share the GPU for
``--minutes`` (TabPFN* may get fewer: on the CPU it catches up five times faster than
EquiTabPFN); then the one behind continues alone toward the other's step, until the
deadline, so that the two end on equal (or nearly equal) budgets. Last, it copies each run's
files (training state, evaluation weights, config, gzipped log) to ``--out`` for the trip
back. A check first scores iris with the shipped EquiTabPFN on the GPU, so a broken CUDA
path shows in seconds rather than after the slice; any failure stops the script with a
non-zero exit status, leaving the runs as they were.

The working tree that travels to the device machine is limited (64 MiB), and the runs' logs
grow by every slice, so ``trim`` first moves each log aside (to ``runs/gpu-slice/``, ignored
by git), leaving its last lines, and ``merge`` puts the slice's files in place afterwards
with the whole log (the log moved aside, then the slice's new lines):

    python benchmarks/gpu_slice.py trim                                   # here
    python benchmarks/gpu_slice.py run --minutes 6 --tabpfn-star-minutes 3 \
        --deadline-minutes 8.5 --out $OUT                                 # on the device
    python benchmarks/gpu_slice.py merge /work/.device/N                  # here, with the files fetched
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cumulative_pretraining import ARCHS, run_dir, steps_done

from equibench.atomic_files import atomic_write, atomic_write_text

#: The step bound of the shared phase: far ahead, the time limit ends it.
_FAR = 10**6


def preflight(device: str) -> None:
    """Score iris (one member) with the shipped EquiTabPFN on ``device``: the classifier and the
    model run there before any training time is spent."""
    from equibench.model import load_checkpoint
    from equibench.pretrain import bundled_accuracy

    model, _ = load_checkpoint(Path(__file__).resolve().parents[1] / "model" / "equitabpfn-small.pt")
    scores = bundled_accuracy(model.to(device), names=("iris",), device=device)
    print(f"preflight on {device}: iris {scores}", flush=True)


def slice_command(root: Path, arch: str, minutes: float, until_step: int, device: str, workers: int) -> list[str]:
    """``cumulative_pretraining.py continue`` for a GPU slice: its files come back only at its
    end, so checkpoints between (every 50 steps on the CPU) would only cost time."""
    return [sys.executable, str(Path(__file__).with_name("cumulative_pretraining.py")), "--root", str(root),
            "continue", "--arch", arch, "--minutes", f"{minutes:.2f}", "--until-step", str(until_step),
            "--device", device, "--prior-workers", str(workers), "--checkpoint-every", "500"]


def run_all(commands: list[list[str]]) -> None:
    """Run ``commands`` at once; raise if any fails."""
    processes = [subprocess.Popen(command) for command in commands]
    codes = [process.wait() for process in processes]
    if any(codes):
        raise SystemExit(f"a slice failed (exit statuses {codes}); the runs keep their last checkpoints")


def pack(root: Path, out: Path) -> None:
    """Each run's files under ``out/<arch>/``, the log gzipped (files come back at most 16 MiB each)."""
    for arch in ARCHS:
        source, target = run_dir(root, arch), out / arch
        target.mkdir(parents=True, exist_ok=True)
        for name in ("train_state.pt", "model.pt", "config.json"):
            shutil.copy2(source / name, target / name)
        with open(source / "log.jsonl", "rb") as log, gzip.open(target / "log.jsonl.gz", "wb") as packed:
            shutil.copyfileobj(log, packed)


def trim(root: Path, aside: Path, kept_lines: int = 100) -> None:
    """Move each run's log to ``aside/<arch>/`` and leave only its last ``kept_lines`` lines."""
    for arch in ARCHS:
        log, moved = run_dir(root, arch) / "log.jsonl", aside / arch / "log.jsonl"
        if moved.exists():
            raise SystemExit(f"{moved} already holds a trimmed log: merge the slice (or move it back) first")
        atomic_write(moved, lambda tmp, log=log: shutil.copyfile(log, tmp))
        atomic_write_text(log, "".join(log.read_text().splitlines(keepends=True)[-kept_lines:]))
    print(f"logs moved to {aside}/<arch>/log.jsonl; the runs keep their last {kept_lines} lines", flush=True)


def merge(root: Path, aside: Path, fetched: Path) -> None:
    """Put a slice's files (``pack``'s folder) in the runs: its state, weights and config, and
    the whole log: the lines of the log ``trim`` moved aside up to the step the slice resumed
    from (later ones were lost with the CPU slice that wrote them), then the slice's lines.
    Each file is replaced atomically and the training state last, so a merge killed halfway
    is done again by the same command."""
    for arch in ARCHS:
        folder, moved = run_dir(root, arch), aside / arch / "log.jsonl"
        start = steps_done(folder)  # the saved state the slice resumed from
        log = moved if moved.exists() else folder / "log.jsonl"
        kept = [line for line in log.read_text().splitlines(keepends=True) if json.loads(line)["step"] <= start]
        with gzip.open(fetched / arch / "log.jsonl.gz", "rt") as packed:
            new = [line for line in packed if line.strip() and json.loads(line)["step"] > start]
        atomic_write_text(folder / "log.jsonl", "".join(kept + new))
        for name in ("model.pt", "config.json", "train_state.pt"):
            atomic_write(folder / name, lambda tmp, name=name: shutil.copyfile(fetched / arch / name, tmp))
        moved.unlink(missing_ok=True)
        print(f"{arch}: step {start} -> {steps_done(folder)} ({len(new)} log lines added)", flush=True)


def run(args: argparse.Namespace) -> None:
    started = time.monotonic()
    preflight(args.device)
    for arch in ARCHS:
        print(f"{arch}: step {steps_done(run_dir(args.root, arch))} before the slice", flush=True)
    minutes = {"equitabpfn": args.minutes, "tabpfn-star": args.tabpfn_star_minutes or args.minutes}
    run_all([slice_command(args.root, arch, minutes[arch], _FAR, args.device, args.prior_workers) for arch in ARCHS])
    steps = {arch: steps_done(run_dir(args.root, arch)) for arch in ARCHS}
    behind, ahead = sorted(ARCHS, key=steps.get)
    # the packing and the trip back need about a minute of the deadline
    minutes_left = args.deadline_minutes - (time.monotonic() - started) / 60 - 1.0
    print(f"after the shared phase: {steps}; {minutes_left:.1f} minutes left for {behind}", flush=True)
    if steps[behind] < steps[ahead] and minutes_left > 0.5:
        run_all([slice_command(args.root, behind, minutes_left, steps[ahead], args.device, 2 * args.prior_workers)])
    pack(args.root, args.out)
    print(f"packed: {({arch: steps_done(run_dir(args.root, arch)) for arch in ARCHS})}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path("results/pretraining"))
    parser.add_argument("--aside", type=Path, default=Path("runs/gpu-slice"), help="where trim moves the logs")
    sub = parser.add_subparsers(dest="command", required=True)
    slice_ = sub.add_parser("run", help="on the device machine: the slice, then its files to --out")
    slice_.add_argument("--out", type=Path, required=True, help="where the runs' files are copied at the end")
    slice_.add_argument("--minutes", type=float, required=True, help="both runs at once, this long")
    slice_.add_argument("--tabpfn-star-minutes", type=float,
                        help="TabPFN*'s share of the shared phase (default: --minutes)")
    slice_.add_argument("--deadline-minutes", type=float, required=True,
                        help="from the start of this script: the catch-up phase ends before it")
    slice_.add_argument("--device", default="cuda")
    slice_.add_argument("--prior-workers", type=int, default=max(1, (os.cpu_count() or 2) // 2 - 1),
                        help="per run (default: half the cores, less one for the training process)")
    sub.add_parser("trim", help="before the call: move the logs aside, keeping their last lines")
    back = sub.add_parser("merge", help="after the call: the fetched files into the runs, logs whole again")
    back.add_argument("fetched", type=Path, help="the folder the fetched files lie in (<arch>/...)")
    args = parser.parse_args()
    if args.command == "run":
        run(args)
    elif args.command == "trim":
        trim(args.root, args.aside)
    else:
        merge(args.root, args.aside, args.fetched)


if __name__ == "__main__":
    main()
