"""What every network equibench trains, loads and predicts with provides: the contract the
classifiers, the pretraining loop and the checkpoint files rely on. :class:`EquiTabPFN` and
:class:`TabPFNStar` implement it; a new architecture subclasses :class:`TabularPFN`."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod

import torch
from torch import nn

from .config import ModelConfig
from .inference import ChunkPlan, Context


class TabularPFN(nn.Module, metaclass=ABCMeta):
    """A prior-fitted network for tabular classification: class logits of test rows given
    labelled train rows, whole (:meth:`forward`) or in pieces for fitted classifiers
    (:mod:`.inference`). Shapes: x_train (B, N, F) and x_test (B, M, F) normalised features,
    F <= ``config.f_max``, NaN/inf allowed; y_train (B, N) int64 class ids in [0, K)."""

    #: The registry's name of the architecture ("equitabpfn", "tabpfn-star").
    arch: str
    config: ModelConfig

    @property
    @abstractmethod
    def class_limit(self) -> int | None:
        """The most classes one forward takes; None: any number."""

    @abstractmethod
    def forward(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor,
                n_classes: int) -> torch.Tensor:
        """Class logits of the test rows, (B, M, K) for K = ``n_classes``."""

    @abstractmethod
    def token_slots(self, n_classes: int) -> int:
        """Tokens per row for K classes (sizes the memory plans)."""

    @abstractmethod
    def forward_flops(self, rows: int, n_train: int, n_classes: int) -> float:
        """Model FLOPs of :meth:`forward` on one dataset of ``rows`` rows, ``n_train`` of them
        train rows: its matrix products (an ``a x b`` by ``b x c`` one is ``2abc``), without the
        normalisations and activations (a few percent at these widths); for MFU."""

    def training_flops(self, rows: int, n_train: int, n_classes: int) -> float:
        """A training step's FLOPs on one dataset: the forward's three times (the backward computes
        the gradients of both the inputs and the weights of each product)."""
        return 3 * self.forward_flops(rows, n_train, n_classes)

    @abstractmethod
    def encode_context(self, x_train: torch.Tensor, y_train: torch.Tensor, n_classes: int,
                       plan: ChunkPlan = ChunkPlan(), store_dtype: torch.dtype | None = None) -> Context:
        """The train side for one training set, computed once, stored in ``store_dtype``."""

    @abstractmethod
    def context_numel(self, n_train: int, n_classes: int) -> int:
        """Numbers an :meth:`encode_context` of N train rows and K classes keeps."""

    @abstractmethod
    def building_numel(self, n_train: int, n_classes: int) -> int:
        """Numbers :meth:`encode_context` works with besides what it keeps (compute dtype)."""

    @abstractmethod
    def embed_in_context(self, context: Context, x_test: torch.Tensor, plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """The decoder's inputs for test rows against a context: (B, M, ...) per architecture."""

    @abstractmethod
    def predict_in_context(self, context: Context, x_test: torch.Tensor, plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """Class logits (B, M, K) of test rows against an :meth:`encode_context`."""

    @abstractmethod
    def forward_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                        plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """:meth:`forward` in bounded memory (chunks of rows or class slots), keeping nothing, (B, M, K);
        :meth:`forward` itself when every block's work fits one chunk of the plan."""

    @abstractmethod
    def embed_chunked(self, x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, n_classes: int,
                      plan: ChunkPlan = ChunkPlan()) -> torch.Tensor:
        """:meth:`embed_in_context`'s output computed from the train rows in one call."""
