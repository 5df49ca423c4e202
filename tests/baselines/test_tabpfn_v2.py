"""TabPFN v2 through the tabpfn package (>=2; written against 9.2), on a tiny randomly
initialised v2 network saved in the package's own checkpoint format (the released weights are
never downloaded, and no test may reach the network): deterministic fits, more than 10 classes
through ECOC, an evaluate cell end to end with its provenance, and skipped cells without weights."""

from __future__ import annotations

import json
import socket
from importlib import metadata

import numpy as np
import pytest
import torch

from equibench.baselines.registry import method_spec
from equibench.baselines.settings import MethodOptions
from equibench.classifier.ecoc import ECOCClassifier
from equibench.errors import MethodUnavailableError
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.config import method_settings

pytest.importorskip("tabpfn", minversion="2", reason="tabpfn>=2 is not installed (the tabpfn-v2 method needs it)")
# torch's custom-op registration inspects every loaded module, and tabpfn's deprecated alias
# module tabpfn.model.loading warns when read: noise of the two packages, not of equibench
pytestmark = pytest.mark.filterwarnings("ignore:Importing from 'tabpfn.model.loading' is deprecated:DeprecationWarning")

#: A one-layer v2 network (the released one: emsize 192, 12 layers, 6 heads) with the 10
#: outputs of every v2 classifier; tabpfn reads a checkpoint without "architecture_name" as v2.
TINY_CONFIG = dict(max_num_classes=10, emsize=8, nlayers=1, nhead=2, features_per_group=2)
#: The name `_v2_weights` looks for (DIR/tabpfn-v2-classifier*.ckpt).
CHECKPOINT = "tabpfn-v2-classifier-tiny.ckpt"


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any download attempt (model hub, license check) fails the test instead of going out."""
    def refuse(*args, **kwargs):
        raise OSError("network access is disabled in the tabpfn-v2 tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module")
def weights_dir(tmp_path_factory):
    """A weights folder holding a tiny random v2 classifier as tabpfn stores one: a dict of the
    architecture ``config`` and the network's ``state_dict``, built by the package's own
    parse_config/get_architecture (what its loader calls)."""
    from tabpfn.architectures import tabpfn_v2

    torch.manual_seed(0)
    network = tabpfn_v2.get_architecture(tabpfn_v2.parse_config(TINY_CONFIG)[0])
    with torch.no_grad():
        # v2 zero-initialises the attention and MLP outputs: at init every test row would
        # predict the same, so draw all weights at random
        for parameter in network.parameters():
            parameter.normal_(0.0, 0.3)
    folder = tmp_path_factory.mktemp("tabpfn-weights")
    torch.save({"config": TINY_CONFIG, "state_dict": network.state_dict()}, folder / CHECKPOINT)
    return folder


def _method(weights, n_classes: int, seed: int = 0, n_estimators: int = 1):
    """The registry's tabpfn-v2 method with the weights folder ``weights``."""
    spec = method_spec("tabpfn-v2")
    options = MethodOptions(weights={"tabpfn-v2": str(weights)})
    settings = method_settings("tabpfn-v2", options)
    return spec.implementation()(n_classes, seed, settings, n_estimators=n_estimators)


