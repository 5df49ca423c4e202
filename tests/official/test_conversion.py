"""`equibench convert-official`: the authors' network, built from their code at a small size
with random weights (tests/data/official-equitabpfn-fixture.npz), converted and run by
equibench, gives their outputs; what is not mapped exactly is refused."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest
import torch
import yaml
from official_runs import NETWORK_CASES, case_inputs, official_state, write_run
from typer.testing import CliRunner

from equibench.cli import app
from equibench.errors import CheckpointError, InvalidInputError
from equibench.model import load_checkpoint
from equibench.model.inference import ChunkPlan
from equibench.official import convert_official


@pytest.mark.parametrize("case", NETWORK_CASES)
def test_converted_network_gives_the_official_logits(official, converted, case):
    network, card = load_checkpoint(converted)
    x_train, y_train, x_test, n_classes, expected = case_inputs(official, case)
    with torch.inference_mode():
        exact = network.double()(x_train, y_train, x_test, n_classes)  # (B, M, K)
        chunked = network.forward_chunked(x_train, y_train, x_test, n_classes, ChunkPlan(max_elements=8192))  # chunked, not one piece
        single = network.float()(*(t.float() if t.is_floating_point() else t for t in (x_train, y_train, x_test)),
                                 n_classes)
    torch.testing.assert_close(exact, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(chunked.double(), expected, rtol=0, atol=1e-12)  # indicator over train + test rows
    torch.testing.assert_close(single.double(), expected, rtol=0, atol=1e-5)
    assert network.config.computes_released_network and network.config.min_class_slots == 10 and network.config.n_heads == 2
    assert "licence" in card.notes and card.training["class_slots"] == 10


def test_prefixed_keys_and_the_loss_weights_convert_the_same(official, converted, tmp_path):
    state = {f"module._orig_mod.{name}": tensor for name, tensor in official_state(official).items()}
    state["criterion.weight"] = torch.ones(10)
    out = convert_official([write_run(tmp_path / "run", official, state=state)], tmp_path / "prefixed.pt")
    network, reference = load_checkpoint(out)[0], load_checkpoint(converted)[0]
    assert network.config == reference.config
    assert all(torch.equal(tensor, reference.state_dict()[name]) for name, tensor in network.state_dict().items())


def test_converting_again_gives_the_same_bytes(official, tmp_path):
    run = write_run(tmp_path / "run", official)
    first = convert_official([run], tmp_path / "first.pt").read_bytes()
    shutil.copytree(run, tmp_path / "elsewhere")
    files = [tmp_path / "elsewhere" / "artifacts" / "ckpt" / "last.pickle", tmp_path / "elsewhere" / "metadata" / "config.yaml"]
    again = convert_official(files, tmp_path / "again.pt")  # the two files, in any order, elsewhere
    assert again.read_bytes() == first
    with pytest.raises(InvalidInputError, match="already exists"):
        convert_official([run], again)
    assert convert_official([run], again, overwrite=True).read_bytes() == first


def test_class_slots_can_be_set(official, tmp_path):
    out = convert_official([write_run(tmp_path / "run", official)], tmp_path / "twenty.pt", class_slots=20)
    assert load_checkpoint(out)[0].config.min_class_slots == 20


@pytest.mark.parametrize("change, message", [
    (lambda s: s.update({"transformer.layers.0.cross_feature_attention.linear_1.weight":
                         s.pop("transformer.layers.0.cross_feature_attention.linear1.weight")}),
     r"missing \['transformer.layers.0.cross_feature_attention.linear1.weight'\], not mapped "
     r"\['transformer.layers.0.cross_feature_attention.linear_1.weight'\]"),
    (lambda s: s.pop("decoder.pointwise_mlp.4.bias"), r"missing \['decoder.pointwise_mlp.4.bias'\]"),
    (lambda s: s.update({"decoder.extra.weight": torch.ones(2)}), r"not mapped \['decoder.extra.weight'\]"),
    (lambda s: s.update({"encoder.layer.weight": torch.ones(16, 100)}), "'encoder.layer.weight' has shape"),
])
def test_weights_that_do_not_map_exactly_are_refused(official, tmp_path, change, message):
    state = official_state(official)
    change(state)
    with pytest.raises(CheckpointError, match=message):
        convert_official([write_run(tmp_path / "run", official, state=state)], tmp_path / "out.pt")
    assert not (tmp_path / "out.pt").exists()


def _kwargs(config):
    return config["model"]["bkbn"]["kwargs"]


@pytest.mark.parametrize("change, message", [
    (lambda c: _kwargs(c).update(nhead=3), "emsize.*16.*not divisible by `nhead` .3."),
    (lambda c: _kwargs(c).update(nhead="2"), "nhead` must be a positive integer"),
    (lambda c: c.update(transformer={"nhead": 4}), r"head count more than once.*`model.bkbn.kwargs.nhead` = 2, "
                                                   r"`transformer.nhead` = 4"),
    (lambda c: _kwargs(c).update(nlayers=3), "do not match an EquiTabPFN v1 of 3 layers"),
    (lambda c: _kwargs(c).update(emsize=32), "has shape"),
    (lambda c: _kwargs(c).update(feature_mask_mode="none"), "feature_mask_mode` is 'none'"),
    (lambda c: _kwargs(c).update(equivariant_encoder=True), "equivariant_encoder` is True"),
    (lambda c: _kwargs(c).update(flash_attention=True), "keys this conversion does not map: flash_attention"),
    (lambda c: _kwargs(c)["decoder_kwarg"]["kwargs"]["pointwise_mlp"].update(layer_norm_eps=1e-5),
     "layer_norm_eps` is 1e-05"),
    (lambda c: _kwargs(c)["decoder_kwarg"].update(name="equitabpfn.models.decoders.MLPDecoder"), "MLPDecoder"),
    (lambda c: c["model"]["y_encoder"].update(name="equitabpfn.models.encoders.OneHotAndLinear"), "OneHotAndLinear"),
    (lambda c: c["model"]["bkbn"].update(name="equitabpfn.models.equitabpfnv2.EquiTabPFNv2"), "EquiTabPFNv2"),
    (lambda c: c["prior"].update(num_features=50), "num_features` is 50"),
    (lambda c: c["model"].update(logits=False), "logits` is False"),
])
def test_configs_that_do_not_map_exactly_are_refused(official, tmp_path, change, message):
    config = yaml.safe_load(str(official["config_yaml"]))
    change(config)
    with pytest.raises(CheckpointError, match=message):
        convert_official([write_run(tmp_path / "run", official, config=config)], tmp_path / "out.pt")


def test_a_head_count_stated_twice_alike_is_accepted(official, tmp_path):
    config = yaml.safe_load(str(official["config_yaml"]))
    config["transformer"] = {"nhead": _kwargs(config)["nhead"]}
    out = convert_official([write_run(tmp_path / "run", official, config=config)], tmp_path / "out.pt")
    assert load_checkpoint(out)[0].config.n_heads == _kwargs(config)["nhead"]


class _Payload:
    """An object whose unpickling would run a shell command."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_the_checkpoint_file_runs_no_code(official, tmp_path):
    marker = tmp_path / "ran"
    payload = {"model": official_state(official), "optimizer": _Payload(marker), "epoch": 3}
    convert_official([write_run(tmp_path / "run", official, payload=payload)], tmp_path / "out.pt")
    assert not marker.exists()  # the optimizer entry was not built; the weights were converted
    payload = {"model": _Payload(marker)}
    with pytest.raises(CheckpointError, match=r"model entry .* is a \w+\.system object, which this reader does not build"):
        convert_official([write_run(tmp_path / "bad", official, payload=payload)], tmp_path / "bad.pt")
    assert not marker.exists()


