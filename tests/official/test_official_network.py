"""The official variant of EquiTabPFN (the released network's settings, ghost class slots): its
pieces compute its forward, and its missing-value indicator is the official one (its exact
class equivariance is tested with the other variants in tests/model/test_networks.py)."""

from __future__ import annotations

import pytest
import torch

from equibench.errors import InvalidInputError
from equibench.model import EquiTabPFN, size_config
from equibench.model.config import RELEASED_NETWORK
from equibench.model.inference import ChunkPlan
from equibench.model.layers import official_missing_indicator_features


def _official(min_class_slots: int = 10) -> EquiTabPFN:
    torch.manual_seed(0)
    return EquiTabPFN(size_config("tiny", min_class_slots=min_class_slots, **RELEASED_NETWORK)).double().eval()


def _problem(n_classes: int, nans: bool = True, n_train: int = 30, n_test: int = 9):
    generator = torch.Generator().manual_seed(0)
    x_train = torch.randn(2, n_train, 6, generator=generator, dtype=torch.float64)
    x_test = torch.randn(2, n_test, 6, generator=generator, dtype=torch.float64)
    if nans:
        x_train[:, ::3, 1] = float("nan")
        x_test[:, 2:, 4] = float("nan")  # missing in test rows only
        x_train[:, :, 5] = x_test[:, :, 5] = float("nan")
    y_train = torch.randint(0, n_classes, (2, n_train), generator=generator)
    return x_train, y_train, x_test


def test_ghost_slots_are_classes_without_train_rows():
    """With 10 slots, 3 classes are the first 3 columns of the same network on 10 classes."""
    x_train, y_train, x_test = _problem(3)
    with torch.no_grad():
        ghosts = _official(min_class_slots=10)(x_train, y_train, x_test, 3)
        wide = _official(min_class_slots=1)(x_train, y_train, x_test, 10)
    torch.testing.assert_close(ghosts, wide[..., :3], rtol=0, atol=1e-12)


def test_pieces_compute_the_official_forward():
    model = _official()
    x_train, y_train, x_test = _problem(4)
    with torch.inference_mode():
        expected = model(x_train, y_train, x_test, 4)
        chunked = model.forward_chunked(x_train, y_train, x_test, 4, ChunkPlan(max_elements=16384))
        clean_train, clean_test = torch.nan_to_num(x_train), torch.nan_to_num(x_test)
        context = model.encode_context(clean_train, y_train, 4)
        cached = model.predict_in_context(context, clean_test)
        one_row = model.predict_in_context(context, clean_test[:, :1])  # the indicator of a single row is 0
        assert 2 * model.context_numel(30, 4) == sum(t.numel() for pair in context.keys_values for t in pair) + \
            context.h_train.numel() + context.y_onehot.numel()
        with pytest.raises(InvalidInputError, match="fit_mode='low_memory'"):
            model.encode_context(x_train, y_train, 4)
        with pytest.raises(InvalidInputError, match="cannot serve rows with NaN or inf"):
            model.predict_in_context(context, x_test)
        clean = model(clean_train, y_train, clean_test, 4)
    torch.testing.assert_close(chunked, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(cached, clean, rtol=0, atol=1e-12)
    torch.testing.assert_close(one_row, clean[:, :1], rtol=0, atol=1e-12)


def test_official_indicator_codes_and_standardisation():
    x = torch.tensor([[[float("nan"), 1.0, float("inf"), float("nan")],
                       [0.0, 2.0, float("-inf"), float("nan")],
                       [0.0, 3.0, 1.0, float("nan")]]], dtype=torch.float64)  # (1, 3, 4)
    features = official_missing_indicator_features(x, 6)
    values, indicator = features[..., :6], features[..., 6:]
    codes = torch.tensor([-1.0, 0.0, 0.0], dtype=torch.float64)  # column 0: NaN, then values
    torch.testing.assert_close(indicator[0, :, 0], (codes - codes.mean()) / (codes.std() + 1e-6))
    codes = torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)  # column 2: +inf, -inf, a value
    torch.testing.assert_close(indicator[0, :, 2], (codes - codes.mean()) / (codes.std() + 1e-6))
    assert indicator[0, :, [1, 3, 4, 5]].abs().max() == 0  # no missing values, all missing, padding
    assert values[0, 0, 2] == torch.finfo(torch.float64).max and values[0, 1, 2] == -torch.finfo(torch.float64).max
    assert values[0, 0, 0] == 0 and values[0, :, 4:].abs().max() == 0
    test_rows = official_missing_indicator_features(x[:, :1], 6, rows=x)  # standardised over other rows
    torch.testing.assert_close(test_rows, features[:, :1])
