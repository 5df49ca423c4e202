"""The typed method settings: variants derived from them, defaults written once, typed changes."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path

import pytest

from equibench import EquiTabPFNClassifier
from equibench.baselines.knn import KNNMethod
from equibench.baselines.mlp import MLPMethod
from equibench.baselines.registry import check_weights, method_spec, weights_methods
from equibench.baselines.settings import (
    EnsembleSettings,
    ExternalTabPFNSettings,
    KNNSettings,
    MethodOptions,
    MLPSettings,
    PFNSettings,
    Settings,
    TabPFNv1Settings,
    TabPFNv2Settings,
    ensemble_size,
)
from equibench.classifier.context_rules import MAX_TRAIN_ROWS
from equibench.errors import InvalidInputError
from equibench.evaluate import EvaluateConfig


def test_the_variant_is_derived_from_the_settings():
    assert EnsembleSettings(n_estimators=4).variant == "n4"
    assert PFNSettings(n_estimators=16, checkpoint="x.pt").variant == "n16"
    assert KNNSettings().variant == Settings().variant == "default"
    sizes = [settings.n_estimators for settings in PFNSettings().variants((1, 4, 16))]
    assert sizes == [1, 4, 16] and all(isinstance(size, int) for size in sizes)
    assert KNNSettings().variants((1, 4)) == [KNNSettings()]


@pytest.mark.parametrize("size", [1, 2, 4, 10, 128])
def test_a_stored_variant_gives_back_its_ensemble_size(size):
    assert ensemble_size(EnsembleSettings(n_estimators=size).variant) == size


@pytest.mark.parametrize("variant", ["default", "n", "nx", "4", "n-1", "m4"])
def test_other_variants_name_no_ensemble_size(variant):
    assert ensemble_size(variant) is None


def test_the_options_give_each_method_its_settings(monkeypatch):
    monkeypatch.setenv("EQUIBENCH_TABPFN_WEIGHTS", "/weights")
    options = MethodOptions(weights={"equitabpfn": "e.pt", "tabpfn-star": "s.pt", "tabpfn-v2": "/v2"}, max_train_rows=50,
                            device="cuda")

    def settings(name: str) -> Settings:
        spec = method_spec(name)
        return spec.settings.from_options(options, spec.given_weights(options))

    assert settings("equitabpfn") == PFNSettings(checkpoint="e.pt", max_train_rows=50, device="cuda")
    assert settings("tabpfn-star") == PFNSettings(checkpoint="s.pt", max_train_rows=50, device="cuda")
    # TabPFN v1 and v2 take their own folders; the environment variable gives both theirs
    assert settings("tabpfn-v1") == TabPFNv1Settings(tabpfn_weights="/weights", device="cuda")
    assert settings("tabpfn-v2") == TabPFNv2Settings(tabpfn_weights="/v2", device="cuda")
    assert settings("knn") == KNNSettings()  # the run options change no baseline
    assert PFNSettings.from_options(MethodOptions()).checkpoint == "default"


def test_each_method_is_named_once_in_the_registry():
    """EquiTabPFN and TabPFN* share their settings class; each method's class takes its name
    from its registry entry."""
    assert method_spec("equitabpfn").settings is method_spec("tabpfn-star").settings is PFNSettings
    assert [method_spec(name).implementation().name for name in ("equitabpfn", "tabpfn-star", "tabpfn")] == [
        "equitabpfn", "tabpfn-star", "tabpfn"]


def test_weights_fall_back_to_each_methods_environment_variable(monkeypatch):
    for name in ("EQUIBENCH_TABPFN_WEIGHTS", "EQUIBENCH_TABPFN_CHECKPOINT", "EQUIBENCH_TABICL_CHECKPOINT",
                 "EQUIBENCH_OFFICIAL_CHECKPOINT"):
        monkeypatch.delenv(name, raising=False)
    declared = [method_spec(name) for name in weights_methods()]
    assert all(spec.given_weights(MethodOptions()) is None for spec in declared)
    monkeypatch.setenv("EQUIBENCH_TABICL_CHECKPOINT", "/env.ckpt")
    monkeypatch.setenv("EQUIBENCH_OFFICIAL_CHECKPOINT", "")  # set but empty: none
    options = MethodOptions(weights={"tabpfn-v1": Path("/v1")})
    assert options.weights == {"tabpfn-v1": "/v1"}  # paths kept as strings
    assert [spec.given_weights(options) for spec in declared] == [None, None, None, None, None, "/v1", None, None, "/env.ckpt"]
    assert method_spec("tabicl").given_weights(MethodOptions(weights={"tabicl": "/given.ckpt"})) == "/given.ckpt"


def test_the_context_cap_is_written_once():
    assert MethodOptions().max_train_rows == PFNSettings().max_train_rows == MAX_TRAIN_ROWS
    assert EvaluateConfig(suite="demo").max_train_rows == MAX_TRAIN_ROWS
    assert inspect.signature(EquiTabPFNClassifier).parameters["max_train_rows"].default == MAX_TRAIN_ROWS


@pytest.mark.parametrize("changes, message", [
    ({"ensembles": ()}, "ensemble sizes must be positive"),
    ({"ensembles": (1, 0)}, "ensemble sizes must be positive"),
    ({"max_train_rows": 0}, "`max_train_rows` must be positive"),
    ({"weights": {"tabicl": 3}}, "`weights` must map method names to paths"),
    ({"weights": ["tabicl=x"]}, "`weights` must map method names to paths"),
])
def test_bad_options_are_refused(changes, message):
    with pytest.raises(InvalidInputError, match=message):
        MethodOptions(**changes)


def test_a_method_takes_its_registered_settings_and_typed_changes():
    assert KNNMethod(3).settings == KNNSettings()
    mlp = MLPMethod(3, seed=1, lr=0.01)
    assert mlp.settings == MLPSettings(lr=0.01) and mlp.settings.hidden == (30, 30, 30)
    assert MLPMethod(3, settings=MLPSettings(max_epochs=2), patience=1).settings == MLPSettings(max_epochs=2, patience=1)
    with pytest.raises(TypeError):
        MLPMethod(3, pretrain_max_epochs=2)  # VIME's, not the MLP's
    with pytest.raises(dataclasses.FrozenInstanceError):
        mlp.settings.lr = 1.0


def test_the_settings_module_stays_light():
    assert "numpy" not in {name.split(".")[0] for name in _imported_by("equibench.baselines.settings")}


def _imported_by(module: str) -> set[str]:
    import subprocess

    code = f"import sys; before = set(sys.modules); import {module}; print(' '.join(set(sys.modules) - before))"
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd="/")
    assert ran.returncode == 0, ran.stderr
    return set(ran.stdout.split())


def test_the_work_of_a_fit_grows_with_members_up_to_the_context_cap():
    assert KNNSettings().work(5000) == 5000
    assert ExternalTabPFNSettings(n_estimators=2).work(5000) == 10000
    assert PFNSettings(n_estimators=4).work(5000) == 4 * MAX_TRAIN_ROWS and PFNSettings().work(100) == 100


@pytest.mark.parametrize("weights, message", [
    ({"knn": "x"}, "`weights`: 'knn' takes no weights; the methods that take weights: equitabpfn, tabpfn-star, "),
    ({"nope": "x"}, "`weights`: 'nope' is not a method; the methods that take weights: equitabpfn, "),
])
def test_weights_for_a_method_that_takes_none_are_refused_by_the_runs(weights, message):
    with pytest.raises(InvalidInputError, match=message):
        check_weights(weights)
    with pytest.raises(InvalidInputError, match=message):
        EvaluateConfig(suite="demo", weights=weights)
