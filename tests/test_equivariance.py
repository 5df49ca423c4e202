"""The equivariance metric, the prior experiment, the 9-point toy and `equibench equivariance`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from equibench.model import load_checkpoint
from typer.testing import CliRunner

from equibench.cli import app
from equibench.equivariance import (
    TOY_ORDERINGS,
    EquivarianceConfig,
    draw_permutations,
    equivariance_error,
    measure_equivariance,
    measure_model,
    prior_datasets,
    toy_predictions,
)

DATA = Path(__file__).parent / "data"
TINY = (DATA / "tiny-equitabpfn.pt", DATA / "tiny-tabpfn-star.pt")


def _problem(n_classes: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(n_classes, 2))
    y_train = np.arange(40) % n_classes
    x_train = centres[y_train] + rng.normal(size=(40, 2))
    x_test = rng.normal(scale=3.0, size=(25, 2))
    return torch.as_tensor(x_train), torch.as_tensor(y_train), torch.as_tensor(x_test)


def nearest_centroid(x_train, y_train, x_test, n_classes):
    """Equivariant: the logit of class k is minus the squared distance to its centroid."""
    x, y, t = x_train.numpy(), y_train.numpy(), x_test.numpy()
    centroids = np.stack([x[y == k].mean(axis=0) for k in range(n_classes)])  # (K, F)
    return -((t[:, None, :] - centroids[None]) ** 2).sum(axis=-1)  # (M, K)


def favours_class_zero(x_train, y_train, x_test, n_classes):
    """Not equivariant: label 0 gets a bonus whatever class it names."""
    logits = nearest_centroid(x_train, y_train, x_test, n_classes)
    logits[:, 0] += 4.0
    return logits


def linear_slot_head(x_train, y_train, x_test, n_classes):
    """Not equivariant: a fixed linear map over the one-hot slots of the nearest train row."""
    nearest = torch.cdist(x_test, x_train).argmin(dim=1)
    onehot = torch.nn.functional.one_hot(y_train[nearest], n_classes).double()  # (M, K)
    head = torch.randn(n_classes, n_classes, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return onehot @ head


def _permutations(n_classes: int) -> np.ndarray:
    return np.array([np.random.default_rng(s).permutation(n_classes) for s in range(10)])


def test_metric_is_zero_for_an_equivariant_predictor():
    x_train, y_train, x_test = _problem()
    error = equivariance_error(nearest_centroid, x_train, y_train, x_test, 4, _permutations(4))
    assert error.argmax_change_fraction == 0.0 and error.logit_rms < 1e-12
    def probabilities(*args):
        return torch.softmax(torch.as_tensor(nearest_centroid(*args)), dim=-1)

    error = equivariance_error(probabilities, x_train, y_train, x_test, 4, [3, 2, 1, 0], output="probs")
    assert error.argmax_change_fraction == 0.0 and error.logit_rms < 1e-12


@pytest.mark.parametrize("predict", [favours_class_zero, linear_slot_head])
def test_metric_is_positive_for_non_equivariant_predictors(predict):
    x_train, y_train, x_test = _problem()
    error = equivariance_error(predict, x_train, y_train, x_test, 4, _permutations(4))
    assert 0.0 < error.argmax_change_fraction <= 1.0 and error.logit_rms > 0.1


def test_metric_refuses_a_non_permutation():
    x_train, y_train, x_test = _problem()
    with pytest.raises(ValueError, match="0..3 once"):
        equivariance_error(nearest_centroid, x_train, y_train, x_test, 4, [0, 0, 1, 2])


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


def _permutation_ensemble(model, members):
    """predict() averaging the mapped-back softmax(logits / 0.8) over relabellings ``members``."""
    def predict(x_train, y_train, x_test, n_classes):
        with torch.inference_mode():
            probs = [torch.softmax(model(x_train[None], perm[y_train][None], x_test[None], n_classes)[0].double()
                                   / 0.8, dim=-1)[:, perm] for perm in members]
        return torch.stack(probs).mean(dim=0)  # (M, K)
    return predict


def test_batched_ensembles_match_the_metric_on_a_wrapped_network():
    """measure_model (batched) agrees with equivariance_error on an explicit permutation ensemble."""
    model = load_checkpoint(TINY[1])[0]
    data = prior_datasets(4, 2, rows=48, seed=1)
    sigma, members = draw_permutations(2, 4, 2, seed=1)
    fractions, rms = measure_model(model, data, 4, sigma, members, (1, 2), 0.8, 1e-5, torch.device("cpu"))
    n = data.n_train
    for d in range(2):
        for i, size in enumerate((1, 2)):
            predict = _permutation_ensemble(model, members[d, :size])
            error = equivariance_error(predict, data.x[d, :n], data.y[d, :n], data.x[d, n:], 4, sigma[d],
                                       output="probs")
            assert error.argmax_change_fraction == pytest.approx(fractions[i, d])
            assert error.logit_rms == pytest.approx(rms[i, d], rel=1e-4)


def test_nine_point_toy_panels_agree_only_for_equitabpfn():
    orderings = list(TOY_ORDERINGS.values())
    equi, star = (load_checkpoint(path)[0] for path in TINY)
    assert np.array_equal(toy_predictions(equi, 12, orderings[0]), toy_predictions(equi, 12, orderings[2]))
    assert not np.array_equal(toy_predictions(star, 12, orderings[0]), toy_predictions(star, 12, orderings[2]))


def _cli(tmp_path, *args):
    checkpoints = [arg for path in TINY for arg in ("--checkpoints", str(path))]
    return CliRunner().invoke(app, ["equivariance", *checkpoints, "--out", str(tmp_path), *args])


def test_cli_writes_the_tables_figures_and_readme(tmp_path):
    result = _cli(tmp_path, "--classes", "3,12", "--ensembles", "1,2", "--datasets", "2", "--rows", "64",
                  "--toy-grid", "10")
    assert result.exit_code == 0, result.output
    expected = {"equivariance.csv", "equivariance.md", "equivariance-gap.png", "equivariance-gap.pdf",
                "nine-point-toy.png", "nine-point-toy.pdf", "README.md"}
    assert {p.name for p in tmp_path.iterdir()} == expected
    frame = pd.read_csv(tmp_path / "equivariance.csv")
    assert set(zip(frame.checkpoint, frame.K)) == {("tiny-equitabpfn", 3), ("tiny-tabpfn-star", 3),
                                                   ("tiny-equitabpfn", 12)}
    assert "K=12 skipped" in result.output and "K=12 skipped" in (tmp_path / "README.md").read_text()
    assert not math.isnan(frame.argmax_change_std.iloc[0])


@pytest.mark.parametrize("args, message", [
    (["--classes", "two"], "--classes takes comma-separated integers"),
    (["--classes", "1,3"], "class counts K must be at least 2"),
    (["--ensembles", "0,2"], "ensemble sizes must be at least 1"),
    (["--datasets", "0"], "number of datasets must be at least 1"),
    (["--rows", "8"], "fewer than 2 per class"),
    (["--checkpoints", "/no/such.pt"], "does not exist"),
])
def test_cli_bad_input(tmp_path, args, message):
    result = CliRunner().invoke(app, ["equivariance", "--out", str(tmp_path / "out"), *args])
    assert result.exit_code == 2 and message in result.output
    assert not (tmp_path / "out").exists()
