"""TabICL through the tabicl package, on a tiny randomly initialised network saved in the
package's own checkpoint format (the released weights are never downloaded): many classes
through its hierarchy, the cell's provenance, and skipped cells without a checkpoint."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import torch

from equibench.baselines.registry import method_spec
from equibench.baselines.settings import MethodOptions, TabICLSettings
from equibench.errors import CheckpointError, MethodUnavailableError
from equibench.evaluate import EvaluateConfig, evaluate

DATA = Path(__file__).parents[1] / "data"

#: A network with 4 output classes: more classes go through TabICL's hierarchy.
TINY_CONFIG = dict(max_classes=4, embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=8, row_num_blocks=1,
                   row_nhead=2, row_num_cls=2, icl_num_blocks=1, icl_nhead=2)


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    pytest.importorskip("tabicl")
    from tabicl._model.tabicl import TabICL

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("tabicl") / "tiny-tabicl.ckpt"
    torch.save({"config": TINY_CONFIG, "state_dict": TabICL(**TINY_CONFIG).state_dict()}, path)
    return path


def _iris(tmp_path, **options) -> EvaluateConfig:
    """Fold 0 of demo-iris only (a suite file), TabICL alone."""
    suite = tmp_path / "iris.toml"
    suite.write_text('tasks = ["demo-iris"]\n')
    return EvaluateConfig(suite=str(suite), methods=("tabicl",), folds=(0,), **options)


def _method(checkpoint, n_classes: int, seed: int = 0):
    implementation = method_spec("tabicl").implementation()
    settings = implementation.prepare(TabICLSettings.from_options(MethodOptions(), str(checkpoint)))
    return implementation(n_classes, seed, settings)


def _data(n_classes: int, rows: int = 90):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(rows, 5)).astype(np.float32)
    y = np.arange(rows) % n_classes
    return X[:60], y[:60], X[60:]


def test_many_classes_natively_deterministic_with_provenance(tiny_checkpoint):
    X, y, X_test = _data(7)
    proba = _method(tiny_checkpoint, 7).fit(X, y).predict_proba(X_test)
    assert proba.shape == (30, 7) and np.allclose(proba.sum(axis=1), 1) and np.isfinite(proba).all()
    method = _method(tiny_checkpoint, 7).fit(X, y)
    assert np.array_equal(method.predict_proba(X_test), proba)
    version = metadata.version("tabicl")
    digest = hashlib.sha256(tiny_checkpoint.read_bytes()).hexdigest()
    assert method.provenance() == {"package": f"tabicl {version}",
                                   "checkpoint": f"tiny-tabicl.ckpt (sha256 {digest})"}
    fingerprint = method.settings.fingerprint()
    assert fingerprint["checkpoint_sha256"] == digest and fingerprint["tabicl_version"] == version


def test_a_cell_records_the_package_and_checkpoint(tiny_checkpoint, tmp_path):
    summary = evaluate(_iris(tmp_path, weights={"tabicl": str(tiny_checkpoint)}), tmp_path / "out", progress=False)
    assert summary.counts == {"ok": 1}
    cell = json.loads(next((tmp_path / "out" / "cells").glob("*.json")).read_text())
    assert cell["package"].startswith("tabicl ") and cell["checkpoint"].startswith("tiny-tabicl.ckpt (sha256 ")
    recorded = json.loads((tmp_path / "out" / "manifest.json").read_text())["settings"]["methods"]["tabicl"]
    assert recorded["tabicl_checkpoint"] == str(tiny_checkpoint.resolve())


def test_without_a_checkpoint_its_cells_are_skipped_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABICL_CHECKPOINT", raising=False)
    summary = evaluate(_iris(tmp_path), tmp_path / "out", progress=False)
    assert summary.counts == {"skipped": 1}
    reasons = {json.loads(path.read_text())["reason"] for path in (tmp_path / "out" / "cells").glob("*.json")}
    assert reasons == {"no weights: pass `weights={'tabicl': 'FILE'}` or set EQUIBENCH_TABICL_CHECKPOINT: a TabICL checkpoint "
                       "file in the tabicl package's format (e.g. tabicl-classifier-v2-20260212.ckpt), never downloaded"}
    missing = tmp_path / "nowhere.ckpt"
    monkeypatch.setenv("EQUIBENCH_TABICL_CHECKPOINT", str(missing))
    with pytest.raises(MethodUnavailableError, match="not a file"):
        _method(missing, 3).fit(*_data(3)[:2])


def test_a_one_class_fold_without_a_checkpoint_is_skipped_not_ok(monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABICL_CHECKPOINT", raising=False)
    implementation = method_spec("tabicl").implementation()
    method = implementation(3, 0, TabICLSettings()).fit(np.zeros((4, 2), np.float32), np.zeros(4, int))
    with pytest.raises(MethodUnavailableError, match="no weights"):
        method.provenance()


@pytest.mark.parametrize("content, found", [
    (b"not a checkpoint at all", "does not read as torch weights"),
    ({"model": {}}, "holds ['model'], not `config` and `state_dict`"),
])
def test_a_file_that_is_no_tabicl_checkpoint_is_refused_before_any_cell(content, found, tmp_path):
    path = tmp_path / "other.ckpt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(CheckpointError, match=f"weights=.'tabicl': .* is not a TabICL checkpoint: it {re.escape(found)}") \
            as caught:
        evaluate(_iris(tmp_path, weights={"tabicl": str(path)}), tmp_path / "out", progress=False)
    assert "weights_only" not in str(caught.value) and not (tmp_path / "out").exists()


def test_the_cli_names_the_flag_of_a_file_that_is_no_tabicl_checkpoint(tmp_path):
    from typer.testing import CliRunner

    from equibench.cli import app

    (tmp_path / "other.ckpt").write_bytes(b"not a checkpoint")
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--out",
                                      str(tmp_path / "out"), "--weights", f"tabicl={tmp_path / 'other.ckpt'}"])
    assert result.exit_code == 2 and result.stderr.startswith(f"error: --weights tabicl={tmp_path / 'other.ckpt'} is ")
    assert "is not a TabICL checkpoint" in result.stderr and "weights_only" not in result.stderr


@pytest.mark.parametrize("make, found", [
    (lambda path: path.write_text("TabICL weights: download them from the authors' page\n"),
     "does not read as torch weights (a file of 53 bytes in another format)"),
    (lambda path: path.write_bytes(b"PK\x03"), "does not read as torch weights (a file of 3 bytes in another format)"),
    (lambda path: shutil.copy(DATA / "tiny-equitabpfn.pt", path),
     "is an equibench equitabpfn checkpoint; evaluate it as --weights equitabpfn={path}, and give TabICL a file"),
    (lambda path: torch.save({"config": {"d_model": 8}, "state_dict": {"encoder.weight": torch.zeros(1)}}, path),
     "holds another network (its `state_dict` is not a TabICL network's"),
])
def test_a_text_file_a_3_byte_file_or_another_network_is_refused_in_one_line_before_any_cell(make, found, tmp_path):
    """Where torch's loader raised KeyError or IndexError, and an EquiTabPFN checkpoint failed
    every cell with a TypeError: one line naming the file and what a TabICL checkpoint is."""
    from typer.testing import CliRunner

    from equibench.cli import app

    path = tmp_path / "tabicl.ckpt"
    make(path)
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "tabicl", "--folds", "0", "--out",
                                      str(tmp_path / "out"), "--weights", f"tabicl={path}"])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.output
    assert result.stderr.startswith(f"error: --weights tabicl={path} is not a TabICL checkpoint: it "
                                    f"{found.format(path=path)}")
    assert "tabicl package's format" in result.stderr and not (tmp_path / "out").exists()
