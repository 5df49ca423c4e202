"""The shared, seeded torch training loop of the neural baselines (TabZilla protocol).

Every torch baseline trains the same way: Adam, shuffled mini-batches of 128 drawn from a
seeded :class:`torch.Generator`, at most 500 epochs, early stopping once the validation loss
has not improved for 20 epochs, and the best epoch's weights restored at the end. Without
validation data, 10% of the training rows (seeded, stratified) are held out for early stopping.

All randomness (weight initialisation, dropout, shuffling, noise) is drawn inside
:func:`torch_seed`, which forks the global torch RNG: two fits with the same seed give
identical probabilities, and fitting never disturbs the caller's RNG state.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .base import Method
from .settings import BATCH_SIZE, MAX_EPOCHS, PATIENCE, TrainingSettings

VAL_FRACTION = 0.1


@contextlib.contextmanager
def torch_seed(seed: int, device: str | torch.device = "cpu") -> Iterator[None]:
    """Seed torch's global RNG inside the block and restore the caller's state after it."""
    device = torch.device(device)
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


def holdout_split(y: np.ndarray, fraction: float = VAL_FRACTION, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Seeded, stratified (train_idx, val_idx) split that keeps >= 1 training row per class.

    Each class gives ``round(fraction * count)`` rows to validation, but never its last
    one, so every class the learner saw is still in its training part. Returns an empty
    ``val_idx`` when the data is too small to spare any row.
    """
    rng = np.random.RandomState(seed)
    train, val = [], []
    for c in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == c))
        n_val = min(round(fraction * len(rows)), len(rows) - 1)
        val.append(rows[:n_val])
        train.append(rows[n_val:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(val))


def split_validation(X, y, X_val, y_val, seed: int):
    """Return (X, y, X_val, y_val), holding out 10% of the rows when no validation data is
    given (the training rows double as validation data if none can be spared)."""
    if X_val is not None and y_val is not None and len(y_val) > 0:
        return X, y, X_val, y_val
    train_idx, val_idx = holdout_split(y, seed=seed)
    if len(val_idx) == 0:
        return X, y, X, y
    return X[train_idx], y[train_idx], X[val_idx], y[val_idx]


def split_tensors(X, y, X_val, y_val, seed: int, device) -> tuple[torch.Tensor, ...]:
    """:func:`split_validation`'s (X, y, X_val, y_val) as tensors on ``device``: features
    float32 (n, F), labels int64 (n,)."""
    arrays = split_validation(X, y, X_val, y_val, seed)
    dtypes = (torch.float32, torch.long, torch.float32, torch.long)
    return tuple(torch.as_tensor(a, dtype=dtype, device=device) for a, dtype in zip(arrays, dtypes))


def mlp(n_in: int, hidden, n_out: int, activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear layers of the widths ``hidden``, each followed by ``activation``, then a linear
    output layer: (B, n_in) -> (B, n_out)."""
    layers, width = [], n_in
    for units in hidden:
        layers += [nn.Linear(width, units), activation()]
        width = units
    return nn.Sequential(*layers, nn.Linear(width, n_out))


def minibatches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch of shuffled row indices; a trailing batch of one row joins the previous
    batch (batch normalisation cannot train on a single row)."""
    order = torch.randperm(n, generator=generator)
    batches = list(torch.split(order, batch_size))
    if len(batches) > 1 and len(batches[-1]) == 1:
        batches[-2:] = [torch.cat(batches[-2:])]
    return batches


@dataclass
class TrainingLog:
    """What one early-stopped training run did."""

    epochs_trained: int = 0  # epochs actually run (< max_epochs when stopped early)
    best_epoch: int = -1  # 0-based epoch whose weights were restored
    best_val_loss: float = float("inf")
    val_losses: list[float] = field(default_factory=list)
    stopped_early: bool = False


def train_with_early_stopping(
    module: nn.Module,
    batch_loss: Callable[[torch.Tensor, torch.Generator], torch.Tensor],
    val_loss: Callable[[], float],
    n_train: int,
    *,
    lr: float,
    seed: int,
    batch_size: int = BATCH_SIZE,
    max_epochs: int = MAX_EPOCHS,
    patience: int = PATIENCE,
    device: str | torch.device = "cpu",
) -> TrainingLog:
    """The generic loop: optimise ``module``'s trainable parameters on
    ``batch_loss(row_indices, generator)`` over shuffled mini-batches, evaluate
    ``val_loss()`` (called with the module in eval mode) after every epoch, stop after
    ``patience`` epochs without a strict improvement and restore the best weights
    (parameters and buffers). The generator also serves any extra sampling a loss needs.
    """
    optimizer = torch.optim.Adam([p for p in module.parameters() if p.requires_grad], lr=lr)
    generator = torch.Generator().manual_seed(seed)
    log = TrainingLog()
    best_state = copy.deepcopy(module.state_dict())
    with torch_seed(seed, device):
        for epoch in range(max_epochs):
            module.train()
            for idx in minibatches(n_train, batch_size, generator):
                optimizer.zero_grad(set_to_none=True)
                batch_loss(idx, generator).backward()
                optimizer.step()
            module.eval()
            with torch.no_grad():
                loss = float(val_loss())
            log.val_losses.append(loss)
            log.epochs_trained = epoch + 1
            if loss < log.best_val_loss:
                log.best_val_loss, log.best_epoch = loss, epoch
                best_state = copy.deepcopy(module.state_dict())
            elif epoch - log.best_epoch >= patience:
                log.stopped_early = True
                break
    module.load_state_dict(best_state)
    module.eval()
    return log


def logits_torch(module: nn.Module, X: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """Eval-mode, no-grad forward pass in chunks: (n, F) -> (n, S)."""
    module.eval()
    with torch.no_grad():
        return torch.cat([module(chunk) for chunk in torch.split(X, batch_size)])


def fit_torch_classifier(
    module: nn.Module, X: np.ndarray, y: np.ndarray, X_val: np.ndarray | None = None, y_val: np.ndarray | None = None,
    *, seed: int, extra_loss: Callable[[], torch.Tensor] | None = None, device: str | torch.device = "cpu", **loop,
) -> TrainingLog:
    """Train ``module`` ((B, F) -> (B, S) logits) with cross-entropy and early stopping on
    the validation cross-entropy: :func:`train_with_early_stopping` with the options ``loop``
    (``lr``, ``batch_size``, ...). ``extra_loss()`` (e.g. a sparsity regulariser) is added
    to every training batch's loss, not to the validation loss. X float32 (n, F), y int
    labels 0..S-1; without validation data 10% of the rows are held out."""
    module.to(device)
    X_t, y_t, Xv_t, yv_t = split_tensors(X, y, X_val, y_val, seed, device)

    def batch_loss(idx, generator):
        idx = idx.to(device)
        loss = F.cross_entropy(module(X_t[idx]), y_t[idx])
        return loss if extra_loss is None else loss + extra_loss()

    def val_loss():
        return F.cross_entropy(logits_torch(module, Xv_t), yv_t)

    return train_with_early_stopping(module, batch_loss, val_loss, len(y_t), seed=seed, device=device, **loop)


def predict_proba_torch(module: nn.Module, X: np.ndarray, device: str | torch.device = "cpu") -> np.ndarray:
    """Softmax probabilities (n, S) of a logit module, in eval mode and without gradients."""
    X_t = torch.as_tensor(X, dtype=torch.float32, device=device)  # (n, F)
    return torch.softmax(logits_torch(module, X_t), dim=1).cpu().numpy()


class TorchMethod(Method):
    """A torch classifier trained by :func:`fit_torch_classifier` with its
    :class:`~.settings.TrainingSettings`; subclasses build the network in :meth:`build`.
    Fitted: ``module_``, ``log_`` and ``epochs_trained_``.
    """

    settings: TrainingSettings

    def build(self, n_features: int, n_seen: int) -> nn.Module:
        """The network, mapping (B, n_features) -> (B, n_seen) logits."""
        raise NotImplementedError

    def extra_loss(self) -> Callable[[], torch.Tensor] | None:
        """A regulariser added to every training batch's loss (none by default)."""
        return None

    def _fit(self, X, y, X_val, y_val, n_seen):
        s = self.settings
        with torch_seed(self.seed, s.device):
            self.module_ = self.build(X.shape[1], n_seen).to(s.device)
        self.log_ = fit_torch_classifier(
            self.module_, X, y, X_val, y_val, lr=s.lr, seed=self.seed, batch_size=s.batch_size,
            max_epochs=s.max_epochs, patience=s.patience, extra_loss=self.extra_loss(), device=s.device,
        )
        self.epochs_trained_ = self.log_.epochs_trained

    def _predict_proba(self, X):
        return predict_proba_torch(self.module_, X, device=self.settings.device)
