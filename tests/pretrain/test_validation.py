"""Validation: fixed held-out prior batches, and metrics of the weights to ship."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from equibench.model import build_model, size_config
from equibench.pretrain.loss import batch_loss, forward_batch
from equibench.pretrain.optim import build_optimizer
from equibench.pretrain.validation import (
    argmax_changes,
    class_permutations,
    prior_metrics,
    validation_metrics,
    validation_prior_batches,
)

from .common import PRIOR, tiny_config


def test_validation_batches_are_fixed_and_the_metrics_leave_the_training_weights_alone():
    first, second = (validation_prior_batches(PRIOR, 2, 3, "cpu") for _ in range(2))
    assert all(torch.equal(a.x, b.x) and torch.equal(a.y, b.y) for a, b in zip(first, second))
    torch.manual_seed(0)
    model = build_model("equitabpfn", size_config("tiny"))
    optimizer, _ = build_optimizer(model, tiny_config(schedule="schedule-free"), torch.device("cpu"))
    optimizer.zero_grad()
    batch_loss(model, first[0]).backward()
    optimizer.step()
    training = [p.detach().clone() for p in model.parameters()]
    metrics = validation_metrics(model, optimizer, first, bundled=False, device="cpu")
    assert list(metrics) == ["prior_loss", "prior_accuracy", "prior_equivariance_error",
                             "prior_equivariance_error_std", "seconds"]
    assert 0 <= metrics["prior_accuracy"] <= 1
    assert all(torch.equal(p, t) for p, t in zip(model.parameters(), training)) and model.training
    with torch.no_grad():
        masked = sum(batch_loss(model, batch).item() for batch in first) / 2
    assert prior_metrics(model.eval(), first)["prior_loss"] == pytest.approx(masked)


def test_the_equivariance_error_is_zero_for_equitabpfn_only():
    """The paper's equivariance error observed while training: the share of prior test rows
    whose predicted class changes when the training classes are permuted."""
    batches = validation_prior_batches(PRIOR, 2, 4, "cpu")
    errors = {}
    for arch in ("equitabpfn", "tabpfn-star"):
        torch.manual_seed(0)
        errors[arch] = prior_metrics(build_model(arch, size_config("tiny")).eval(), batches)["prior_equivariance_error"]
    assert errors["equitabpfn"] == 0 and 0 < errors["tabpfn-star"] <= 1
    # the spread the paper reports: the standard deviation over the datasets of each one's share
    torch.manual_seed(0)
    star = build_model("tabpfn-star", size_config("tiny")).eval()
    with torch.no_grad():
        shares = torch.cat([argmax_changes(star, batch, forward_batch(star, batch), class_permutations(batch, index))
                            [batch.loss_mask.bool()] for index, batch in enumerate(batches)])
    spread = prior_metrics(star, batches)["prior_equivariance_error_std"]
    assert spread > 0 and spread == pytest.approx(float(np.std(shares.numpy())))
    permutations = class_permutations(batches[0], 0)
    assert torch.equal(permutations, class_permutations(batches[0], 0))
    assert not (permutations == torch.arange(batches[0].n_classes)).all(dim=1).any()  # never the identity


def test_pretraining_imports_nothing_of_evaluation_scoring_or_the_equivariance_experiment(tmp_path):
    code = ("import importlib, pkgutil, sys, equibench.pretrain as p\n"
            "for module in pkgutil.iter_modules(p.__path__): importlib.import_module(f'{p.__name__}.{module.name}')\n"
            "print(sorted(m for m in sys.modules if m.startswith(('equibench.evaluate', 'equibench.tasks', "
            "'equibench.scoring', 'equibench.equivariance.')) or m == 'equibench.equivariance'))")
    # outside the checkout, so that the installed package is imported, not the source tree
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert result.stdout.strip() == "[]"
