"""Fine-tuning on the table: the validation split, the guard (the base weights restored exactly),
exact equivariance of the fine-tuned EquiTabPFN, episodes from local contexts, TabPFN* past its
class limit, persistence of the tuned weights, the time limit, the estimator contract and bad
parameters."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from make_fixtures import CHECKPOINTS
from sklearn.utils.estimator_checks import check_param_validation, parametrize_with_checks

from equibench import (
    EquiTabPFNClassifier,
    FinetunedEquiTabPFNClassifier,
    FinetunedTabPFNStarClassifier,
    TabPFNStarClassifier,
)
from equibench.classifier.episodes import EpisodeSampler, validation_split
from equibench.errors import InvalidInputError

from .common import blobs

EQUI = str(CHECKPOINTS["equitabpfn"])
STAR = str(CHECKPOINTS["tabpfn-star"])
#: a short fine-tuning with a step size that moves the tiny network, every improving step kept
QUICK = {"epochs": 3, "episodes_per_epoch": 3, "learning_rate": 1e-3, "min_delta": 0.0, "validation_split_ratio": 0.25}


def _tuned(make=FinetunedEquiTabPFNClassifier, checkpoint=EQUI, **params):
    return make(**{"checkpoint": checkpoint, "device": "cpu", "random_state": 0, "n_estimators": 2, **QUICK, **params})


def _table(n=160, n_classes=4, seed=0):
    return blobs(n=n, n_features=5, n_classes=n_classes, seed=seed)


def test_the_validation_split_is_stratified_and_blind_to_the_class_names():
    y = np.repeat([0, 1, 2, 3], [50, 30, 19, 1])
    train, validation = validation_split(y, 0.2, 1000, np.random.RandomState(0))
    assert sorted(np.concatenate([train, validation])) == list(range(100))
    assert [int((y[validation] == c).sum()) for c in range(4)] == [10, 6, 4, 0]  # the one-row class stays in train
    relabelled = np.array([3, 0, 2, 1])[y]
    again = validation_split(relabelled, 0.2, 1000, np.random.RandomState(0))
    np.testing.assert_array_equal(again[1], validation)
    capped = validation_split(y, 0.2, 10, np.random.RandomState(0))[1]
    assert len(capped) == 10


def test_fine_tuning_records_its_run_and_changes_the_predictions():
    X, y = _table()
    tuned = _tuned().fit(X, y)
    record = tuned.fine_tuning_
    assert record["steps"] > 0 and record["kept_step"] > 0 and tuned.finetuned_state_ is not None
    assert record["validation_log_loss_after"] < record["validation_log_loss_before"]
    assert record["validation_accuracy_after"] >= record["validation_accuracy_before"]
    assert record["validation_rows"] == 40 and record["seconds"] > 0
    base = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", random_state=0, n_estimators=2).fit(X, y)
    assert not np.allclose(tuned.predict_proba(X), base.predict_proba(X))


@pytest.mark.parametrize("make, base, checkpoint", [(FinetunedEquiTabPFNClassifier, EquiTabPFNClassifier, EQUI),
                                                    (FinetunedTabPFNStarClassifier, TabPFNStarClassifier, STAR)])
def test_the_guard_restores_the_base_weights_exactly(make, base, checkpoint):
    """No step beats the base by min_delta: the predictions are the zero-shot classifier's, bit for bit."""
    X, y = _table()
    tuned = _tuned(make, checkpoint, min_delta=1e9).fit(X, y)
    assert tuned.fine_tuning_["kept_step"] == 0 and tuned.fine_tuning_["steps"] > 0
    assert tuned.finetuned_state_ is None and tuned.fine_tuning_["stopped"] in ("patience", "epochs")
    zero_shot = base(checkpoint=checkpoint, device="cpu", random_state=0, n_estimators=2).fit(X, y)
    np.testing.assert_array_equal(tuned.predict_proba(X), zero_shot.predict_proba(X))


def test_the_fine_tuned_equitabpfn_is_exactly_equivariant_to_the_class_names():
    X, y = _table()
    permutation = np.array([2, 0, 3, 1])
    original = _tuned(inference_precision="float64").fit(X[:120], y[:120])
    relabelled = _tuned(inference_precision="float64").fit(X[:120], permutation[y[:120]])
    assert original.fine_tuning_["kept_step"] > 0
    assert relabelled.fine_tuning_["kept_step"] == original.fine_tuning_["kept_step"]
    np.testing.assert_allclose(relabelled.predict_proba(X[120:])[:, permutation], original.predict_proba(X[120:]),
                               atol=1e-6)


def test_episodes_of_local_contexts_are_neighbourhoods_with_their_classes():
    X, y = _table(n=400, n_classes=6)
    local = {"context": "local", "local_neighbors": 8, "local_cluster_size": 20, "local_max_rows": 40}
    tuned = _tuned(**local).fit(X, y)
    assert tuned.context_ == "local" and tuned.fine_tuning_["steps"] > 0
    zero_shot = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", random_state=0, n_estimators=2, **local).fit(X, y)
    sampler = EpisodeSampler(zero_shot.strategy_, 0.25, np.random.RandomState(0), zero_shot.model_.token_slots)
    for _ in range(10):
        episode = sampler.draw()
        if episode is None:
            continue
        assert len(episode.x_context) + len(episode.x_query) <= 40
        assert set(episode.y_query.tolist()) <= set(episode.y_context.tolist()) <= set(range(episode.n_classes))
        assert set(episode.y_context.tolist()) == set(range(episode.n_classes))  # only the context's classes


