"""`equibench equivariance` of PFN methods run with the user's weights (issue 64, item 19): each
through its own classifier, one member, on tiny random networks. A non-equivariant network
flips predictions when the classes are permuted, EquiTabPFN does not. The official EquiTabPFN
(converted from a tiny EquiTabPFN) needs no extra package; TabPFN v2 and TabICL skip without
theirs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest
import torch
from typer.testing import CliRunner

from equibench.baselines.settings import MethodOptions, Requirement
from equibench.cli import app
from equibench.equivariance import EquivarianceConfig, measure_equivariance
from equibench.model import load_checkpoint
from equibench.model.checkpoint import build_model, save_checkpoint
from equibench.model.config import RELEASED_NETWORK

DATA = Path(__file__).parents[1] / "data"
TINY_EQUI, TINY_STAR = DATA / "tiny-equitabpfn.pt", DATA / "tiny-tabpfn-star.pt"
SMALL = ["--classes", "3,5", "--ensembles", "1,2", "--datasets", "3", "--rows", "64", "--no-toy", "--no-progress"]


@pytest.fixture(scope="module")
def official(tmp_path_factory) -> Path:
    """The tiny EquiTabPFN's weights as `convert-official` writes a checkpoint: the released
    network's settings (its missing-value codes, decoder norm and 10 class slots)."""
    model, card = load_checkpoint(TINY_EQUI)
    converted = build_model("equitabpfn", dataclasses.replace(model.config, **RELEASED_NETWORK, min_class_slots=10))
    converted.load_state_dict(model.state_dict())
    return save_checkpoint(converted, tmp_path_factory.mktemp("official") / "tiny-official.pt", card)


def _cli(tmp_path, *args):
    return CliRunner().invoke(app, ["equivariance", "--checkpoints", str(TINY_EQUI), "--out", str(tmp_path / "out"),
                                    *SMALL, *args])


def test_the_official_equitabpfn_never_flips_tabpfn_star_through_its_classifier_does(tmp_path, official, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    monkeypatch.delenv("EQUIBENCH_TABICL_CHECKPOINT", raising=False)
    result = _cli(tmp_path, "--weights", f"equitabpfn-official={official}", "--weights", f"tabpfn-star={TINY_STAR}")
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "out" / "equivariance.csv")
    methods = frame[frame.measured == "method"].set_index(["checkpoint", "K"])
    assert sorted(methods.index) == [("equitabpfn-official=tiny-official.pt", 3), ("equitabpfn-official=tiny-official.pt", 5),
                                     ("tabpfn-star=tiny-tabpfn-star.pt", 3), ("tabpfn-star=tiny-tabpfn-star.pt", 5)]
    assert (methods.ensemble == 1).all() and (methods.n_datasets == 3).all()
    assert (methods.loc["equitabpfn-official=tiny-official.pt", "argmax_change_fraction"] == 0).all()
    assert (methods.loc["equitabpfn-official=tiny-official.pt", "logit_rms"] < 1e-4).all()
    assert (methods.loc["tabpfn-star=tiny-tabpfn-star.pt", "argmax_change_fraction"] > 0).all()
    networks = frame[frame.measured == "network"]
    assert set(networks.checkpoint) == {"tiny-equitabpfn"} and sorted(networks.ensemble.unique()) == [1, 2]
    assert "equitabpfn-official=tiny-official.pt" in result.stdout and "tabpfn-star=tiny-tabpfn-star.pt" in result.stdout
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "Methods with the user's weights (`tabpfn-star=tiny-tabpfn-star.pt`, `equitabpfn-official=tiny-official.pt`)" in readme
    assert "| equitabpfn-official=tiny-official.pt | EquiTabPFN (official weights) | 3 | 1 | 0.00 ± 0.00 |" in readme


def test_a_method_without_its_package_is_named_in_the_notes(tmp_path, monkeypatch):
    monkeypatch.setattr(Requirement, "installed", lambda self: False)
    (tmp_path / "weights").mkdir()
    result = _cli(tmp_path, "--weights", f"tabpfn-v2={tmp_path / 'weights'}")
    assert result.exit_code == 0, result.output
    assert "tabpfn-v2=weights: not measured, method 'tabpfn-v2' needs the Python package 'tabpfn'" in result.stdout
    assert set(pd.read_csv(tmp_path / "out" / "equivariance.csv").measured) == {"network"}


@pytest.mark.parametrize("weights, message", [
    ("equitabpfn-official=/no/such.pt", "--weights equitabpfn-official=/no/such.pt: no such file or folder"),
    (f"equitabpfn-official={TINY_EQUI}", "holds an EquiTabPFN trained by equibench, not the authors' converted one"),
])
def test_bad_weights_are_one_line_before_any_work(tmp_path, weights, message):
    result = _cli(tmp_path, "--weights", weights)
    assert result.exit_code == 2 and message in result.output and result.output.count("\n") == 1, result.output
    assert not (tmp_path / "out").exists()


def _tabpfn_v2_weights(folder: Path) -> Path:
    """A tiny random TabPFN v2 classifier in the package's format (as tests/baselines/test_tabpfn_v2.py)."""
    from tabpfn.architectures import tabpfn_v2

    config = dict(max_num_classes=10, emsize=8, nlayers=1, nhead=2, features_per_group=2)
    torch.manual_seed(0)
    network = tabpfn_v2.get_architecture(tabpfn_v2.parse_config(config)[0])
    with torch.no_grad():
        for parameter in network.parameters():
            parameter.normal_(0.0, 0.3)
    torch.save({"config": config, "state_dict": network.state_dict()}, folder / "tabpfn-v2-classifier-tiny.ckpt")
    return folder


def _tabicl_weights(folder: Path) -> Path:
    """A tiny random TabICL in the package's format (as tests/baselines/test_tabicl.py)."""
    from tabicl._model.tabicl import TabICL

    config = dict(max_classes=4, embed_dim=16, col_num_blocks=1, col_nhead=2, col_num_inds=8, row_num_blocks=1,
                  row_nhead=2, row_num_cls=2, icl_num_blocks=1, icl_nhead=2)
    torch.manual_seed(0)
    torch.save({"config": config, "state_dict": TabICL(**config).state_dict()}, folder / "tiny-tabicl.ckpt")
    return folder / "tiny-tabicl.ckpt"


@pytest.mark.parametrize("method, package, make", [("tabpfn-v2", "tabpfn", _tabpfn_v2_weights),
                                                   ("tabicl", "tabicl", _tabicl_weights)])
def test_a_non_equivariant_external_pfn_flips(tmp_path, method, package, make):
    pytest.importorskip(package, reason=f"{package} is not installed (the {method} method needs it)")
    options = MethodOptions(weights={method: str(make(tmp_path))})
    config = EquivarianceConfig(checkpoints=(TINY_EQUI,), classes=(3,), ensembles=(1,), datasets=3, rows=64,
                                methods=(method,))
    frame = measure_equivariance(config, options=options)
    row = frame[frame.measured == "method"].iloc[0]
    assert row.arch == method and row.K == 3 and row.argmax_change_fraction > 0
