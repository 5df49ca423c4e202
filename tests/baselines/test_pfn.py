"""The PFN methods: a checkpoint resolved and checked once per run (by the classifiers' own
resolver), loaded once per process."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from equibench.baselines.knn import KNNMethod
from equibench.baselines.pfn import EquiTabPFNMethod, TabPFNStarMethod
from equibench.baselines.settings import PFNSettings
from equibench.classifier import EquiTabPFNClassifier, TabPFNStarClassifier, checkpoints
from equibench.classifier.ecoc import ECOCClassifier
from equibench.errors import CheckpointError
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.model import default_checkpoint

DATA = Path(__file__).parents[1] / "data"
TINY = {"weights": {"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt"),
                    "equitabpfn-ft": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star-ft": str(DATA / "tiny-tabpfn-star.pt")}}


def test_prepare_resolves_the_default_and_checks_the_file(tmp_path):
    prepared = EquiTabPFNMethod.prepare(PFNSettings())
    assert prepared == PFNSettings(checkpoint=str(default_checkpoint("equitabpfn").resolve()))
    assert Path(prepared.checkpoint).is_absolute()
    for checkpoint, message in [("", "the equitabpfn checkpoint is empty"), (str(tmp_path), "is a folder, not a file"),
                                (str(tmp_path / "no.pt"), "does not exist"),
                                (str(DATA / "tiny-tabpfn-star.pt"), "holds a tabpfn-star model, not equitabpfn")]:
        with pytest.raises(CheckpointError, match=message):
            EquiTabPFNMethod.prepare(PFNSettings(checkpoint=checkpoint))
    named = EquiTabPFNMethod.prepare(PFNSettings(checkpoint="equitabpfn-small"))  # a packaged name
    assert named == prepared


@pytest.mark.parametrize("checkpoint", ["", " ", "DIR", "DIR/no.pt", "GARBAGE", str(DATA / "tiny-tabpfn-star.pt")])
def test_the_method_and_the_classifier_refuse_a_bad_checkpoint_alike(tmp_path, checkpoint):
    """One resolver: the same CheckpointError, word for word, from evaluate's method and the classifier."""
    (tmp_path / "garbage.pt").write_bytes(b"not a checkpoint")
    checkpoint = checkpoint.replace("DIR", str(tmp_path)).replace("GARBAGE", str(tmp_path / "garbage.pt"))
    with pytest.raises(CheckpointError) as from_method:
        EquiTabPFNMethod.prepare(PFNSettings(checkpoint=checkpoint))
    with pytest.raises(CheckpointError) as from_classifier:
        EquiTabPFNClassifier(checkpoint=checkpoint).fit(np.zeros((4, 2)), [0, 1, 0, 1])
    assert str(from_method.value) == str(from_classifier.value)
    assert "\n" not in str(from_method.value)


def test_tabpfn_star_cells_use_ecoc_beyond_the_checkpoints_class_limit():
    settings = TabPFNStarMethod.prepare(PFNSettings(checkpoint=str(DATA / "tiny-tabpfn-star.pt"), n_estimators=3))
    native = TabPFNStarMethod(12, seed=5, settings=settings)._model(10, 500)
    assert isinstance(native, TabPFNStarClassifier) and native.n_estimators == 3
    wrapped = TabPFNStarMethod(12, seed=5, settings=settings)._model(11, 500)
    assert isinstance(wrapped, ECOCClassifier) and wrapped.max_classes == 10
    assert (wrapped.redundancy, wrapped.random_state, wrapped.estimator.n_estimators) == (3.0, 5, 1)
    assert not isinstance(EquiTabPFNMethod(40, settings=EquiTabPFNMethod.prepare(PFNSettings()))._model(40, 500),
                          ECOCClassifier)
    # past the context cap, local contexts take the classes (ECOC only within a context past the limit)
    local = TabPFNStarMethod(12, seed=5, settings=settings)._model(11, 5000)
    assert isinstance(local, TabPFNStarClassifier) and local.context == "auto"
    subsample = dataclasses.replace(settings, contexts=("subsample",))
    assert isinstance(TabPFNStarMethod(12, seed=5, settings=subsample)._model(11, 5000), ECOCClassifier)


def test_a_pfn_method_knows_how_its_contexts_served_the_rows():
    """Its diagnostics (an ECOC ensemble's: its first member's); a baseline has none, nor a single class."""
    X, y = np.random.default_rng(0).normal(size=(80, 3)).astype(np.float32), np.arange(80) % 12
    settings = TabPFNStarMethod.prepare(PFNSettings(checkpoint=str(DATA / "tiny-tabpfn-star.pt")))
    method = TabPFNStarMethod(12, settings=settings).fit(X, y)
    method.predict_proba(X[:5])
    assert isinstance(method.model_, ECOCClassifier)
    member = method.model_.estimators_[0]
    assert method.diagnostics() == {"context": "subsample", "context_groups": 1, "context_rows": 80.0,
                                    "context_classes": float(len(member.classes_))}
    assert TabPFNStarMethod(2, settings=settings).fit(X, np.zeros(80, int)).diagnostics() == {}
    assert KNNMethod(12).fit(X, y).diagnostics() == {}


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
    assert sorted(resolutions) == [("equitabpfn",), ("equitabpfn",), ("tabpfn-star",), ("tabpfn-star",)]  # and -ft
    assert sorted(Path(path).name for path, in loads[2:]) == ["equitabpfn-small.pt", "tabpfn-star-small.pt"]


def test_fine_tuned_methods_record_their_fine_tuning_and_the_report_pairs_them(tmp_path):
    """equitabpfn-ft and tabpfn-star-ft beside their zero-shot methods: each fine-tuned cell's
    diagnostics hold the run, and the report draws zero-shot against fine-tuned per task."""
    from sklearn.datasets import load_wine

    from equibench import evaluate_frame
    from equibench.report.build import build_report

    X, y = load_wine(return_X_y=True, as_frame=True)
    summary = evaluate_frame(X.assign(target=y), "target", tmp_path / "run", methods=tuple(TINY["weights"]), folds=0,
                             ensembles=(1,), **TINY)
    assert summary.methods()["equitabpfn-ft"]["ok"] == summary.methods()["tabpfn-star-ft"]["ok"] == 1
    cells = summary.table().set_index("method")
    for method in ("equitabpfn-ft", "tabpfn-star-ft"):
        record = cells.loc[method, "diagnostics"]
        record = json.loads(record) if isinstance(record, str) else record
        assert record["finetune_steps"] > 0 and record["finetune_seconds"] > 0 and record["context"] == "subsample"
        assert {"finetune_kept_step", "finetune_validation_gain"} <= set(record)
    assert "diagnostics" not in cells.columns or all(
        "finetune_steps" not in (json.loads(d) if isinstance(d, str) else d or {})
        for d in cells.loc[["equitabpfn", "tabpfn-star"], "diagnostics"])
    report = build_report([tmp_path / "run"], tmp_path / "report").read_text()
    assert "### Fine-tuning on the table" in report and "frame_finetuning.png" in report
    table = (tmp_path / "report" / "tables" / "frame_finetuning.csv").read_text()
    assert len(table.strip().splitlines()) == 3  # one row per architecture