def test_tabpfn_star_past_its_class_limit_fine_tunes_and_decodes_output_codes():
    X, y = _table(n=240, n_classes=12)
    tuned = _tuned(FinetunedTabPFNStarClassifier, STAR).fit(X, y)
    proba = tuned.predict_proba(X)
    assert proba.shape == (240, 12) and tuned.fine_tuning_["steps"] > 0
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    with pytest.raises(InvalidInputError, match="class"):
        TabPFNStarClassifier(checkpoint=STAR, device="cpu").fit(X, y)  # the zero-shot one asks for ECOC


def test_pickles_and_fit_states_carry_the_tuned_weights(tmp_path):
    X, y = _table()
    tuned = _tuned().fit(X, y)
    expected = tuned.predict_proba(X)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(tuned)).predict_proba(X), expected)
    loaded = FinetunedEquiTabPFNClassifier.load_from_fit_state(tuned.save_fit_state(tmp_path / "tuned.npz"))
    np.testing.assert_allclose(loaded.predict_proba(X), expected, atol=1e-6)
    assert loaded.fine_tuning_ == tuned.fine_tuning_


def test_the_time_limit_stops_fine_tuning():
    X, y = _table()
    tuned = _tuned(time_limit=1e-3, epochs=50).fit(X, y)
    assert tuned.fine_tuning_["stopped"] == "time_limit" and tuned.fine_tuning_["steps"] == 0


def test_a_table_too_small_to_hold_out_rows_is_the_zero_shot_classifier():
    X, y = _table(n=4, n_classes=4)
    tuned = _tuned().fit(X, y)
    assert tuned.fine_tuning_["validation_rows"] == 0 and tuned.fine_tuning_["stopped"] == "no validation rows"


@pytest.mark.parametrize("params, name", [({"learning_rate": -1.0}, "learning_rate"),
                                          ({"validation_split_ratio": 1.0}, "validation_split_ratio"),
                                          ({"epochs": 0}, "epochs"), ({"time_limit": 0}, "time_limit")])
def test_bad_fine_tuning_parameters_get_one_clear_error(params, name):
    X, y = _table()
    with pytest.raises(InvalidInputError, match=f"'{name}' parameter"):
        _tuned(**params).fit(X, y)


def test_parameters_are_the_zero_shot_ones_and_the_fine_tuning_ones():
    params = FinetunedEquiTabPFNClassifier().get_params()
    assert set(EquiTabPFNClassifier().get_params()) < set(params)
    assert {"epochs", "learning_rate", "weight_decay", "validation_split_ratio", "early_stopping_patience",
            "grad_clip_value", "time_limit", "min_delta"} <= set(params)
    assert params["learning_rate"] == 1e-5 and params["validation_split_ratio"] == 0.1


@pytest.mark.parametrize("estimator", [FinetunedEquiTabPFNClassifier(checkpoint=EQUI, device="cpu")],
                         ids=lambda e: type(e).__name__)
def test_parameter_constraints_cover_every_parameter(estimator):
    check_param_validation(type(estimator).__name__, estimator)


@parametrize_with_checks([FinetunedEquiTabPFNClassifier(checkpoint=EQUI, device="cpu", n_estimators=1, epochs=1,
                                                        episodes_per_epoch=1)])
def test_sklearn_estimator_contract(estimator, check):
    check(estimator)


def test_a_non_finite_loss_stops_fine_tuning_keeping_the_base(monkeypatch):
    from equibench.classifier import finetune

    monkeypatch.setattr(finetune, "episode_loss", lambda *args: torch.tensor(float("nan"), requires_grad=True))
    X, y = _table()
    tuned = _tuned().fit(X, y)
    assert tuned.fine_tuning_["stopped"] == "non-finite loss" and tuned.finetuned_state_ is None
    zero_shot = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", random_state=0, n_estimators=2).fit(X, y)
    np.testing.assert_array_equal(tuned.predict_proba(X), zero_shot.predict_proba(X))


def test_episodes_are_bounded_in_rows_and_tokens():
    """A shared context of 3,000 rows gives episodes of at most 1,024 rows, and fewer with many classes
    (EquiTabPFN's tokens per row grow with them)."""
    from equibench.classifier.episodes import MAX_EPISODE_ROWS, MAX_EPISODE_TOKENS

    for n_classes in (3, 40):
        X, y = _table(n=3000, n_classes=n_classes)
        zero_shot = EquiTabPFNClassifier(checkpoint=EQUI, device="cpu", n_estimators=1).fit(X, y)
        sampler = EpisodeSampler(zero_shot.strategy_, 0.2, np.random.RandomState(0), zero_shot.model_.token_slots)
        episode = sampler.draw()
        rows = len(episode.x_context) + len(episode.x_query)
        assert rows <= MAX_EPISODE_ROWS and rows * zero_shot.model_.token_slots(n_classes) <= MAX_EPISODE_TOKENS
        assert rows > MAX_EPISODE_ROWS // 2 if n_classes == 3 else rows < MAX_EPISODE_ROWS // 2
