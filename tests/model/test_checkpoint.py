"""The checkpoint format: round trip, half-precision storage and every broken-file path."""

from __future__ import annotations

import pytest
import torch

from equibench.model import (
    CheckpointError,
    ModelCard,
    build_model,
    default_checkpoint,
    load_checkpoint,
    read_card,
    save_checkpoint,
    size_config,
)
from equibench.model.checkpoint import FORMAT, FORMAT_VERSION


def _model(arch="equitabpfn"):
    torch.manual_seed(0)
    return build_model(arch, size_config("tiny"))


def _outputs(model):
    generator = torch.Generator().manual_seed(0)
    x_train, x_test = torch.randn(1, 20, 3, generator=generator), torch.randn(1, 5, 3, generator=generator)
    y_train = torch.randint(0, 3, (1, 20), generator=generator)
    with torch.no_grad():
        return model.eval()(x_train, y_train, x_test, 3)


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
def test_round_trip_keeps_weights_config_and_card(tmp_path, arch):
    model = _model(arch)
    card = ModelCard(arch=arch, size="tiny", steps=12, datasets_seen=96, metrics={"val_acc": 0.5})
    path = save_checkpoint(model, tmp_path / "m.pt", card)
    loaded, loaded_card = load_checkpoint(path)
    assert type(loaded) is type(model) and loaded.config == model.config
    assert torch.equal(_outputs(loaded), _outputs(model))
    assert loaded_card.steps == 12 and loaded_card.metrics == {"val_acc": 0.5}
    assert loaded_card.n_parameters == sum(p.numel() for p in model.parameters())
    assert read_card(path) == loaded_card
    assert not list(tmp_path.glob(".*tmp"))  # atomic write leaves no temporary file


def test_half_precision_storage_is_smaller_and_close(tmp_path):
    model = _model()
    full = save_checkpoint(model, tmp_path / "full.pt", ModelCard(arch="equitabpfn", size="tiny"))
    half = save_checkpoint(model, tmp_path / "half.pt", ModelCard(arch="equitabpfn", size="tiny"), weights_dtype="float16")
    assert half.stat().st_size < 0.6 * full.stat().st_size
    loaded, _ = load_checkpoint(half)
    assert next(loaded.parameters()).dtype == torch.float32
    assert torch.allclose(_outputs(loaded), _outputs(model), atol=1e-2)


def test_missing_file(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "nope.pt")


def test_truncated_file(tmp_path):
    path = save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"))
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(path)


def test_garbage_file(tmp_path):
    path = tmp_path / "m.pt"
    path.write_text("not a checkpoint")
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        load_checkpoint(path)


def test_torch_file_that_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "m.pt"
    torch.save({"weights": torch.zeros(3)}, path)
    with pytest.raises(CheckpointError, match="not an equibench checkpoint"):
        load_checkpoint(path)


def _rewrite(path, **changes):
    payload = torch.load(path, weights_only=True)
    payload.update(changes)
    torch.save(payload, path)


def test_future_format_version(tmp_path):
    path = save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"))
    _rewrite(path, format_version=FORMAT_VERSION + 1)
    with pytest.raises(CheckpointError, match="format version"):
        load_checkpoint(path)


def test_config_that_does_not_match_the_weights(tmp_path):
    path = save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"))
    payload = torch.load(path, weights_only=True)
    _rewrite(path, config={**payload["config"], "d_model": 64})
    with pytest.raises(CheckpointError, match="does not match"):
        load_checkpoint(path)


def test_unknown_architecture(tmp_path):
    path = save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"))
    _rewrite(path, arch="gpt")
    with pytest.raises(CheckpointError, match="unknown architecture"):
        load_checkpoint(path)


def test_card_that_contradicts_the_weights(tmp_path):
    path = save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"))
    payload = torch.load(path, weights_only=True)
    _rewrite(path, card={**payload["card"], "arch": "tabpfn-star"})
    with pytest.raises(CheckpointError, match="model card says"):
        load_checkpoint(path)


def test_saved_file_is_a_plain_checkpoint(tmp_path):
    path = save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"))
    payload = torch.load(path, weights_only=True)  # no pickled code needed
    assert payload["format"] == FORMAT and payload["arch"] == "equitabpfn"


def test_unknown_weights_dtype(tmp_path):
    with pytest.raises(ValueError, match="weights_dtype"):
        save_checkpoint(_model(), tmp_path / "m.pt", ModelCard(arch="equitabpfn", size="tiny"), weights_dtype="int8")


def test_default_checkpoint_error_until_one_ships(monkeypatch, tmp_path):
    monkeypatch.setattr("equibench.model.checkpoint.packaged_checkpoint_dir", lambda: tmp_path)
    with pytest.raises(CheckpointError, match="no pretrained equitabpfn checkpoint ships"):
        default_checkpoint("equitabpfn")
    save_checkpoint(_model(), tmp_path / "equitabpfn-tiny.pt", ModelCard(arch="equitabpfn", size="tiny"))
    save_checkpoint(_model(), tmp_path / "equitabpfn-small.pt", ModelCard(arch="equitabpfn", size="tiny"))
    assert default_checkpoint("equitabpfn").name == "equitabpfn-small.pt"  # the largest size wins
    with pytest.raises(ValueError, match="unknown architecture"):
        default_checkpoint("resnet")


def test_each_architecture_is_named_once():
    """The torch-free list (with the command line's aliases) names the networks' ``arch``, each
    with its estimator class."""
    from equibench.classifier.classifiers import CLASSIFIERS
    from equibench.model.checkpoint import _MODEL_CLASSES
    from equibench.model.config import ARCH_ALIASES, ARCHITECTURES

    assert list(_MODEL_CLASSES) == list(CLASSIFIERS) == list(ARCHITECTURES)
    assert set(ARCH_ALIASES.values()) <= set(ARCHITECTURES)
