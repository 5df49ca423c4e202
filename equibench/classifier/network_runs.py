"""How a fitted PFN classifier runs its network: test rows in batches against a training set
(the whole network per batch) or against that set's keys and values computed once (a cache),
and the members' logits combined into the ensemble's outputs."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

from ..devices import resolve_precision
from ..model.inference import Context

#: ``cache_precision``: "auto" keeps the cache in the dtype it is computed in; a dtype name
#: stores it in that dtype (bfloat16 and float16 halve float32's memory).
CACHE_PRECISIONS = ("auto", "float32", "bfloat16", "float16")

#: Test batches are padded to at least this many rows with copies of their last row, because
#: float32 matrix products over a few rows take other kernels and round differently, and a
#: row's prediction should not depend on the rows predicted with it.
MIN_TEST_ROWS = 16


class NetworkRunner:
    """The network on a device in the inference precision (moved there in place), run over
    test rows ``batch_size`` at a time."""

    def __init__(self, model: nn.Module, device: torch.device, precision, batch_size: int):
        self.dtype, self.autocast = resolve_precision(precision, device)
        self.model = model.to(device, self.dtype)
        self.device = device
        self.batch_size = batch_size

    def encode(self, x_train: torch.Tensor, y_train: torch.Tensor, n_classes: int,
               store_dtype: torch.dtype | None) -> Context:
        """The keys and values of a training set, x_train (N, F) and y_train (N,), stored in
        ``store_dtype`` (None: the compute dtype) as each layer makes them."""
        x_train, y_train = self._train(x_train, y_train)  # (1, N, F), (1, N)
        with torch.inference_mode(), self._mixed_precision():
            return self.model.encode_context(x_train, y_train, n_classes, store_dtype=store_dtype)

    def run(self, x_test: torch.Tensor, n_classes: int, train: tuple | None = None, context: Context | None = None,
            embed: bool = False) -> torch.Tensor:
        """Test rows x_test (M, F) against a training set ``train`` = (x_train (N, F), y_train (N,))
        or its encoded ``context``: logits (M, K) in float64 on the CPU or, with ``embed``, the
        decoder's inputs ((M, 1+K, d) for EquiTabPFN, (M, d) for TabPFN*; float32 unless float64)."""
        if context is None:
            x_train, y_train = self._train(*train)
        chunks = []
        with torch.inference_mode(), self._mixed_precision():
            for start in range(0, x_test.shape[0], self.batch_size):
                batch = x_test[start : start + self.batch_size].to(self.dtype)
                n_real = batch.shape[0]
                if n_real < MIN_TEST_ROWS:
                    batch = torch.cat([batch, batch[-1:].expand(MIN_TEST_ROWS - n_real, -1)])
                batch = batch.to(self.device).unsqueeze(0)  # (1, b, F)
                if context is not None:
                    out = (self.model.embed_in_context if embed else self.model.predict_in_context)(context, batch)
                else:
                    out = (self.model.embed_chunked if embed else self.model.forward_chunked)(
                        x_train, y_train, batch, n_classes)
                wide = torch.float64 if not embed or out.dtype == torch.float64 else torch.float32
                chunks.append(out[0, :n_real].to("cpu", wide))
        return torch.cat(chunks)

    def _train(self, x_train: torch.Tensor, y_train: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x_train.to(self.device, self.dtype).unsqueeze(0), y_train.to(self.device).unsqueeze(0)

    def _mixed_precision(self):
        return torch.autocast(self.device.type, dtype=self.autocast) if self.autocast else contextlib.nullcontext()


def combine_members(member_logits: list[torch.Tensor], temperature: float) -> dict[str, np.ndarray]:
    """The ensemble of the members' logits, each (M, K) float64: "proba", the average of
    softmax(logits / temperature); "log_proba", its logarithm in log space; "logits", the
    average of logits / temperature (TabPFN's ``predict_logits``)."""
    scaled = [member / temperature for member in member_logits]
    proba, log_proba, logits = torch.softmax(scaled[0], dim=-1), torch.log_softmax(scaled[0], dim=-1), scaled[0]
    for member in scaled[1:]:
        proba, logits = proba + torch.softmax(member, dim=-1), logits + member
        log_proba = torch.logaddexp(log_proba, torch.log_softmax(member, dim=-1))
    n_members = len(scaled)
    return {"proba": (proba / n_members).numpy(), "log_proba": (log_proba - np.log(n_members)).numpy(),
            "logits": (logits / n_members).numpy()}
