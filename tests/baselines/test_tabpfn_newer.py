"""The `tabpfn` method on the newer classifier checkpoints of the tabpfn package (>=2; written
against 9.2: v2.5, v2.6, v3, v3.5), each a tiny randomly initialised network saved in the
format that version is released in (the released weights are never downloaded, and no test
may reach the network): deterministic fits, more than 10 classes through ECOC, and an evaluate
cell end to end recording the version. A version the installed tabpfn lacks is skipped."""

from __future__ import annotations

import dataclasses
import json
import socket
from importlib import metadata

import numpy as np
import pytest
import torch

from equibench.baselines.registry import method_spec
from equibench.baselines.settings import MethodOptions
from equibench.classifier.ecoc import ECOCClassifier
from equibench.errors import InvalidInputError, MethodUnavailableError
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.config import method_settings

pytest.importorskip("tabpfn", minversion="2", reason="tabpfn>=2 is not installed (the tabpfn method needs it)")
pytestmark = pytest.mark.filterwarnings("ignore:Importing from 'tabpfn.model.loading' is deprecated:DeprecationWarning")

#: One-layer networks with the 10 outputs of the released classifiers.
_V2_FAMILY = dict(max_num_classes=10, emsize=8, nlayers=1, nhead=2, features_per_group=2)
_V3_FAMILY = dict(max_num_classes=10, embed_dim=8, nlayers=1, dist_embed_num_blocks=1, dist_embed_num_heads=2,
                  dist_embed_num_inducing_points=4, feat_agg_num_blocks=1, feat_agg_num_heads=2, icl_num_heads=2,
                  decoder_head_dim=4, decoder_num_heads=2, softmax_scaling_mlp_hidden_dim=4)
#: version -> (architecture module, architecture_name stored, config, file name as released). v2.5
#: was released naming its architecture "base" and without an inference config; from v2.6 the
#: checkpoint stores both; v3.5 (one multitask checkpoint, also a regression head) as safetensors.
FORMATS = {
    "v2.5": ("tabpfn_v2_5", "base", _V2_FAMILY, "tabpfn-v2.5-classifier-v2.5_tiny.ckpt"),
    "v2.6": ("tabpfn_v2_6", "tabpfn_v2_6", _V2_FAMILY, "tabpfn-v2.6-classifier-v2.6_tiny.ckpt"),
    "v3": ("tabpfn_v3", "tabpfn_v3", _V3_FAMILY, "tabpfn-v3-classifier-v3_tiny.ckpt"),
    "v3.5": ("tabpfn_v3_5", "tabpfn_v3_5", {**_V3_FAMILY, "num_buckets": 8}, "tabpfn-v3.5-tiny.safetensors"),
}


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any download attempt (model hub, license check) fails the test instead of going out."""
    def refuse(*args, **kwargs):
        raise OSError("network access is disabled in the tabpfn tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture(scope="module", params=list(FORMATS))
def checkpoint(request, tmp_path_factory):
    """(version, file): a tiny random classifier of that version as tabpfn stores one, built by
    the package's own parse_config/get_architecture (what its loader calls)."""
    from tabpfn.architectures import ARCHITECTURES
    from tabpfn.checkpoint import save_as_safetensors
    from tabpfn.constants import ModelVersion
    from tabpfn.inference_config import InferenceConfig

    version = request.param
    module, architecture_name, config, name = FORMATS[version]
    if module not in ARCHITECTURES:
        pytest.skip(f"tabpfn {metadata.version('tabpfn')} does not read {version} checkpoints")
    architecture = ARCHITECTURES[module]
    torch.manual_seed(0)
    network = architecture.get_architecture(architecture.parse_config(config)[0])
    with torch.no_grad():  # zero-initialised outputs would predict the same for every row
        for parameter in network.parameters():
            parameter.normal_(0.0, 0.3)
    stored = {"config": config, "state_dict": network.state_dict(), "architecture_name": architecture_name}
    if version != "v2.5":
        stored["inference_config"] = dataclasses.asdict(InferenceConfig.get_default("multiclass", ModelVersion.V2_5))
    path = tmp_path_factory.mktemp(f"tabpfn-{version}") / name
    if path.suffix == ".safetensors":
        save_as_safetensors(stored, path)
    else:
        torch.save(stored, path)
    return version, path


