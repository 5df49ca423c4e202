"""A one-figure visual check of the synthetic prior (``equibench prior preview``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..errors import InvalidInputError
from ..figures import new_figure, save_image
from .config import PriorConfig
from .sample import sample_batch

_N_EXAMPLES = 4


def preview_prior(
    out_path: str | Path, config: PriorConfig = PriorConfig(), seed: int = 0, n_batches: int = 64,
    batch_size: int = 8,
) -> Path:
    """Sample ``n_batches`` batches and write one PNG: a few datasets projected on their
    train rows' first two principal components (coloured by class), and histograms of the
    class count K, the features used F and the majority-class share.

    Returns the path written.
    """
    if n_batches < 1:
        raise InvalidInputError(f"`n_batches` must be >= 1, got {n_batches}")
    generator = torch.Generator().manual_seed(seed)
    batches = [sample_batch(config, batch_size, generator) for _ in range(n_batches)]
    ks = np.array([batch.n_classes for batch in batches])
    fs = np.concatenate([batch.n_features.numpy() for batch in batches])
    majority = np.concatenate([
        torch.nn.functional.one_hot(batch.y, batch.n_classes).sum(dim=1).amax(dim=1).numpy() / config.rows
        for batch in batches
    ])
    masked = 1.0 - np.mean(np.concatenate([batch.loss_mask.numpy() for batch in batches]))

    fig = new_figure(17, 9)
    grid = fig.add_gridspec(2, 12)
    fig.suptitle(
        f"Synthetic prior: {n_batches} batches x {batch_size} datasets, {config.rows} rows, seed {seed}; "
        f"{100 * masked:.1f}% of datasets masked from the loss\n"
        "top: train rows of one dataset from each of the first batches, colour = class", fontsize=13,
    )
    for column, batch in enumerate(batches[:_N_EXAMPLES]):
        ax = fig.add_subplot(grid[0, 3 * column:3 * column + 3])
        n_features = int(batch.n_features[0])
        y_train = batch.y[0, :batch.n_train].numpy()
        x_train = np.nan_to_num(batch.x[0, :batch.n_train, :n_features].numpy())  # NaN counts as 0
        centred = x_train - x_train.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        scores = centred @ vt[:2].T  # (N, min(F, 2)) on the first principal components
        if scores.shape[1] == 1:  # one feature: spread the rows by class instead
            jitter = np.random.default_rng(seed).uniform(-0.3, 0.3, len(y_train))
            scores = np.stack([scores[:, 0], y_train + jitter], axis=1)
            ax.set_ylabel("class id (jittered)")
        else:
            ax.set_ylabel("principal component 2")
        ax.scatter(scores[:, 0], scores[:, 1], c=y_train, cmap="tab10" if batch.n_classes <= 10 else "tab20",
                   s=8, alpha=0.7)
        ax.set_title(f"K={batch.n_classes}, F={n_features}, {batch.n_train} train rows")
        ax.set_xlabel("principal component 1" if n_features > 1 else "the one feature")

    ax = fig.add_subplot(grid[1, 0:4])
    ax.hist(ks, bins=np.arange(1.5, config.max_classes + 1.5), color="tab:blue", edgecolor="white")
    ax.set(title=f"class count K per batch (P(K=2) = {np.mean(ks == 2):.2f})", xlabel="K (classes)", ylabel="batches")
    ax = fig.add_subplot(grid[1, 4:8])
    ax.hist(fs, bins=np.linspace(0.5, config.f_max + 0.5, min(config.f_max, 25) + 1),
            color="tab:green", edgecolor="white")
    ax.set(title="features used F per dataset", xlabel=f"F (of f_max = {config.f_max})", ylabel="datasets")
    ax = fig.add_subplot(grid[1, 8:12])
    ax.hist(majority, bins=np.linspace(0.0, 1.0, 21), color="tab:orange", edgecolor="white")
    ax.set(title="class balance: share of the majority class", xlabel="majority-class share of the rows",
           ylabel="datasets")

    return save_image(fig, out_path, dpi=100)