def _data(n_classes: int, rows: int = 90):
    """X_train (60, 5), y_train (60,) with every class, X_test (30, 5)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 5)).astype(np.float32)
    y = np.arange(rows) % n_classes
    return X[:60], y[:60], X[60:]


def _iris(tmp_path, **options) -> EvaluateConfig:
    """Fold 0 of demo-iris only (a suite file), TabPFN v2 alone."""
    suite = tmp_path / "iris.toml"
    suite.write_text('tasks = ["demo-iris"]\n')
    return EvaluateConfig(suite=str(suite), methods=("tabpfn-v2",), folds=(0,), **options)


def test_the_tiny_weights_fit_deterministically_with_provenance(weights_dir):
    X, y, X_test = _data(7)
    method = _method(weights_dir, 7, n_estimators=2).fit(X, y)
    proba = method.predict_proba(X_test)  # (30, 7)
    assert proba.shape == (30, 7) and np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1)
    assert np.ptp(proba, axis=0).max() > 1e-3  # the rows' features reach the prediction
    # the package's own classifier, built with the run's settings
    network = method.model_
    assert type(network).__module__.startswith("tabpfn.") and type(network).__name__ == "TabPFNClassifier"
    assert (network.model_path, network.n_estimators, network.random_state, network.device) == (
        str(weights_dir / CHECKPOINT), 2, 0, "cpu")
    assert np.array_equal(_method(weights_dir, 7, n_estimators=2).fit(X, y).predict_proba(X_test), proba)
    assert not np.allclose(_method(weights_dir, 7, seed=1, n_estimators=2).fit(X, y).predict_proba(X_test), proba)
    assert method.provenance() == {"package": f"tabpfn {metadata.version('tabpfn')}", "checkpoint": CHECKPOINT}


def test_more_than_ten_classes_go_through_ecoc_of_single_members(weights_dir):
    X, y, X_test = _data(12)
    method = _method(weights_dir, 12).fit(X, y)
    proba = method.predict_proba(X_test)  # (30, 12)
    assert proba.shape == (30, 12) and np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1)
    assert isinstance(method.model_, ECOCClassifier) and len(method.model_.estimators_) >= 2
    for member in method.model_.estimators_:  # each sees at most 10 symbols, with one ensemble member
        assert len(member.classes_) <= 10 and member.n_estimators == 1


def test_an_evaluate_cell_runs_end_to_end_and_records_the_package_and_weights(weights_dir, tmp_path):
    summary = evaluate(_iris(tmp_path, weights={"tabpfn-v2": str(weights_dir)}), tmp_path / "out", progress=False)
    assert summary.counts == {"ok": 1}
    cell = json.loads(next((tmp_path / "out" / "cells").glob("*.json")).read_text())
    assert (cell["method"], cell["variant"], cell["n_classes"]) == ("tabpfn-v2", "n1", 3)
    assert cell["package"] == f"tabpfn {metadata.version('tabpfn')}" and cell["checkpoint"] == CHECKPOINT
    assert 0 <= cell["accuracy"] <= 1 and np.isfinite(cell["log_loss"])
    recorded = json.loads((tmp_path / "out" / "manifest.json").read_text())["settings"]["methods"]["tabpfn-v2"]
    assert recorded["tabpfn_weights"] == str(weights_dir)


def test_without_weights_its_cells_are_skipped_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    summary = evaluate(_iris(tmp_path), tmp_path / "out", progress=False)
    assert summary.counts == {"skipped": 1}
    (reason,) = {json.loads(path.read_text())["reason"] for path in (tmp_path / "out" / "cells").glob("*.json")}
    assert reason == method_spec("tabpfn-v2").settings.no_weights("tabpfn-v2")  # what to pass, not a download or a failure
    assert reason.startswith("no weights: ") and "tabpfn-v2" in reason
    empty = tmp_path / "empty"  # a folder without a tabpfn-v2-classifier*.ckpt
    empty.mkdir()
    with pytest.raises(MethodUnavailableError, match="no weights: tabpfn-v2 weights not found under .*empty"):
        _method(empty, 3).fit(*_data(3)[:2])


def test_tabpfn_v1_is_refused_with_the_pip_hint_under_tabpfn_2_or_later(tmp_path):
    """v1 weights present, but this tabpfn cannot run them: a skip naming `tabpfn<2`, not a load."""
    (tmp_path / "models_diff").mkdir()
    (tmp_path / "models_diff" / "prior_diff_real_checkpoint_n_0_epoch_42.cpkt").write_bytes(b"v1 weights")
    spec = method_spec("tabpfn-v1")
    method = spec.implementation()(3, 0, spec.settings.from_options(MethodOptions(), str(tmp_path)))
    with pytest.raises(MethodUnavailableError, match=r"tabpfn-v1 needs 'tabpfn<2' but tabpfn \S+ is installed"):
        method.fit(*_data(3)[:2])
