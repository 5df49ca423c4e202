"""The registry: every entry's implementation, settings and requirement; unknown names."""

from __future__ import annotations

import sys

import pytest

from equibench.baselines.base import optional_import
from equibench.baselines.registry import FAST_METHODS, METHODS, method_spec, weights_methods
from equibench.baselines.settings import EnsembleSettings
from equibench.errors import InvalidInputError, MissingDependencyError


@pytest.mark.parametrize("name", list(METHODS))
def test_each_entry_reaches_its_implementation(name):
    spec = METHODS[name]
    implementation = spec.implementation()
    assert implementation.name == name == spec.name
    assert isinstance(implementation(3).settings, spec.settings)
    assert spec.ensembles == issubclass(spec.settings, EnsembleSettings)


def test_ensemble_methods_and_weights():
    assert [name for name, spec in METHODS.items() if spec.ensembles] == [
        "equitabpfn", "tabpfn-star", "equitabpfn-ft", "tabpfn-star-ft", "equitabpfn-official", "tabpfn-v1", "tabpfn-v2",
        "tabpfn", "tabicl"]
    assert [name for name, spec in METHODS.items() if spec.needs_weights] == [
        "equitabpfn-official", "tabpfn-v1", "tabpfn-v2", "tabpfn", "tabicl"]
    # those also take them from an environment variable; the PFNs' default to the packaged checkpoints
    assert weights_methods() == ["equitabpfn", "tabpfn-star", "equitabpfn-ft", "tabpfn-star-ft", "equitabpfn-official",
                                 "tabpfn-v1", "tabpfn-v2", "tabpfn", "tabicl"]
    assert {name: METHODS[name].weights.env for name in weights_methods()} == {
        "equitabpfn": None, "tabpfn-star": None, "equitabpfn-ft": None, "tabpfn-star-ft": None,
        "equitabpfn-official": "EQUIBENCH_OFFICIAL_CHECKPOINT",
        "tabpfn-v1": "EQUIBENCH_TABPFN_WEIGHTS", "tabpfn-v2": "EQUIBENCH_TABPFN_WEIGHTS",
        "tabpfn": "EQUIBENCH_TABPFN_CHECKPOINT", "tabicl": "EQUIBENCH_TABICL_CHECKPOINT"}
    assert set(FAST_METHODS) <= set(METHODS)


def test_an_unknown_method_names_the_known_ones():
    with pytest.raises(InvalidInputError, match="unknown method 'nope'; choose from equitabpfn, tabpfn-star"):
        method_spec("nope")


def test_a_missing_optional_package_names_its_pip_requirement(monkeypatch):
    monkeypatch.setitem(sys.modules, "xgboost", None)  # makes `import xgboost` fail
    with pytest.raises(MissingDependencyError, match="'xgboost' needs the Python package 'xgboost'") as info:
        with optional_import("xgboost", method_spec("xgboost").requires):
            import xgboost  # noqa: F401
    assert info.value.hint == 'pip install "xgboost-cpu"'


def test_methods_checks_the_version_of_a_pinned_package_not_only_the_module(monkeypatch):
    """tabpfn 9 imports as `tabpfn` but runs only TabPFN v2: v1 (tabpfn<2) is not ready."""
    import importlib.util
    from importlib import metadata

    from equibench.cli.evaluation import methods_data

    real_find_spec, real_version = importlib.util.find_spec, metadata.version
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "tabpfn" else real_find_spec(name, *a))
    monkeypatch.setattr(metadata, "version", lambda name: "9.2.0" if name == "tabpfn" else real_version(name))
    monkeypatch.setenv("EQUIBENCH_TABPFN_WEIGHTS", "/weights")  # weights given: only the package decides
    rows = {row["method"]: row for row in methods_data()}
    assert not rows["tabpfn-v1"]["ready"] and rows["tabpfn-v1"]["install"] == 'pip install "tabpfn<2"'
    assert rows["tabpfn-v2"]["ready"]
    monkeypatch.setattr(metadata, "version", lambda name: "1.0.0" if name == "tabpfn" else real_version(name))
    rows = {row["method"]: row for row in methods_data()}
    assert rows["tabpfn-v1"]["ready"] and not rows["tabpfn-v2"]["ready"]


def test_each_method_declares_the_settings_its_registry_entry_names():
    """The registry's settings class is the one the method's ``settings`` annotation declares,
    so a method built without settings gets the registry's defaults and declarations."""
    for name, spec in METHODS.items():
        assert spec.implementation().settings_class() is spec.settings, name


def test_methods_says_a_method_without_its_weights_is_not_ready(monkeypatch):
    """Its cells would be skipped: `methods` says what it needs, not "ready"."""
    from typer.testing import CliRunner

    from equibench.cli import app
    from equibench.cli.evaluation import methods_data

    monkeypatch.delenv("EQUIBENCH_TABICL_CHECKPOINT", raising=False)
    assert not {row["method"]: row for row in methods_data()}["tabicl"]["ready"]
    line = next(line for line in CliRunner().invoke(app, ["methods"], terminal_width=250).stdout.splitlines()
                if " tabicl " in line)
    assert "needs --weights tabicl=FILE (or $EQUIBENCH_TABICL_CHECKPOINT): its cells are skipped" in line
    monkeypatch.setenv("EQUIBENCH_TABICL_CHECKPOINT", "/my.ckpt")
    assert {row["method"]: row for row in methods_data()}["tabicl"]["ready"]
    line = next(line for line in CliRunner().invoke(app, ["methods"], terminal_width=250).stdout.splitlines()
                if " tabicl " in line)
    assert "ready, weights from $EQUIBENCH_TABICL_CHECKPOINT" in line
