"""The PFN methods: a checkpoint resolved and checked once per run (by the classifiers' own
resolver), loaded once per process."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from equibench.baselines.equitabpfn import EquiTabPFNMethod
from equibench.baselines.settings import EquiTabPFNSettings, TabPFNStarSettings
from equibench.baselines.tabpfn_star import TabPFNStarMethod
from equibench.classifier import EquiTabPFNClassifier, TabPFNStarClassifier, checkpoints
from equibench.classifier.ecoc import ECOCClassifier
from equibench.errors import CheckpointError
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.model import default_checkpoint

DATA = Path(__file__).parents[1] / "data"
TINY = {"weights": {"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt")}}


def test_prepare_resolves_the_default_and_checks_the_file(tmp_path):
    prepared = EquiTabPFNMethod.prepare(EquiTabPFNSettings())
    assert prepared == EquiTabPFNSettings(checkpoint=str(default_checkpoint("equitabpfn").resolve()))
    assert Path(prepared.checkpoint).is_absolute()
    for checkpoint, message in [("", "the equitabpfn checkpoint is empty"), (str(tmp_path), "is a folder, not a file"),
                                (str(tmp_path / "no.pt"), "does not exist"),
                                (str(DATA / "tiny-tabpfn-star.pt"), "holds a tabpfn-star model, not equitabpfn")]:
        with pytest.raises(CheckpointError, match=message):
            EquiTabPFNMethod.prepare(EquiTabPFNSettings(checkpoint=checkpoint))
    named = EquiTabPFNMethod.prepare(EquiTabPFNSettings(checkpoint="equitabpfn-small"))  # a packaged name
    assert named == prepared


@pytest.mark.parametrize("checkpoint", ["", " ", "DIR", "DIR/no.pt", "GARBAGE", str(DATA / "tiny-tabpfn-star.pt")])
def test_the_method_and_the_classifier_refuse_a_bad_checkpoint_alike(tmp_path, checkpoint):
    """One resolver: the same CheckpointError, word for word, from evaluate's method and the classifier."""
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    checkpoint = checkpoint.replace("DIR", str(tmp_path)).replace("GARBAGE", str(tmp_path / "garbage.pt"))
    with pytest.raises(CheckpointError) as from_method:
        EquiTabPFNMethod.prepare(EquiTabPFNSettings(checkpoint=checkpoint))
    with pytest.raises(CheckpointError) as from_classifier:
        EquiTabPFNClassifier(checkpoint=checkpoint).fit(np.zeros((4, 2)), [0, 1, 0, 1])
    assert str(from_method.value) == str(from_classifier.value)
    assert "\n" not in str(from_method.value)


def test_tabpfn_star_cells_use_ecoc_beyond_the_checkpoints_class_limit():
    settings = TabPFNStarMethod.prepare(TabPFNStarSettings(checkpoint=str(DATA / "tiny-tabpfn-star.pt"), n_estimators=3))
    native = TabPFNStarMethod(12, seed=5, settings=settings)._model(10, 500)
    assert isinstance(native, TabPFNStarClassifier) and native.n_estimators == 3
    wrapped = TabPFNStarMethod(12, seed=5, settings=settings)._model(11, 500)
    assert isinstance(wrapped, ECOCClassifier) and wrapped.max_classes == 10
    assert (wrapped.redundancy, wrapped.random_state, wrapped.estimator.n_estimators) == (3.0, 5, 1)
    assert not isinstance(EquiTabPFNMethod(40, settings=EquiTabPFNMethod.prepare(EquiTabPFNSettings()))._model(40, 500),
                          ECOCClassifier)
    # past the context cap, local contexts take the classes (ECOC only within a context past the limit)
    local = TabPFNStarMethod(12, seed=5, settings=settings)._model(11, 5000)
    assert isinstance(local, TabPFNStarClassifier) and local.context == "auto"
    subsample = dataclasses.replace(settings, contexts=("subsample",))
    assert isinstance(TabPFNStarMethod(12, seed=5, settings=subsample)._model(11, 5000), ECOCClassifier)


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
    resolutions = _counting(monkeypatch, checkpoints, "default_checkpoint")
    config = EvaluateConfig(suite="demo", methods=("equitabpfn",), folds=(0,), ensembles=(1, 2), **TINY)
    summary = evaluate(config, tmp_path / "tiny", progress=False)
    assert summary.counts["ok"] == 12  # 6 tasks x 2 ensemble sizes, all in this process
    # both checkpoints: every method's settings are prepared (and recorded in the manifest)
    assert sorted(Path(path).name for path, in loads) == ["tiny-equitabpfn.pt", "tiny-tabpfn-star.pt"]
    assert resolutions == []
    evaluate(EvaluateConfig(suite="demo", methods=("knn",), folds=(0,)), tmp_path / "default", dry_run=True)
    assert sorted(resolutions) == [("equitabpfn",), ("tabpfn-star",)]
    assert sorted(Path(path).name for path, in loads[2:]) == ["equitabpfn-small.pt", "tabpfn-star-small.pt"]
