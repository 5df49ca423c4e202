"""The experiment: prior datasets, permutations, and measuring (batched) models and ensembles."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from equibench.equivariance.experiment import (
    EquivarianceConfig,
    draw_permutations,
    measure_equivariance,
    measure_model,
    prior_datasets,
)
from equibench.model import load_checkpoint

DATA = Path(__file__).parents[1] / "data"
TINY = (DATA / "tiny-equitabpfn.pt", DATA / "tiny-tabpfn-star.pt")


def test_prior_datasets_have_exactly_k_classes_in_train():
    data = prior_datasets(5, 3, rows=64, seed=0)
    assert data.x.shape[:2] == (3, 64) and data.n_train == 32
    assert all(len(torch.unique(y[: data.n_train])) == 5 for y in data.y)
    sigma, members = draw_permutations(3, 2, 4, seed=0)
    assert (sigma == torch.tensor([1, 0])).all() and (members[:, 0] == torch.arange(2)).all()


def test_tiny_checkpoints_equitabpfn_exactly_zero_tabpfn_star_positive():
    config = EquivarianceConfig(checkpoints=TINY, classes=(3, 5), ensembles=(1, 2), datasets=3, rows=64)
    frame = measure_equivariance(config)
    assert len(frame) == 8 and (frame.n_datasets == 3).all()
    equi, star = frame[frame.arch == "equitabpfn"], frame[frame.arch == "tabpfn-star"]
    assert (equi.argmax_change_fraction == 0.0).all() and (equi.logit_rms < 1e-5).all()
    assert (star.argmax_change_fraction > 0.0).all() and (star.logit_rms > 1e-3).all()


def _by_definition(model, x_train, y_train, x_test, n_classes, members, sigma, tie_tolerance=1e-5):
    """(arg-max change fraction, log-prob RMS) of the permutation ensemble over ``members``
    on one dataset, straight from the definition: the ensemble on sigma(Y), mapped back by
    sigma^-1, against the ensemble on Y."""
    def ensemble(labels):  # mean over members of softmax(logits / 0.8), in the class order of ``labels``
        with torch.inference_mode():
            probs = [torch.softmax(model(x_train[None], perm[labels][None], x_test[None], n_classes)[0].double()
                                   / 0.8, dim=-1)[:, perm] for perm in members]
        return torch.stack(probs).mean(dim=0)  # (M, K)

    reference = ensemble(y_train).log()
    mapped_back = ensemble(sigma[y_train])[:, sigma].log()
    predicted = reference.argmax(dim=1)
    beaten = mapped_back[torch.arange(len(predicted)), predicted] < mapped_back.max(dim=1).values - tie_tolerance
    return beaten.double().mean().item(), (mapped_back - reference).square().mean().sqrt().item()


def test_batched_ensembles_match_the_definition_on_a_wrapped_network():
    """measure_model (batched, composed relabellings) agrees with a per-dataset computation."""
    model = load_checkpoint(TINY[1])[0]
    data = prior_datasets(4, 2, rows=48, seed=1)
    sigma, members = draw_permutations(2, 4, 2, seed=1)
    fractions, rms = measure_model(model, data, 4, sigma, members, (1, 2), 0.8, 1e-5, torch.device("cpu"))
    n = data.n_train
    for d in range(2):
        for i, size in enumerate((1, 2)):
            change, error = _by_definition(model, data.x[d, :n], data.y[d, :n], data.x[d, n:], 4, members[d, :size],
                                           sigma[d])
            assert change == pytest.approx(fractions[i, d])
            assert error == pytest.approx(rms[i, d], rel=1e-4)
    assert fractions.max() > 0.0  # TabPFN* is not equivariant, so the comparison is not trivially 0 = 0
