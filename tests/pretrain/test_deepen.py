"""Continuing a trained pre-LN model with more layers (init_from + --layers): the new layers
start as identities, so the deeper model computes exactly what the trained one did."""

from __future__ import annotations

import pytest
import torch

from equibench.model import build_model, load_checkpoint, size_config
from equibench.pretrain import pretrain
from equibench.pretrain.deepen import can_deepen, deepened_state, layer_plan

from .common import PRIOR, tiny_config, validation_at


def test_new_layers_are_spread_between_the_trained_ones():
    assert layer_plan(4, 6) == [0, 1, None, 2, 3, None]
    assert layer_plan(4, 8) == [0, None, 1, None, 2, None, 3, None]
    assert layer_plan(4, 12) == [0, None, None, 1, None, None, 2, None, None, 3, None, None]
    assert layer_plan(2, 3) == [0, 1, None]
    assert layer_plan(1, 4) == [0, None, None, None]


def _inputs(n_classes: int = 4):
    generator = torch.Generator().manual_seed(0)
    x_train, x_test = torch.randn(2, 30, 5, generator=generator), torch.randn(2, 7, 5, generator=generator)
    y_train = torch.arange(30).remainder(n_classes).expand(2, 30)
    return x_train, y_train, x_test, n_classes


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
@pytest.mark.parametrize("new_layers", [3, 5])
def test_the_deeper_model_computes_what_the_trained_one_did(arch, new_layers):
    torch.manual_seed(0)
    source = build_model(arch, size_config("tiny", norm_first=True)).eval()
    with torch.no_grad():  # weights away from the fresh init, as a trained model's are
        for parameter in source.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    target = build_model(arch, size_config("tiny", norm_first=True, n_layers=new_layers)).eval()
    untouched = {name: tensor.clone() for name, tensor in target.state_dict().items()}
    assert can_deepen(source, target)

    state = deepened_state(source, target)
    assert all(torch.equal(untouched[name], tensor) for name, tensor in target.state_dict().items())
    target.load_state_dict(state)
    with torch.no_grad():
        assert torch.equal(target(*_inputs()), source(*_inputs()))

    # the new layers learn: their residual outputs get gradients
    target.train()
    target(*_inputs()).logsumexp(-1).sum().backward()
    stack = target.layers if arch == "equitabpfn" else target.blocks
    new_block = stack[-1].datapoints if arch == "equitabpfn" else stack[-1]
    assert new_block.out.weight.grad.abs().sum() > 0 and new_block.mlp[-1].weight.grad.abs().sum() > 0


def test_only_more_layers_of_a_pre_ln_model_can_be_grown():
    pre_ln = build_model("equitabpfn", size_config("tiny", norm_first=True))
    assert not can_deepen(pre_ln, build_model("equitabpfn", size_config("tiny", norm_first=True, n_layers=1)))
    assert not can_deepen(pre_ln, build_model("equitabpfn", size_config("tiny", norm_first=True, n_layers=2)))
    assert not can_deepen(pre_ln, build_model("equitabpfn", size_config("tiny", norm_first=True, n_layers=3,
                                                                          mlp_hidden=128)))
    assert not can_deepen(pre_ln, build_model("tabpfn-star", size_config("tiny", norm_first=True, n_layers=3)))
    post_ln = build_model("equitabpfn", size_config("tiny"))
    assert not can_deepen(post_ln, build_model("equitabpfn", size_config("tiny", n_layers=3)))


def test_pretraining_continues_a_checkpoint_with_more_layers(tmp_path):
    first = pretrain(tiny_config(steps=3, model_overrides={"norm_first": True}), PRIOR, tmp_path / "first",
                     progress=False).model_path
    deeper = tiny_config(steps=3, seed=1, init_from=str(first), model_overrides={"norm_first": True, "n_layers": 3})
    second = pretrain(deeper, PRIOR, tmp_path / "second", progress=False).model_path
    model, card = load_checkpoint(second)
    assert model.config.n_layers == 3 and card.steps == 6
    assert card.training["initialised_from"]["layers"] == {"from": 2, "to": 3, "plan": [0, 1, None]}
    # step 0 of the deeper run validates exactly what the trained model scored
    start, end_of_first = validation_at(tmp_path / "second", 0), validation_at(tmp_path / "first", 3)
    assert start["prior_loss"] == pytest.approx(end_of_first["prior_loss"], abs=1e-6)


def test_a_post_ln_checkpoint_is_not_grown(tmp_path):
    first = pretrain(tiny_config(steps=1), PRIOR, tmp_path / "first", progress=False).model_path
    with pytest.raises(ValueError, match="or, for a pre-LN model, only more layers: `n_layers`"):
        pretrain(tiny_config(steps=1, init_from=str(first), model_overrides={"n_layers": 3}), PRIOR,
                 tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "log.jsonl").exists()
