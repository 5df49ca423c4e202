"""Inference in pieces: the cached train side (fit once, predict many) and the chunked,
in-place forward give the networks' own forward, for every block variant."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from make_fixtures import CHECKPOINTS
from sklearn.inspection import permutation_importance

from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.model import build_model, size_config
from equibench.model.inference import ChunkPlan

VARIANTS = [dict(norm_first=False, qk_norm=False), dict(norm_first=True, qk_norm=True), dict(norm_first=True)]


def _problem(n_train=40, n_test=9, n_features=6, n_classes=4, batch=2, seed=0, dtype=torch.float32):
    generator = torch.Generator().manual_seed(seed)
    x_train = torch.randn(batch, n_train, n_features, generator=generator, dtype=dtype)
    x_train[0, 3, 2] = float("nan")
    x_test = torch.randn(batch, n_test, n_features, generator=generator, dtype=dtype)
    x_test[-1, 0, 1] = float("inf")
    y_train = torch.randint(0, n_classes, (batch, n_train), generator=generator)
    return x_train, y_train, x_test


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(k for k, on in v.items() if on) or "post-ln")
@pytest.mark.parametrize("plan", [ChunkPlan(), ChunkPlan(max_elements=64)], ids=["one-chunk", "many-chunks"])
def test_pieces_compute_the_forward(arch, variant, plan):
    torch.manual_seed(0)
    model = build_model(arch, size_config("tiny", **variant)).double().eval()
    x_train, y_train, x_test = _problem(dtype=torch.float64)
    with torch.inference_mode():
        expected = model(x_train, y_train, x_test, 4)
        context = model.encode_context(x_train, y_train, 4, plan)
        cached = model.predict_in_context(context, x_test, plan)
        again = model.predict_in_context(context, x_test[:, 4:], plan)  # the context is reusable
        chunked = model.forward_chunked(x_train, y_train, x_test, 4, plan)
    torch.testing.assert_close(cached, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(again, expected[:, 4:], rtol=0, atol=1e-12)
    torch.testing.assert_close(chunked, expected, rtol=0, atol=1e-12)


def test_many_classes_in_small_chunks_match_in_float32():
    torch.manual_seed(1)
    model = build_model("equitabpfn", size_config("tiny")).eval()
    x_train, y_train, x_test = _problem(n_train=60, n_test=5, n_classes=150, batch=1)
    y_train = torch.arange(60).remainder(150).unsqueeze(0)
    plan = ChunkPlan(max_elements=20_000)  # forces chunks of a few slots and rows
    assert plan.slots(65, 60, 32, 64) < 151 and plan.rows(151, 32, 64) < 65
    with torch.inference_mode():
        expected = model(x_train, y_train, x_test, 150)
        chunked = model.forward_chunked(x_train, y_train, x_test, 150, plan)
        cached = model.predict_in_context(model.encode_context(x_train, y_train, 150, plan), x_test, plan)
    torch.testing.assert_close(chunked, expected, rtol=0, atol=2e-5)
    torch.testing.assert_close(cached, expected, rtol=0, atol=2e-5)


def test_context_size_is_keys_and_values_per_layer():
    model = build_model("equitabpfn", size_config("tiny")).eval()
    x_train, y_train, _ = _problem(batch=1)
    with torch.inference_mode():
        context = model.encode_context(x_train, y_train, 4)
    config = model.config
    per_layer = 2 * 40 * 5 * config.d_model * 4  # keys + values, N rows, 1+K slots, float32
    assert len(context.keys_values) == config.n_layers
    assert context.nbytes() == config.n_layers * per_layer + 40 * 5 * config.d_model * 4 + 40 * 4 * 4


def _blobs(n=90, n_features=4, n_classes=3, seed=0):
    rng = np.random.RandomState(seed)
    centres = rng.normal(scale=3, size=(n_classes, n_features))
    y = np.arange(n) % n_classes
    return centres[y] + rng.normal(size=(n, n_features)), y


@pytest.mark.parametrize("classifier_class", [EquiTabPFNClassifier, TabPFNStarClassifier])
def test_fit_with_cache_predicts_like_low_memory(classifier_class):
    checkpoint = CHECKPOINTS["equitabpfn" if classifier_class is EquiTabPFNClassifier else "tabpfn-star"]
    X, y = _blobs()
    params = dict(checkpoint=checkpoint, device="cpu", random_state=0, n_estimators=3, batch_size=16)
    plain = classifier_class(**params).fit(X, y)
    cached = classifier_class(fit_mode="fit_with_cache", **params).fit(X, y)
    assert not plain.strategy_.cached_contexts() and len(cached.strategy_.cached_contexts()) == 3
    np.testing.assert_allclose(cached.predict_proba(X), plain.predict_proba(X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(cached.predict_proba(X[:7]), plain.predict_proba(X[:7]), rtol=0, atol=1e-6)
    exact = classifier_class(fit_mode="fit_with_cache", inference_precision="float64", **params).fit(X, y)
    exact_plain = classifier_class(inference_precision="float64", **params).fit(X, y)
    np.testing.assert_allclose(exact.predict_proba(X), exact_plain.predict_proba(X), rtol=0, atol=1e-12)
    loaded = pickle.loads(pickle.dumps(cached))  # the cache is not pickled, and is rebuilt
    assert not loaded.strategy_.cached_contexts()
    np.testing.assert_array_equal(loaded.predict_proba(X), cached.predict_proba(X))


def test_fit_with_cache_serves_permutation_importance():
    X, y = _blobs()
    X[:, 3] = np.random.RandomState(1).normal(size=len(X))  # a useless feature
    params = dict(checkpoint=CHECKPOINTS["equitabpfn"], device="cpu", random_state=0, n_estimators=2)
    importances = [
        permutation_importance(EquiTabPFNClassifier(fit_mode=mode, **params).fit(X, y), X, y, n_repeats=2,
                               random_state=0).importances_mean
        for mode in ("low_memory", "fit_with_cache")
    ]
    np.testing.assert_allclose(importances[0], importances[1], atol=1e-9)


def test_bad_fit_mode():
    with pytest.raises(ValueError, match=r"^The 'fit_mode' parameter of EquiTabPFNClassifier must be a str among "
                       r"\{'low_memory', 'fit_with_cache', 'fit_preprocessors'\}. Got 'fit_everything' instead.$"):
        EquiTabPFNClassifier(checkpoint=CHECKPOINTS["equitabpfn"], fit_mode="fit_everything").fit(*_blobs())


def test_fit_with_cache_survives_the_fit_state(tmp_path):
    X, y = _blobs()
    fitted = EquiTabPFNClassifier(checkpoint=CHECKPOINTS["equitabpfn"], device="cpu", random_state=0,
                                  fit_mode="fit_with_cache").fit(X, y)
    loaded = EquiTabPFNClassifier.load_from_fit_state(fitted.save_fit_state(tmp_path / "state.npz"))
    assert loaded.fit_mode == "fit_with_cache"  # the cache is built at load, as at fit
    assert len(loaded.strategy_.cached_contexts()) == len(fitted.strategy_.cached_contexts())
    np.testing.assert_array_equal(loaded.predict_proba(X), fitted.predict_proba(X))
