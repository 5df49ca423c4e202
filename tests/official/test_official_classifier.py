"""The converted official checkpoint in the classifier (``preprocessing="official"``: the
authors' one-member prediction) and as the evaluated method ``equitabpfn-official``."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from equibench import EquiTabPFNClassifier
from equibench.baselines.registry import method_spec
from equibench.baselines.settings import MethodOptions, OfficialEquiTabPFNSettings
from equibench.errors import CheckpointError, InvalidInputError, MethodUnavailableError
from equibench.evaluate.config import method_settings

OfficialEquiTabPFNMethod = method_spec("equitabpfn-official").implementation()  # named by its registry entry


def _official_classifier(checkpoint, **params):
    params = {"n_estimators": 1, "preprocessing": "official", "device": "cpu", **params}
    return EquiTabPFNClassifier(checkpoint=checkpoint, **params)


def test_official_preprocessing_gives_the_official_probabilities(official, converted):
    """mothernet's transformer_predict with one member, on a raw table with NaNs, outliers and a
    column constant on the train rows."""
    X_train, y_train, X_test = official["table/X_train"], official["table/y_train"], official["table/X_test"]
    exact = _official_classifier(converted, inference_precision="float64").fit(X_train, y_train)
    np.testing.assert_allclose(exact.predict_proba(X_test), official["table/proba"], rtol=0, atol=1e-12)
    single = _official_classifier(converted).fit(X_train, y_train)  # float32 on the CPU, as the authors ran it
    np.testing.assert_allclose(single.predict_proba(X_test), official["table/proba"], rtol=0, atol=1e-5)
    assert exact.strategy_.prepared[0][0].x_train.shape == (60, 8)  # the train-constant column dropped


def test_official_checkpoint_with_equibench_preprocessing(official, converted):
    X_train, y_train, X_test = official["table/X_train"], official["table/y_train"], official["table/X_test"]
    proba = EquiTabPFNClassifier(checkpoint=converted, n_estimators=2, device="cpu").fit(X_train, y_train).predict_proba(X_test)
    assert proba.shape == (20, 5) and np.allclose(proba.sum(axis=1), 1)


def test_official_preprocessing_parameters_are_checked(official, converted, tmp_path):
    X_train, y_train = official["table/X_train"], official["table/y_train"]
    with pytest.raises(InvalidInputError, match=r"'preprocessing' parameter of EquiTabPFNClassifier must be a str among \{'equibench', 'official'\}"):
        EquiTabPFNClassifier(checkpoint=converted, preprocessing="tabzilla").fit(X_train, y_train)
    with pytest.raises(InvalidInputError, match="pass n_estimators=1, got 4"):
        _official_classifier(converted, n_estimators=4).fit(X_train, y_train)
    with pytest.raises(InvalidInputError, match="fit_mode='low_memory'"):  # NaNs: the indicator needs the test rows
        _official_classifier(converted, fit_mode="fit_with_cache").fit(X_train, y_train)
    fitted = _official_classifier(converted).fit(X_train, y_train)
    with pytest.raises(InvalidInputError, match="pickle the classifier"):
        fitted.save_fit_state(tmp_path / "state.npz")
    again = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(again.predict_proba(official["table/X_test"]), fitted.predict_proba(official["table/X_test"]))


def test_method_runs_the_official_one_member_path(official, converted):
    settings = OfficialEquiTabPFNMethod.prepare(OfficialEquiTabPFNSettings(checkpoint=str(converted)))
    assert settings.checkpoint_sha256 and settings.fingerprint()["preprocessing"] == "official"
    X_train, y_train, X_test = official["table/X_train"], official["table/y_train"], official["table/X_test"]
    method = OfficialEquiTabPFNMethod(n_classes=5, settings=settings).fit(X_train.astype(np.float32), y_train)
    assert method.predict_proba(X_test.astype(np.float32)).shape == (20, 5)
    assert method.model_.preprocessing == "official" and method.model_.n_estimators == 1
    with pytest.raises(MethodUnavailableError, match="runs with one member"):
        OfficialEquiTabPFNMethod(n_classes=5, settings=settings, n_estimators=4).fit(X_train, y_train)


def test_method_is_skipped_without_the_file_and_refuses_other_checkpoints(tiny_equi_path, tmp_path, monkeypatch):
    X, y = np.random.default_rng(0).normal(size=(20, 3)), np.arange(20) % 2
    monkeypatch.delenv("EQUIBENCH_OFFICIAL_CHECKPOINT", raising=False)
    settings = method_settings("equitabpfn-official", MethodOptions())
    assert settings == OfficialEquiTabPFNSettings()
    with pytest.raises(MethodUnavailableError, match=r"no weights: pass `weights={'equitabpfn-official': 'FILE'}` or "
                                                     "set EQUIBENCH_OFFICIAL_CHECKPOINT"):
        OfficialEquiTabPFNMethod(n_classes=2, settings=settings).fit(X, y)
    monkeypatch.setenv("EQUIBENCH_OFFICIAL_CHECKPOINT", str(tmp_path / "absent.pt"))
    settings = method_settings("equitabpfn-official", MethodOptions())
    with pytest.raises(MethodUnavailableError, match="absent.pt' is not a file"):
        OfficialEquiTabPFNMethod(n_classes=2, settings=settings).fit(X, y)
    with pytest.raises(CheckpointError, match="trained by equibench, not the authors' converted one") as caught:
        OfficialEquiTabPFNMethod.prepare(OfficialEquiTabPFNSettings(checkpoint=str(tiny_equi_path)))
    assert str(caught.value).startswith(f"`weights={{'equitabpfn-official': {str(tiny_equi_path)!r}}}` holds")


def test_methods_lists_it_with_its_weights_option():
    from typer.testing import CliRunner

    from equibench.cli import app

    methods = json.loads(CliRunner().invoke(app, ["methods", "--json"]).stdout)
    row = next(row for row in methods if row["method"] == "equitabpfn-official")
    assert row["needs_weights"] and row["weights_option"] == "--weights equitabpfn-official=FILE"
    assert row["weights_env"] == "EQUIBENCH_OFFICIAL_CHECKPOINT"
