"""The networks (model/equitabpfn.py, tabpfn_star.py, network.py): exact class equivariance, row-order invariance, test-row independence."""

from __future__ import annotations

import pytest
import torch

from equibench.model import (
    SIZES,
    EquiTabPFN,
    ModelConfig,
    TabPFNStar,
    TooManyClassesError,
    count_parameters,
    size_config,
)
from equibench.model.config import RELEASED_NETWORK
from equibench.model.network import TabularPFN


def _problem(n_classes: int, n_train: int = 40, n_test: int = 9, n_features: int = 7, batch: int = 2, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    x_train = torch.randn(batch, n_train, n_features, generator=generator, dtype=torch.float64)
    x_test = torch.randn(batch, n_test, n_features, generator=generator, dtype=torch.float64)
    y_train = torch.randint(0, n_classes, (batch, n_train), generator=generator)
    return x_train, y_train, x_test


def _tiny(model_class, seed: int = 0, **options):
    torch.manual_seed(seed)
    return model_class(size_config("tiny", **options)).double().eval()


#: The block variants: the paper's post-LN blocks, pre-LN, QK-norm and both.
BLOCK_VARIANTS = [{}, {"norm_first": True}, {"qk_norm": True}, {"norm_first": True, "qk_norm": True}]
_variant_ids = ["post-ln", "pre-ln", "qk-norm", "pre-ln+qk-norm"]
#: ... and the authors' released network (its indicator and decoder norm, 10 class slots with ghost classes).
EQUIVARIANCE_VARIANTS = [*BLOCK_VARIANTS, {"min_class_slots": 10, **RELEASED_NETWORK}]


@pytest.mark.parametrize("options", EQUIVARIANCE_VARIANTS, ids=[*_variant_ids, "released"])
@pytest.mark.parametrize("n_classes", [2, 3, 10, 11, 26, 100])
def test_equitabpfn_is_exactly_class_equivariant(n_classes, options):
    model = _tiny(EquiTabPFN, **options)
    x_train, y_train, x_test = _problem(n_classes, n_train=max(40, 2 * n_classes))
    permutation = torch.randperm(n_classes, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x_train, y_train, x_test, n_classes)
        # relabel class c as permutation[c]; the output column permutation[c] must equal column c
        permuted = model(x_train, permutation[y_train], x_test, n_classes)
    assert logits.shape == (2, 9, n_classes)
    assert (permuted[..., permutation] - logits).abs().max().item() <= 1e-6


def test_tabpfn_star_is_not_class_equivariant():
    model = _tiny(TabPFNStar)
    x_train, y_train, x_test = _problem(5)
    permutation = torch.tensor([1, 2, 3, 4, 0])
    with torch.no_grad():
        logits = model(x_train, y_train, x_test, 5)
        permuted = model(x_train, permutation[y_train], x_test, 5)
    assert (permuted[..., permutation] - logits).abs().max().item() > 1e-3


@pytest.mark.parametrize("options", BLOCK_VARIANTS, ids=_variant_ids)
@pytest.mark.parametrize("model_class", [EquiTabPFN, TabPFNStar])
def test_predictions_do_not_depend_on_train_row_order(model_class, options):
    model = _tiny(model_class, **options)
    x_train, y_train, x_test = _problem(4)
    order = torch.randperm(x_train.shape[1], generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        logits = model(x_train, y_train, x_test, 4)
        shuffled = model(x_train[:, order], y_train[:, order], x_test, 4)
    assert (shuffled - logits).abs().max().item() <= 1e-9


@pytest.mark.parametrize("options", BLOCK_VARIANTS, ids=_variant_ids)
@pytest.mark.parametrize("model_class", [EquiTabPFN, TabPFNStar])
def test_test_rows_are_predicted_independently(model_class, options):
    model = _tiny(model_class, **options)
    x_train, y_train, x_test = _problem(4)
    with torch.no_grad():
        together = model(x_train, y_train, x_test, 4)
        one_by_one = torch.cat(
            [model(x_train, y_train, x_test[:, m : m + 1], 4) for m in range(x_test.shape[1])], dim=1
        )
        reversed_rows = model(x_train, y_train, x_test.flip(1), 4).flip(1)
    assert (one_by_one - together).abs().max().item() <= 1e-9
    assert (reversed_rows - together).abs().max().item() <= 1e-9


def test_datasets_in_a_batch_are_independent():
    model = _tiny(EquiTabPFN)
    x_train, y_train, x_test = _problem(3)
    with torch.no_grad():
        batched = model(x_train, y_train, x_test, 3)
        single = model(x_train[1:], y_train[1:], x_test[1:], 3)
    assert (batched[1:] - single).abs().max().item() <= 1e-9


def test_missing_values_reach_the_indicator():
    model = _tiny(EquiTabPFN)
    x_train, y_train, x_test = _problem(3)
    x_nan, x_inf, x_zero = x_test.clone(), x_test.clone(), x_test.clone()
    x_nan[0, 0, 0], x_inf[0, 0, 0], x_zero[0, 0, 0] = float("nan"), float("inf"), 0.0
    with torch.no_grad():
        outputs = [model(x_train, y_train, x, 3)[0, 0] for x in (x_nan, x_inf, x_zero)]
    assert all(torch.isfinite(o).all() for o in outputs)
    assert (outputs[0] - outputs[2]).abs().max() > 1e-6  # NaN is not silently the same as 0
    assert (outputs[1] - outputs[0]).abs().max() > 1e-6  # and inf is not the same as NaN


@pytest.mark.parametrize("options", BLOCK_VARIANTS, ids=_variant_ids)
@pytest.mark.parametrize("model_class", [EquiTabPFN, TabPFNStar])
def test_gradients_reach_every_parameter(model_class, options):
    torch.manual_seed(0)
    model = model_class(size_config("tiny", **options))
    x_train, y_train, x_test = (t.float() if t.is_floating_point() else t for t in _problem(3))
    loss = model(x_train, y_train, x_test, 3).logsumexp(-1).sum()
    loss.backward()
    missing = [name for name, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
    assert missing == []


def test_tabpfn_star_refuses_more_than_ten_classes_and_points_to_ecoc():
    model = _tiny(TabPFNStar)
    x_train, y_train, x_test = _problem(11)
    with pytest.raises(TooManyClassesError, match="ECOC"):
        model(x_train, y_train, x_test, 11)


def test_too_many_features_is_a_clear_error():
    model = _tiny(EquiTabPFN)
    x_train, y_train, x_test = _problem(2, n_features=101)
    with pytest.raises(ValueError, match="at most 100"):
        model(x_train, y_train, x_test, 2)


def test_named_sizes_and_parameter_counts():
    assert set(SIZES) >= {"tiny", "small", "base"}
    base = SIZES["base"]
    assert (base.d_model, base.n_heads, base.n_layers) == (512, 4, 6)
    equi, star = count_parameters(EquiTabPFN(base)), count_parameters(TabPFNStar(base))
    assert 24e6 < equi < 27e6  # the paper's ~25M
    assert abs(equi - star) / equi < 0.05  # comparable budgets
    for config in SIZES.values():
        small_equi, small_star = count_parameters(EquiTabPFN(config)), count_parameters(TabPFNStar(config))
        assert abs(small_equi - small_star) / small_equi < 0.1


@pytest.mark.parametrize(
    "overrides, message",
    [({"d_model": 30, "n_heads": 4}, "divisible"), ({"n_layers": 0}, "positive"), ({"d_model": 2.5}, "positive"),
     ({"norm_first": 1}, "true or false"), ({"qk_norm": "yes"}, "true or false"),
     ({"missing_indicator": "official"}, "one of"), ({"decoder_norm_eps": 0.0}, "positive number"),
     ({"decoder_norm_eps": float("nan")}, "positive number")],
)
def test_config_validation(overrides, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(**overrides)
    with pytest.raises(ValueError, match="unknown model size"):
        size_config("huge")
    with pytest.raises(ValueError, match="unknown ModelConfig fields"):
        ModelConfig.from_dict({"d_model": 32, "width": 3})


def test_both_networks_provide_the_declared_contract():
    """A network missing a piece of the contract cannot be built."""
    for network_class in (EquiTabPFN, TabPFNStar):
        assert issubclass(network_class, TabularPFN) and not network_class.__abstractmethods__
    assert isinstance(_tiny(EquiTabPFN), TabularPFN)

    class Incomplete(TabularPFN):
        arch, class_limit = "incomplete", None

        def forward(self, x_train, y_train, x_test, n_classes):
            return x_test

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