def test_damaged_and_missing_files_are_clear_errors(official, tmp_path):
    run = write_run(tmp_path / "run", official)
    weights = run / "artifacts" / "ckpt" / "last.pickle"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        convert_official([run], tmp_path / "out.pt")
    with pytest.raises(CheckpointError, match="does not hold metadata/config.yaml"):
        convert_official([tmp_path], tmp_path / "out.pt")
    with pytest.raises(InvalidInputError, match="pass an official run folder"):
        convert_official([weights], tmp_path / "out.pt")
    torch_file = tmp_path / "last.pt"  # a torch.save'd checkpoint is read too (weights_only)
    torch.save({"model": official_state(official)}, torch_file)
    convert_official([run / "metadata" / "config.yaml", torch_file], tmp_path / "from-torch.pt")


def test_cli_converts_and_reports(official, tmp_path):
    run = write_run(tmp_path / "run", official)
    result = CliRunner().invoke(app, ["convert-official", str(run), "--out", str(tmp_path / "cli.pt")])
    assert result.exit_code == 0, result.output
    assert "official EquiTabPFN, d_model 16, 2 heads, 2 layers" in result.output
    assert (tmp_path / "cli.pt").read_bytes() == convert_official([run], tmp_path / "library.pt").read_bytes()
    again = CliRunner().invoke(app, ["convert-official", str(run), "--out", str(tmp_path / "cli.pt")])
    assert again.exit_code == 2 and "already exists" in again.output and "--overwrite" in again.output
    assert "Traceback" not in again.output


def test_pickled_weights_keep_their_values(official, tmp_path):
    """The restricted reader rebuilds tensors exactly as pickle wrote them."""
    from equibench.official.unpickle import read_official_state_dict

    state = official_state(official)
    path = tmp_path / "weights.pickle"
    with open(path, "wb") as stream:
        pickle.dump({"model": state}, stream)
    read = read_official_state_dict(path)
    assert read.keys() == state.keys() and all(torch.equal(read[name], state[name]) for name in state)
