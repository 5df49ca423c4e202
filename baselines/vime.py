"""VIME (Yoon et al. 2020): value-imputation and mask-estimation self- and semi-supervised
learning, written in torch.

Corruption: a mask ``m ~ Bernoulli(p_m)`` per entry (p_m = 0.5); each masked entry is
replaced by the same column's value in a random training row, i.e. a draw from the
column's empirical marginal (a column-wise shuffle, with replacement). The mask target is
``x_tilde != x`` (an entry replaced by an equal value counts as unchanged), as in the
authors' code.

1. Self-supervised stage: encoder ``e`` = Linear(F, F) + ReLU (hidden width = number of
   features, as in the authors' code); from ``e(x_tilde)`` a mask head predicts ``m``
   (BCE) and a feature head reconstructs ``x`` (MSE, linear output since the inputs are
   quantile-scaled rather than min-max scaled); loss = BCE + alpha * MSE with alpha = 3.
   Fresh corruptions every batch; early stopping on the same loss for the validation
   features under one fixed corruption.
2. Semi-supervised stage: the encoder is frozen; a predictor MLP on ``e(x)`` (two hidden
   layers of 100 ReLU units, as in the authors' code) is trained with cross-entropy on a
   labelled batch + beta * consistency loss, beta = 3. The consistency loss is the variance
   of the predictor's logits across K = 5 corruptions of a batch of unlabelled rows (the
   training rows, as in TabZilla when no other unlabelled data is given), averaged over
   rows and classes. Early stopping on the validation cross-entropy.

Both stages use :func:`~.neural.train_with_early_stopping` (Adam lr 1e-3, batch 128).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn.functional as F
from torch import nn

from .base import Method
from .neural import logits_torch, mlp, predict_proba_torch, split_tensors, torch_seed, train_with_early_stopping
from .settings import VIMESettings


def corrupt(x: torch.Tensor, pool: torch.Tensor, p_m: float, generator: torch.Generator):
    """(B, F) rows, (P, F) pool of rows to draw replacements from -> (x_tilde (B, F),
    mask target (B, F) float: 1 where x_tilde differs from x)."""
    mask = torch.rand(x.shape, generator=generator) < p_m
    rows = torch.randint(0, len(pool), x.shape, generator=generator)  # (B, F)
    x_bar = torch.gather(pool, 0, rows.to(pool.device))  # x_bar[i, j] = pool[rows[i, j], j]
    x_tilde = torch.where(mask.to(x.device), x_bar, x)
    return x_tilde, (x_tilde != x).float()


class VIMESelf(nn.Module):
    """Encoder with the mask-estimation and feature-reconstruction heads."""

    def __init__(self, n_features: int, hidden: int):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU())  # (B, F) -> (B, H)
        self.mask_head = nn.Linear(hidden, n_features)  # (B, H) -> (B, F) mask logits
        self.feature_head = nn.Linear(hidden, n_features)  # (B, H) -> (B, F) features

    def forward(self, x_tilde: torch.Tensor):
        h = self.encoder(x_tilde)
        return self.mask_head(h), self.feature_head(h)

    def loss(self, x_tilde, mask, x, alpha: float) -> torch.Tensor:
        mask_logits, x_hat = self(x_tilde)
        return F.binary_cross_entropy_with_logits(mask_logits, mask) + alpha * F.mse_loss(x_hat, x)


class VIMEMethod(Method):
    """:class:`~.settings.VIMESettings`. Fitted: ``module_``, ``pretrain_log_``, ``log_``,
    ``pretrain_epochs_trained_`` and ``epochs_trained_`` (semi-supervised stage)."""

    settings: VIMESettings

    def _fit(self, X, y, X_val, y_val, n_seen):
        s = self.settings
        device = s.device
        p_m, alpha, beta, K = s.p_m, s.alpha, s.beta, s.K
        hidden = s.encoder_hidden if s.encoder_hidden is not None else X.shape[1]
        loop = {"lr": s.lr, "seed": self.seed, "batch_size": s.batch_size, "patience": s.patience, "device": device}
        X_t, y_t, Xv_t, yv_t = split_tensors(X, y, X_val, y_val, self.seed, device)  # (n, F), (n,), (v, F), (v,)
        unlabelled = X_t  # (U, F): the training rows, as TabZilla does
        generator = torch.Generator().manual_seed(self.seed + 1)  # fixed validation corruption

        # 1. self-supervised: mask estimation + feature reconstruction
        with torch_seed(self.seed, device):
            pretext = VIMESelf(X.shape[1], hidden).to(device)
        xv_tilde, mv = corrupt(Xv_t, X_t, p_m, generator)

        def self_loss(idx, gen):
            x = X_t[idx.to(device)]
            x_tilde, m = corrupt(x, X_t, p_m, gen)
            return pretext.loss(x_tilde, m, x, alpha)

        self.pretrain_log_ = train_with_early_stopping(
            pretext, self_loss, lambda: pretext.loss(xv_tilde, mv, Xv_t, alpha), len(X_t),
            max_epochs=s.pretrain_max_epochs if s.pretrain_max_epochs is not None else s.max_epochs, **loop,
        )
        self.pretrain_epochs_trained_ = self.pretrain_log_.epochs_trained

        # 2. semi-supervised: predictor on the frozen encoder, CE + beta * consistency
        with torch_seed(self.seed + 1, device):  # frozen encoder + predictor: (B, F) -> (B, H) -> (B, S) logits
            predictor = mlp(hidden, (s.predictor_hidden, s.predictor_hidden), n_seen)
            model = nn.Sequential(OrderedDict(encoder=pretext.encoder.requires_grad_(False), predictor=predictor))
            self.module_ = model.to(device)

        def semi_loss(idx, gen):
            model.encoder.eval()  # frozen, including any normalisation state
            idx = idx.to(device)
            supervised = F.cross_entropy(model(X_t[idx]), y_t[idx])
            rows = torch.randint(0, len(unlabelled), (min(s.batch_size, len(unlabelled)),), generator=gen)
            xu = unlabelled[rows.to(device)].repeat(K, 1)  # (K*B, F)
            xu_tilde, _ = corrupt(xu, unlabelled, p_m, gen)
            logits = model(xu_tilde).view(K, -1, n_seen)  # (K, B, S)
            consistency = logits.var(dim=0, unbiased=False).mean()
            return supervised + beta * consistency

        self.log_ = train_with_early_stopping(
            model, semi_loss, lambda: F.cross_entropy(logits_torch(model, Xv_t), yv_t), len(X_t),
            max_epochs=s.max_epochs, **loop,
        )
        self.epochs_trained_ = self.log_.epochs_trained

    def _predict_proba(self, X):
        return predict_proba_torch(self.module_, X, device=self.settings.device)