def _method(path, n_classes: int, seed: int = 0, n_estimators: int = 1):
    """The registry's tabpfn method with the checkpoint file ``path`` (None: without one)."""
    spec = method_spec("tabpfn")
    options = MethodOptions(weights={} if path is None else {"tabpfn": str(path)})
    settings = method_settings("tabpfn", options)
    return spec.implementation()(n_classes, seed, settings, n_estimators=n_estimators)


def _data(n_classes: int, rows: int = 90):
    """X_train (60, 5), y_train (60,) with every class, X_test (30, 5)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 5)).astype(np.float32)
    y = np.arange(rows) % n_classes
    return X[:60], y[:60], X[60:]


def test_each_version_fits_deterministically_with_its_version_recorded(checkpoint):
    version, path = checkpoint
    X, y, X_test = _data(7)
    method = _method(path, 7, n_estimators=2).fit(X, y)
    proba = method.predict_proba(X_test)  # (30, 7)
    assert proba.shape == (30, 7) and np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1)
    assert np.ptp(proba, axis=0).max() > 1e-4  # the rows' features reach the prediction
    assert (method.model_.model_path, method.model_.n_estimators) == (str(path), 2)
    assert np.array_equal(_method(path, 7, n_estimators=2).fit(X, y).predict_proba(X_test), proba)
    assert method.provenance() == {"package": f"tabpfn {metadata.version('tabpfn')}", "checkpoint": path.name,
                                   "tabpfn_version": version}


def test_more_than_ten_classes_go_through_ecoc_and_keep_the_version(checkpoint):
    version, path = checkpoint
    X, y, X_test = _data(12)
    method = _method(path, 12).fit(X, y)
    proba = method.predict_proba(X_test)  # (30, 12)
    assert proba.shape == (30, 12) and np.isfinite(proba).all() and np.allclose(proba.sum(axis=1), 1)
    assert isinstance(method.model_, ECOCClassifier) and len(method.model_.estimators_) >= 2
    assert method.provenance()["tabpfn_version"] == version


def test_an_evaluate_cell_runs_end_to_end_and_records_the_version(checkpoint, tmp_path):
    version, path = checkpoint
    suite = tmp_path / "iris.toml"
    suite.write_text('tasks = ["demo-iris"]\n')
    config = EvaluateConfig(suite=str(suite), methods=("tabpfn",), folds=(0,), weights={"tabpfn": str(path)})
    summary = evaluate(config, tmp_path / "out", progress=False)
    assert summary.counts == {"ok": 1}
    cell = json.loads(next((tmp_path / "out" / "cells").glob("*.json")).read_text())
    assert (cell["method"], cell["variant"], cell["n_classes"]) == ("tabpfn", "n1", 3)
    assert (cell["package"], cell["checkpoint"], cell["tabpfn_version"]) == (
        f"tabpfn {metadata.version('tabpfn')}", path.name, version)
    assert 0 <= cell["accuracy"] <= 1 and np.isfinite(cell["log_loss"])
    recorded = json.loads((tmp_path / "out" / "manifest.json").read_text())["settings"]["methods"]["tabpfn"]
    assert recorded["tabpfn_weights"] == str(path)


def test_without_a_checkpoint_the_cells_are_skipped_and_a_folder_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_CHECKPOINT", raising=False)
    with pytest.raises(MethodUnavailableError, match="^no weights: pass `weights={'tabpfn': 'FILE'}` or set "
                                                     "EQUIBENCH_TABPFN_CHECKPOINT: a TabPFN classifier checkpoint"):
        _method(None, 3).fit(*_data(3)[:2])
    with pytest.raises(InvalidInputError, match=r"weights=\{'tabpfn': .*\}: a folder, not a file; give a TabPFN"):
        EvaluateConfig(suite="demo", methods=("tabpfn",), weights={"tabpfn": str(tmp_path)})
