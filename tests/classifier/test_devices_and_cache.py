"""Devices (auto picks MPS too, unusable devices refused at fit, fitted classifiers move),
TabPFN's fit_mode name, and the fit_with_cache cache: its memory estimated before it is
built, a limit, and a lower-precision cache. Runs on the CPU: other devices are simulated."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from make_fixtures import CHECKPOINTS

import equibench.classifier.estimator as estimator_module
from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.classifier.network_runs import NetworkRunner
from equibench.devices import resolve_device
from equibench.errors import InvalidInputError

from .common import blobs

EQUI = str(CHECKPOINTS["equitabpfn"])
STAR = str(CHECKPOINTS["tabpfn-star"])


def _equi(**params):
    return EquiTabPFNClassifier(**{"checkpoint": EQUI, "device": "cpu", "n_estimators": 2, **params})


def _simulate(monkeypatch, cuda: bool, mps: bool):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


# -- 4. devices --------------------------------------------------------------------------


@pytest.mark.parametrize("cuda, mps, expected", [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")])
def test_auto_picks_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    _simulate(monkeypatch, cuda, mps)
    assert resolve_device("auto") == torch.device(expected)


@pytest.mark.parametrize("device, name", [("cuda", "CUDA"), ("cuda:1", "CUDA"), ("mps", "MPS")])
def test_a_device_torch_cannot_use_is_refused_at_fit_in_one_line(monkeypatch, device, name):
    _simulate(monkeypatch, cuda=False, mps=False)
    with pytest.raises(InvalidInputError, match=f"cannot use {name} here; use `device='auto'`") as caught:
        _equi(device=device).fit(*blobs(n=60))
    assert "\n" not in str(caught.value)
    with pytest.raises(InvalidInputError, match="`device` must be 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps', got 'meta'"):
        _equi(device="meta").fit(*blobs(n=60))


def test_a_fitted_classifier_moves_with_its_cache(monkeypatch):
    X, y = blobs(n=60)
    fitted = _equi(fit_mode="fit_with_cache").fit(X, y)
    before = fitted.predict_proba(X)
    assert fitted.to("cpu") is fitted and fitted.get_params()["device"] == "cpu"
    np.testing.assert_array_equal(fitted.predict_proba(X), before)
    _simulate(monkeypatch, cuda=False, mps=False)
    with pytest.raises(InvalidInputError, match="cannot use MPS"):
        fitted.to("mps")
    assert fitted.device == "cpu" and fitted.device_ == torch.device("cpu")  # unchanged
    unfitted = _equi(device="auto").to(torch.device("cpu"))
    assert unfitted.device == "cpu" and not hasattr(unfitted, "device_")
    # another device, simulated by torch's "meta" device: the network and every cached tensor move
    monkeypatch.setattr(estimator_module, "resolve_device", lambda device: torch.device("meta"))
    fitted.to("mps")
    assert fitted.device == "mps" and fitted.device_.type == "meta"
    assert {p.device.type for p in fitted.model_.parameters()} == {"meta"}
    assert {t.device.type for c in fitted.strategy_.cached_contexts() for t in c._tensors()} == {"meta"}


# -- 5. TabPFN's fit_mode name -------------------------------------------------------------


def test_fit_preprocessors_is_low_memory():
    X, y = blobs(n=60)
    fitted = _equi(fit_mode="fit_preprocessors").fit(X, y)
    assert not fitted.strategy_.cached_contexts()
    np.testing.assert_array_equal(fitted.predict_proba(X), _equi().fit(X, y).predict_proba(X))


# -- 3. the cache's memory -------------------------------------------------------------------


@pytest.mark.parametrize("classifier_class, checkpoint", [(EquiTabPFNClassifier, EQUI), (TabPFNStarClassifier, STAR)])
@pytest.mark.parametrize("precision, itemsize", [("auto", 4), ("bfloat16", 2), ("float16", 2)])
def test_the_estimate_is_the_cache_built(classifier_class, checkpoint, precision, itemsize):
    X, y = blobs(n=60)
    fitted = classifier_class(checkpoint=checkpoint, device="cpu", n_estimators=2, fit_mode="fit_with_cache",
                              cache_precision=precision).fit(X, y)
    built = sum(context.nbytes() for context in fitted.strategy_.cached_contexts())
    assert fitted.estimate_cache_bytes() == built
    config = fitted.model_.config
    if classifier_class is EquiTabPFNClassifier:  # 2 x layers x rows x (1+K) x d, final tokens, labels
        numbers = (2 * config.n_layers + 1) * 60 * (1 + 3) * config.d_model + 60 * 3
    else:
        numbers = 2 * 2 * config.n_layers * 60 * config.d_model
    assert built == 2 * numbers * itemsize


def test_a_cache_above_the_limit_is_refused_before_it_is_built(monkeypatch):
    X, y = blobs(n=60)
    monkeypatch.setattr(NetworkRunner, "encode", lambda *a, **k: pytest.fail("built"))
    expected = _equi().fit(X, y).estimate_cache_bytes()
    assert expected < 1e8  # a small cache is stated in MB, never "0.00 GB"
    message = (f"would keep about {expected / 1e6:.3g} MB of cached keys and values .* above "
               "cache_memory_limit_gb=0.0001: use fit_mode='low_memory'.*cache_precision='float16'")
    with pytest.raises(InvalidInputError, match=message):
        _equi(fit_mode="fit_with_cache", cache_memory_limit_gb=1e-4).fit(X, y)
    _equi(cache_memory_limit_gb=1e-4).fit(X, y)  # without the cache the limit does not apply


def test_a_half_precision_cache_predicts_like_the_float32_one():
    X, y = blobs(n=60)
    full = _equi(fit_mode="fit_with_cache", n_estimators=1).fit(X, y)
    for precision in ("bfloat16", "float16"):
        half = _equi(fit_mode="fit_with_cache", n_estimators=1, cache_precision=precision).fit(X, y)
        assert {t.dtype for c in half.strategy_.cached_contexts() for t in c._tensors()} == {getattr(torch, precision)}
        np.testing.assert_allclose(half.predict_proba(X), full.predict_proba(X), rtol=0, atol=0.02)
        assert np.abs(half.predict_proba(X) - full.predict_proba(X)).max() > 0


@pytest.mark.parametrize("params, message", [
    ({"cache_precision": "int8"}, r"'cache_precision' parameter of EquiTabPFNClassifier must be a str among "
                                  r"\{'auto', 'float32', 'bfloat16', 'float16'\}. Got 'int8' instead."),
    ({"cache_memory_limit_gb": 0}, r"'cache_memory_limit_gb' parameter .* must be a float in the range \(0.0, inf\) or None"),
    ({"cache_memory_limit_gb": "4GB"}, r"'cache_memory_limit_gb' parameter .* or None. Got '4GB' instead."),
])
def test_bad_cache_parameters(params, message):
    with pytest.raises(InvalidInputError, match=message):
        _equi(**params).fit(*blobs(n=60))


def test_info_names_the_device_auto_picks(monkeypatch):
    from equibench.cli.reporting import info_data

    _simulate(monkeypatch, cuda=False, mps=True)
    assert info_data()["device"] == {"type": "mps", "name": "Apple MPS"}


def test_a_cache_above_the_limit_is_refused_before_any_preprocessing(monkeypatch):
    from equibench.preprocessing import TableEncoder

    X, y = blobs(n=60)
    monkeypatch.setattr(TableEncoder, "fit_transform", lambda *a, **k: pytest.fail("preprocessed before refusing"))
    with pytest.raises(InvalidInputError, match="cache_precision='float16' \\(half the memory\\)"):
        _equi(fit_mode="fit_with_cache", cache_memory_limit_gb=1e-6).fit(X, y)
    with pytest.raises(InvalidInputError, match=r"float16\) and work with .* more while building them, above "
                                                r"cache_memory_limit_gb=1e-06") as caught:
        _equi(fit_mode="fit_with_cache", cache_memory_limit_gb=1e-6, cache_precision="float16").fit(X, y)
    assert "cache_precision='float16'" not in str(caught.value)  # already set: not suggested again


@pytest.mark.parametrize("precision", ["float16", "bfloat16"])
def test_a_low_precision_cache_is_stored_in_its_dtype_as_it_is_built(precision, monkeypatch):
    """Every cached tensor is created in the storage dtype (no full-precision copy cast afterwards)."""
    from equibench.model.inference import Context

    monkeypatch.setattr(Context, "to", lambda *a, **k: pytest.fail("a full-precision cache was cast"))
    X, y = blobs(n=60)
    model = _equi(fit_mode="fit_with_cache", cache_precision=precision).fit(X, y)
    dtypes = {t.dtype for context in model.strategy_.cached_contexts() for t in context._tensors()}
    assert dtypes == {getattr(torch, precision)}
    assert model.estimate_cache_bytes() == sum(context.nbytes() for context in model.strategy_.cached_contexts())
