"""What a TabPFN user expects of the classifiers' outputs: the same numbers from two default
fits, predict_log_proba, averaged logits, the decoder's inputs as embeddings (ECOC too), and
sample_weight refused with its reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from make_fixtures import CHECKPOINTS
from sklearn.ensemble import AdaBoostClassifier
from sklearn.exceptions import NotFittedError

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier, classifier_for
from equibench.errors import InvalidInputError

from .common import blobs

EQUI = str(CHECKPOINTS["equitabpfn"])
STAR = str(CHECKPOINTS["tabpfn-star"])


def _equi(**params):
    return EquiTabPFNClassifier(**{"checkpoint": EQUI, "device": "cpu", **params})


def _star(**params):
    return TabPFNStarClassifier(**{"checkpoint": STAR, "device": "cpu", **params})


# -- 1. reproducible by default ------------------------------------------------------------


def test_two_default_fits_agree_and_none_draws_fresh_randomness():
    X, y = blobs(n=120)
    assert _equi().get_params()["random_state"] == 0
    first, second = _equi(max_train_rows=40, context="subsample"), _equi(max_train_rows=40, context="subsample")
    with pytest.warns(UserWarning, match="max_train_rows"):
        p_first, p_second = first.fit(X, y).predict_proba(X), second.fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(p_first, p_second)
    with pytest.warns(UserWarning, match="max_train_rows"):
        fresh = [_equi(max_train_rows=40, context="subsample", random_state=None).fit(X, y).strategy_.prepared[0][0].x_train for _ in range(2)]
    assert not torch.equal(fresh[0], fresh[1])  # another random subsample of 40 of the 120 rows
    assert classifier_for(STAR, n_classes=12).random_state == 0  # the ECOC wrapper too


# -- 2. outputs ------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [_equi, _star])
def test_log_proba_and_logits_agree_with_proba(make):
    X, y = blobs(n=60)
    fitted = make(n_estimators=3).fit(X, y)
    proba, log_proba = fitted.predict_proba(X), fitted.predict_log_proba(X)
    np.testing.assert_allclose(np.exp(log_proba), proba, rtol=0, atol=1e-12)
    single = make(n_estimators=1).fit(X, y)
    logits = single.predict_logits(X)
    assert logits.shape == (len(X), 3)
    expected = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()  # TabPFN's meaning: already / temperature
    np.testing.assert_allclose(expected, single.predict_proba(X), rtol=0, atol=1e-12)
    assert not np.allclose(make(n_estimators=3).fit(X, y).predict_logits(X), logits)  # an average of 3 members


@pytest.mark.parametrize("make", [_equi, _star])
def test_raw_logits_are_each_members_before_the_temperature(make):
    X, y = blobs(n=60)
    fitted = make(n_estimators=3, softmax_temperature=0.5).fit(X, y)
    raw = fitted.predict_raw_logits(X)
    assert raw.shape == (3, len(X), 3)
    np.testing.assert_allclose((raw / 0.5).mean(axis=0), fitted.predict_logits(X), rtol=0, atol=1e-12)
    members = torch.softmax(torch.from_numpy(raw) / 0.5, dim=-1).mean(dim=0).numpy()
    np.testing.assert_allclose(members, fitted.predict_proba(X), rtol=0, atol=1e-12)


def test_log_proba_is_finite_where_a_probability_underflows():
    X, y = blobs(n=60)
    fitted = _equi(n_estimators=2, softmax_temperature=1e-4).fit(X, y)
    assert (fitted.predict_proba(X) == 0).any()
    log_proba = fitted.predict_log_proba(X)
    assert np.isfinite(log_proba).all()
    np.testing.assert_allclose(np.exp(log_proba), fitted.predict_proba(X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("mode", ["low_memory", "fit_with_cache"])
def test_equitabpfn_embeddings_are_the_decoders_inputs(mode):
    X, y = blobs(n=60)
    fitted = _equi(n_estimators=1, fit_mode="fit_with_cache").fit(X, y)
    other = _equi(n_estimators=1, fit_mode=mode).fit(X, y)
    embeddings = other.get_embeddings(X[:7])
    d_model = fitted.model_.config.d_model
    assert embeddings.shape == (1, 7, 1 + 3, d_model) and embeddings.dtype == np.float32
    context = fitted.strategy_.cached_contexts()[0]
    with torch.inference_mode():
        h_test = torch.from_numpy(embeddings[0]).flatten(1).unsqueeze(0)  # (1, 7, (1+K)*d)
        logits = fitted.model_.decoder(context.h_train, h_test, context.y_onehot)[0]
    np.testing.assert_allclose(logits.numpy(), fitted.predict_raw_logits(X[:7])[0], rtol=0, atol=1e-5)
    assert _equi(n_estimators=3).fit(X, y).get_embeddings(X[:2]).shape == (3, 2, 4, d_model)


@pytest.mark.parametrize("mode", ["low_memory", "fit_with_cache"])
def test_tabpfn_star_embeddings_are_the_decoders_inputs(mode):
    X, y = blobs(n=60)
    fitted = _star(n_estimators=1, fit_mode=mode).fit(X, y)
    embeddings = fitted.get_embeddings(X[:7])
    assert embeddings.shape == (1, 7, fitted.model_.config.d_model)
    with torch.inference_mode():
        logits = fitted.model_.decoder(torch.from_numpy(embeddings[0]))[:, :3]
    np.testing.assert_allclose(logits.numpy(), fitted.predict_raw_logits(X[:7])[0], rtol=0, atol=1e-5)


def test_outputs_need_a_fit():
    for method in ("predict_log_proba", "predict_logits", "get_embeddings"):
        with pytest.raises(NotFittedError):
            getattr(_equi(), method)(np.zeros((2, 4)))


def test_ecoc_beyond_the_class_limit_has_the_same_outputs():
    X, y = blobs(n=72, n_classes=12)
    ecoc = classifier_for(STAR, n_classes=12, n_estimators=1, device="cpu").fit(X, y)
    proba = ecoc.predict_proba(X)
    np.testing.assert_allclose(np.exp(ecoc.predict_log_proba(X)), proba, rtol=0, atol=1e-12)
    scores = ecoc.predict_logits(X)
    np.testing.assert_allclose(torch.softmax(torch.from_numpy(scores), -1).numpy(), proba, rtol=0, atol=1e-12)
    embeddings = ecoc.get_embeddings(X[:5])  # one single-member classifier per codebook row
    assert embeddings.shape == (len(ecoc.codebook_), 5, ecoc.estimators_[0].model_.config.d_model)


def test_sample_weight_is_refused_with_the_reason():
    X, y = blobs(n=60)
    with pytest.raises(InvalidInputError, match="sample_weight is not supported: the network conditions on the"):
        _equi().fit(X, y, sample_weight=np.ones(len(y)))
    with pytest.raises(TypeError, match="fit\\(\\) takes only X and y, got groups"):
        _equi().fit(X, y, groups=np.ones(len(y)))
    with pytest.raises(ValueError, match="doesn't support sample_weight"):  # scikit-learn's own check
        AdaBoostClassifier(estimator=_equi(), n_estimators=2).fit(X, y)
