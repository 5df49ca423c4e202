"""classifier_for: the classifier class for a checkpoint's architecture, with ECOC beyond the
network's own class limit; and the one checkpoint resolver behind it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from make_fixtures import CHECKPOINTS

import equibench
from equibench import ECOCClassifier, EquiTabPFNClassifier, TabPFNStarClassifier, classifier_for
from equibench.classifier.checkpoints import resolve_checkpoint
from equibench.errors import CheckpointError
from equibench.model import ModelCard, build_model, default_checkpoint, load_checkpoint, save_checkpoint, size_config

PACKAGED = {
    "default": EquiTabPFNClassifier, "equitabpfn": EquiTabPFNClassifier, "tabpfn-star": TabPFNStarClassifier,
    "equitabpfn-small": EquiTabPFNClassifier, "tabpfn-star-small": TabPFNStarClassifier,
    "tabpfn-star-small.pt": TabPFNStarClassifier,
}


@pytest.mark.parametrize("checkpoint, expected", PACKAGED.items())
def test_packaged_names_pick_their_class(checkpoint, expected):
    classifier = classifier_for(checkpoint, device="cpu", random_state=0)
    assert type(classifier) is expected and classifier.checkpoint == checkpoint
    assert classifier.get_params()["device"] == "cpu"


@pytest.mark.parametrize("arch, expected", [("equitabpfn", EquiTabPFNClassifier), ("tabpfn-star", TabPFNStarClassifier)])
def test_files_paths_and_model_objects_pick_their_class(arch, expected):
    for checkpoint in (CHECKPOINTS[arch], str(CHECKPOINTS[arch]), default_checkpoint(arch),
                       load_checkpoint(CHECKPOINTS[arch])[0]):
        assert type(classifier_for(checkpoint)) is expected


def test_default_means_the_class_architecture_in_a_classifier():
    assert resolve_checkpoint("default") == resolve_checkpoint("equitabpfn") == default_checkpoint("equitabpfn")
    assert resolve_checkpoint("default", "tabpfn-star") == default_checkpoint("tabpfn-star")
    star = TabPFNStarClassifier(device="cpu", random_state=0, n_estimators=1).fit(np.eye(4), [0, 1, 0, 1])
    assert star.checkpoint_reference_["packaged"] == "tabpfn-star-small.pt"


@pytest.mark.parametrize("checkpoint", ["tabpfn-star", CHECKPOINTS["tabpfn-star"]])
def test_tabpfn_star_is_wrapped_in_ecoc_exactly_beyond_its_limit(checkpoint):
    for n_classes in (None, 2, 10):
        classifier = classifier_for(checkpoint, n_classes, n_estimators=3, random_state=7)
        assert type(classifier) is TabPFNStarClassifier and classifier.n_estimators == 3
    wrapped = classifier_for(checkpoint, 11, n_estimators=3, random_state=7, device="cpu")
    assert type(wrapped) is ECOCClassifier
    assert (wrapped.max_classes, wrapped.redundancy, wrapped.random_state) == (10, 3.0, 7)
    inner = wrapped.estimator
    assert type(inner) is TabPFNStarClassifier and inner.n_estimators == 1 and inner.device == "cpu"
    assert inner.checkpoint == checkpoint and inner.random_state == 7
    default_members = classifier_for(checkpoint, 11)
    assert default_members.redundancy == float(TabPFNStarClassifier().n_estimators)


def test_the_limit_is_the_checkpoints_own(tmp_path):
    path = save_checkpoint(build_model("tabpfn-star", size_config("tiny", max_classes=4)), tmp_path / "four.pt",
                           ModelCard(arch="tabpfn-star", size="tiny"))
    assert type(classifier_for(path, 4)) is TabPFNStarClassifier
    wrapped = classifier_for(path, 5, random_state=0)
    assert wrapped.max_classes == 4
    rng = np.random.RandomState(0)
    y = np.arange(60) % 6
    X = rng.normal(size=(60, 3)) + y[:, None]
    assert wrapped.fit(X, y).predict_proba(X[:5]).shape == (5, 6)


def test_equitabpfn_is_never_wrapped():
    for checkpoint in ("default", CHECKPOINTS["equitabpfn"]):
        assert type(classifier_for(checkpoint, 1000)) is EquiTabPFNClassifier


def test_a_missing_or_garbage_checkpoint_is_one_line(tmp_path):
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x80\x02not a checkpoint at all")
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(Path(CHECKPOINTS["equitabpfn"]).read_bytes()[:500])
    cases = {tmp_path / "missing.pt": "does not exist", str(garbage): "not a readable checkpoint",
             truncated: "not a readable checkpoint", str(tmp_path): "is a folder, not a file", "": "is empty",
             "nonesuch-small": "does not exist", 3: "checkpoint must be",
             torch.nn.Linear(2, 2): "is a Linear, not an EquiTabPFN or TabPFN. network"}
    for checkpoint, message in cases.items():
        with pytest.raises(CheckpointError, match=message) as error:
            classifier_for(checkpoint, 20)
        assert "\n" not in str(error.value)


def test_exported_at_the_top():
    assert equibench.classifier_for is classifier_for and "classifier_for" in equibench.__all__
