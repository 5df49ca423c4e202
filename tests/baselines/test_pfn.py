"""The PFN methods: a checkpoint resolved and checked once per run, loaded once per process."""

from __future__ import annotations

from pathlib import Path

import pytest

from equibench.baselines import pfn
from equibench.baselines.equitabpfn import EquiTabPFNMethod
from equibench.baselines.settings import EquiTabPFNSettings
from equibench.classifier import checkpoints
from equibench.errors import InvalidInputError
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.model import default_checkpoint

DATA = Path(__file__).parents[1] / "data"
TINY = {"equitabpfn_checkpoint": str(DATA / "tiny-equitabpfn.pt"), "tabpfn_star_checkpoint": str(DATA / "tiny-tabpfn-star.pt")}


def test_prepare_resolves_the_default_and_checks_the_file(tmp_path):
    prepared = EquiTabPFNMethod.prepare(EquiTabPFNSettings())
    assert prepared == EquiTabPFNSettings(checkpoint=str(default_checkpoint("equitabpfn").resolve()))
    assert Path(prepared.checkpoint).is_absolute()
    for checkpoint, message in [("", "the equitabpfn checkpoint is empty"), (str(tmp_path), "is a folder; pass the "),
                                (str(tmp_path / "no.pt"), "does not exist"),
                                (str(DATA / "tiny-tabpfn-star.pt"), "holds a tabpfn-star model, not equitabpfn")]:
        with pytest.raises(InvalidInputError, match=message):
            EquiTabPFNMethod.prepare(EquiTabPFNSettings(checkpoint=checkpoint))


def _counting(monkeypatch, module, name: str) -> list:
    calls, original = [], getattr(module, name)

    def counted(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_run_resolves_and_loads_each_checkpoint_once(tmp_path, monkeypatch):
    checkpoints._load_cached.cache_clear()
    loads = _counting(monkeypatch, checkpoints, "load_checkpoint")
    resolutions = _counting(monkeypatch, pfn, "default_checkpoint")
    config = EvaluateConfig(suite="demo", methods=("equitabpfn",), folds=(0,), ensembles=(1, 2), **TINY)
    summary = evaluate(config, tmp_path / "tiny", progress=False)
    assert summary.counts["ok"] == 12  # 6 tasks x 2 ensemble sizes, all in this process
    # both checkpoints: every method's settings are prepared (and recorded in the manifest)
    assert sorted(Path(path).name for path, in loads) == ["tiny-equitabpfn.pt", "tiny-tabpfn-star.pt"]
    assert resolutions == []
    evaluate(EvaluateConfig(suite="demo", methods=("knn",), folds=(0,)), tmp_path / "default", dry_run=True)
    assert sorted(resolutions) == [("equitabpfn",), ("tabpfn-star",)]
    assert sorted(Path(path).name for path, in loads[2:]) == ["equitabpfn-small.pt", "tabpfn-star-small.pt"]
