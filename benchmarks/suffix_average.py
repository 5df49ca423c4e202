"""Suffix averages of the cumulative run: the schedule-free average of the late steps only (issue 13).

With a constant lr, schedule-free AdamW's evaluation weights x_t are the weighted average of
every iterate z_i of the run since step 1, x_t = sum_i w_i z_i / W_t, where W_t is the
optimiser's ``weight_sum`` (w_i = lr^2 after warm-up). At step 65000 the first 10,000 steps,
taken when the loss was far higher, still hold 15% of it. Two committed run states (steps
s < t) give the average of the iterates of steps s+1..t alone, exactly and without training:

    x_(s, t] = (W_t x_t - W_s x_s) / (W_t - W_s)

that is, x_t + lambda (x_t - x_s) with lambda = W_s / (W_t - W_s): a step along the average's
own path since step s. ``--extrapolate LAMBDA`` writes that step for another lambda instead
(small ones ask whether the average lags behind where its path is heading). Either is
written as a checkpoint (float32, the model card of step t with a note), to be scored like
any other (benchmarks/context_length.py, bundled_trend.py, quality.py):

    python benchmarks/suffix_average.py --arch equitabpfn --start COMMIT --end COMMIT --out PATH \
        [--extrapolate LAMBDA]

COMMIT is a commit of this repository whose results/pretraining/<arch>/train_state.pt holds
the run's state at that step (``git log -- results/pretraining/<arch>/train_state.pt``);
``--end`` may also be ``worktree`` (the run folder as it is now).
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import tempfile
from pathlib import Path

import torch
from torch import nn

from equibench.model import ModelCard, save_checkpoint
from equibench.pretrain import STATE_FILE
from equibench.pretrain.run_dir import load_state, model_from_state

REPO = Path(__file__).resolve().parents[1]
RUNS = Path("results/pretraining")


def committed_state(arch: str, commit: str, scratch: Path) -> Path:
    """A run folder holding the run's train_state.pt as committed at ``commit`` (or the
    working tree's run folder for ``worktree``)."""
    if commit == "worktree":
        return REPO / RUNS / arch
    folder = scratch / f"{arch}-{commit}"
    folder.mkdir(exist_ok=True)
    path = (RUNS / arch / STATE_FILE).as_posix()
    shown = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:{path}"], capture_output=True)
    if shown.returncode != 0:
        raise SystemExit(f"no {path} at commit {commit!r}: {shown.stderr.decode().strip()}")
    (folder / STATE_FILE).write_bytes(shown.stdout)
    return folder


def averaged_weights(run: Path) -> tuple[nn.Module, ModelCard, float, int, torch.Tensor]:
    """The run state's model with its evaluation weights x, its card, weight sum W, step and
    latest iterate z (all parameters flattened, float64)."""
    state = load_state(run)
    group = state["optimizer"]["param_groups"][0]
    if group.get("weight_sum") is None:
        raise SystemExit(f"{run / STATE_FILE} is not a schedule-free run state (no weight_sum)")
    model, card = model_from_state(run)
    z = flat([state["optimizer"]["state"][index]["z"] for index in group["params"]])
    return model, card, float(group["weight_sum"]), int(state["step"]), z


def flat(tensors) -> torch.Tensor:
    return torch.cat([tensor.detach().double().flatten() for tensor in tensors])


def extrapolated(start: dict, end: dict, lam: float) -> dict:
    """x_t + lam (x_t - x_s) for every floating tensor (computed in float64)."""
    moved = {}
    for name, x_end in end.items():
        if not x_end.is_floating_point():
            moved[name] = x_end
            continue
        step = x_end.double() - start[name].double()
        moved[name] = (x_end.double() + lam * step).to(x_end.dtype)
    return moved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", choices=["equitabpfn", "tabpfn-star"], required=True)
    parser.add_argument("--start", required=True, help="commit holding the state at step s")
    parser.add_argument("--end", required=True, help="commit holding the state at step t, or 'worktree'")
    parser.add_argument("--out", type=Path, required=True, help="checkpoint file to write")
    parser.add_argument("--extrapolate", type=float, metavar="LAMBDA",
                        help="write x_t + LAMBDA (x_t - x_s) instead of the suffix average")
    args = parser.parse_args()
    if args.out.exists():
        raise SystemExit(f"--out {args.out} already exists; remove it or choose another path")

    with tempfile.TemporaryDirectory() as scratch:
        start_run = committed_state(args.arch, args.start, Path(scratch))
        end_run = committed_state(args.arch, args.end, Path(scratch))
        start_model, _, w_start, step_start, _ = averaged_weights(start_run)
        model, card, w_end, step_end, z_end = averaged_weights(end_run)
    if step_end <= step_start:
        raise SystemExit(f"--end is at step {step_end}, not after --start's {step_start}")
    x_start, x_end = flat(start_model.parameters()), flat(model.parameters())
    print(
        f"|x_{step_end}| = {x_end.norm():.1f}, |x_{step_end} - x_{step_start}| = {(x_end - x_start).norm():.1f}, "
        f"|z_{step_end} - x_{step_end}| = {(z_end - x_end).norm():.1f}"
    )
    if args.extrapolate is None:
        lam = w_start / (w_end - w_start)
        what = f"suffix average: the schedule-free iterates of steps {step_start + 1}-{step_end} only"
    else:
        lam = args.extrapolate
        what = f"x at step {step_end} + {lam:g} (x at {step_end} - x at {step_start})"
    model.load_state_dict(extrapolated(start_model.state_dict(), model.state_dict(), lam))
    note = f"{what} (benchmarks/suffix_average.py --start {args.start} --end {args.end})"
    card = dataclasses.replace(card, notes=note, metrics={})
    path = save_checkpoint(model, args.out, card)
    print(f"wrote {path}: {note}")


if __name__ == "__main__":
    main()
