"""One batch of the prior, drawn step by step from the caller's generator.

Per-batch scalars come from a numpy generator and the large tensors from a torch generator
on ``device``, both seeded from the caller's generator: the same seed gives the same batch.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..errors import InvalidInputError
from .classes import assign_classes, classes_seen_in_train
from .config import PriorBatch, PriorConfig, split_bounds
from .features import finish_features
from .gp import sample_gp
from .mlp_scm import chunks_by_features, mlp_structure, sample_mlp
from .trees import tree_targets


@torch.no_grad()
def sample_batch(
    config: PriorConfig, batch_size: int, generator: torch.Generator, device: str | torch.device = "cpu",
) -> PriorBatch:
    """Sample ``batch_size`` datasets of ``config.rows`` rows on ``device``.

    The MLP/GP choice is made per dataset. Datasets whose MLP overflowed to non-finite values
    are zeroed and masked out of the loss, like those with a test class unseen in train.
    """
    return sample_batch_from_seed(config, batch_size, draw_batch_seed(generator), device)


def draw_batch_seed(generator: torch.Generator) -> int:
    """The one draw a batch takes from the caller's generator: the seed of everything in it."""
    return int(torch.randint(0, 2**62, (1,), generator=generator, device=generator.device).item())


@torch.no_grad()
def sample_batch_from_seed(
    config: PriorConfig, batch_size: int, seed: int, device: str | torch.device = "cpu",
) -> PriorBatch:
    """The batch :func:`sample_batch` draws when its generator gives ``seed`` (a pure function
    of its arguments: worker processes can draw a run's batches ahead of it)."""
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size < 1:
        raise InvalidInputError(f"`batch_size` must be a positive integer, got {batch_size!r}")
    device = torch.device(device)
    rng = np.random.default_rng(seed)
    gen = torch.Generator(device=device).manual_seed(int(rng.integers(2**62)))

    n_classes = 2 if rng.random() < config.p_binary else int(rng.integers(2, config.max_classes + 1))
    n_train = int(rng.integers(*split_bounds(config), endpoint=True))
    n_features_np = feature_counts(config, batch_size, rng)
    x, y_cont = _raw_datasets(config, n_features_np, device, rng, gen)

    n_features = torch.as_tensor(n_features_np, dtype=torch.int64, device=device)
    finite = torch.isfinite(x).flatten(1).all(dim=1) & torch.isfinite(y_cont).all(dim=1)
    if not bool(finite.all()):
        x = torch.where(finite[:, None, None], x, 0.0)
        y_cont = torch.where(finite[:, None], y_cont, 0.0)
    if config.tree_fraction > 0:
        trees = torch.as_tensor(np.flatnonzero(rng.random(batch_size) < config.tree_fraction), device=device)
        if len(trees):
            y_cont[trees] = tree_targets(x[trees], n_features[trees], config, rng, gen)
    x = finish_features(x, n_train, n_features, config, rng, gen)

    y = assign_classes(y_cont, n_classes, gen)
    loss_mask = classes_seen_in_train(y, n_train, n_classes) & finite
    return PriorBatch(x=x, y=y, n_train=n_train, n_classes=n_classes, n_features=n_features, loss_mask=loss_mask)


def feature_counts(config: PriorConfig, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """How many features each dataset uses, in {1..f_max} (``config.feature_counts``)."""
    if config.feature_counts == "uniform":
        return rng.integers(1, config.f_max + 1, size=batch_size)
    drawn = np.floor(np.exp(rng.uniform(0.0, np.log(config.f_max + 1), size=batch_size)))
    return np.clip(drawn, 1, config.f_max).astype(np.int64)


def _raw_datasets(
    config: PriorConfig, n_features: np.ndarray, device: torch.device, rng: np.random.Generator,
    gen: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw features and continuous targets, each dataset from an MLP-SCM (causal or direct,
    in chunks of similar feature counts) or, with probability ``gp_fraction``, a GP."""
    # n_features: (B,) -> x (B, R, f_max) zero beyond n_features, y_cont (B, R); may be non-finite
    batch_size = len(n_features)
    is_gp = rng.random(batch_size) < config.gp_fraction
    is_causal = rng.random(batch_size) < config.causal_prob
    structure = mlp_structure(config, rng)
    groups = [(functools.partial(sample_mlp, causal=causal, structure=structure), chunk)
              for causal in (True, False)
              for chunk in chunks_by_features(np.flatnonzero(~is_gp & (is_causal == causal)), n_features)]
    groups.append((sample_gp, np.flatnonzero(is_gp)))

    x = torch.empty(batch_size, config.rows, config.f_max, device=device)
    y_cont = torch.empty(batch_size, config.rows, device=device)
    for sampler, slots in groups:
        if len(slots):
            slots = rng.permutation(slots)  # the MLP groups datasets by activation: decorrelate
            index = torch.as_tensor(slots, device=device)
            x_part, y_part = sampler(config, n_features[slots], rng=rng, gen=gen)
            x.index_copy_(0, index, x_part)
            y_cont.index_copy_(0, index, y_part)
    return x, y_cont
