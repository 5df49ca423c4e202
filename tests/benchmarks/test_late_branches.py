"""benchmarks/late_branches.py: branch names, the optimiser change, the table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import schedulefree
import torch


@pytest.fixture
def branches(benchmark_module, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))  # it imports cumulative_pretraining
    monkeypatch.setattr(schedulefree.AdamWScheduleFree, "step", schedulefree.AdamWScheduleFree.step)  # restored after
    return benchmark_module("late_branches")


def test_branch_names_say_their_change(branches):
    assert branches.branch_change("window-2000") == (2000, None)
    assert branches.branch_change("lr-5e-4") == (None, 5e-4)
    assert branches.branch_change("lr-0.0003") == (None, 3e-4)
    for bad in ("window-0", "window-x", "lr-", "control", "lr-5e-4-window-2"):
        with pytest.raises(argparse.ArgumentTypeError, match="window-H or lr-X"):
            branches.branch_change(bad)


def _late_optimizer(steps_done: int, lr: float = 1e-3):
    """A schedule-free optimiser of one parameter as it is after ``steps_done`` constant-lr steps."""
    parameter = torch.nn.Parameter(torch.zeros(3))
    optimizer = schedulefree.AdamWScheduleFree([parameter], lr=lr)
    optimizer.train()
    parameter.grad = torch.ones(3)
    optimizer.step()
    group = optimizer.param_groups[0]
    group["k"], group["weight_sum"] = steps_done, steps_done * lr**2
    return parameter, optimizer


def test_a_window_caps_how_little_a_new_iterate_weighs_and_changes_do_not_stack(branches):
    parameter, optimizer = _late_optimizer(10_000)
    branches.change_optimizer(100, None)
    parameter.grad = torch.ones(3)
    optimizer.step()
    assert optimizer.param_groups[0]["weight_sum"] == pytest.approx(100 * 1e-3**2)  # the new weight is 1/100 of it
    branches.change_optimizer(None, None)  # another branch in the same process: the window no longer applies
    optimizer.step()
    assert optimizer.param_groups[0]["weight_sum"] == pytest.approx(101 * 1e-3**2)


def test_an_lr_branch_moves_the_iterate_by_its_lr(branches):
    moves = {}
    for lr in (None, 5e-4):
        parameter, optimizer = _late_optimizer(10_000)
        z = optimizer.state[parameter]["z"].clone()
        branches.change_optimizer(None, lr)
        parameter.grad = torch.ones(3)
        optimizer.step()
        moves[lr] = (z - optimizer.state[parameter]["z"]).abs().max().item()
        assert optimizer.param_groups[0]["lr_max"] == 1e-3  # the averaging weights keep the run's peak lr
    assert moves[5e-4] == pytest.approx(moves[None] / 2, rel=1e-4)


def _validation(step: int, loss: float) -> dict:
    return {"kind": "validation", "step": step, "prior_loss": loss, "prior_accuracy": 0.5,
            **{f"{name}_accuracy": 0.9 for name in ("iris", "wine", "breast_cancer", "digits")}}


def test_table_sets_each_branch_beside_the_run_at_the_same_steps(branches, tmp_path):
    out, root = tmp_path / "out", tmp_path / "runs"
    (out / "tabpfn-star").mkdir(parents=True)
    (root / "tabpfn-star").mkdir(parents=True)
    start = {"kind": "branch", "name": "window-2000", "arch": "tabpfn-star", "from_commit": "abc", "start_step": 100}
    lines = [start, _validation(150, 0.8), _validation(200, 0.7)]
    (out / "tabpfn-star" / "window-2000.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    run_log = [_validation(step, 0.9) for step in (50, 100, 150, 200, 250)] + [{"kind": "step", "step": 200}]
    (root / "tabpfn-star" / "log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in run_log))
    rows = branches.table("tabpfn-star", out, root).splitlines()[2:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    assert [(c[0], c[2], c[3]) for c in cells] == [
        ("100", "control (the run)", "0.9000"), ("150", "control (the run)", "0.9000"), ("150", "window-2000", "0.8000"),
        ("200", "control (the run)", "0.9000"), ("200", "window-2000", "0.7000"),
    ]
    assert cells[0][1] == "TabPFN\\*" and cells[0][4:] == ["50.0", "90.0", "90.0", "90.0", "90.0"]
    assert "no branches" in branches.table("equitabpfn", out, root)
