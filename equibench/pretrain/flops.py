"""The model FLOPs of training on one prior dataset, from the model's shape (for model FLOP
utilisation, MFU).

A matrix product of an ``a x b`` by a ``b x c`` matrix is ``2abc`` FLOPs. Per dataset of
``R = N + M`` rows (N train rows), K classes, width d, MLP width h, ``L = n_layers`` and
``f = f_max`` padded features, the forward pass of

* EquiTabPFN holds ``S = 1 + K`` tokens per row. Each of its L layers: component attention
  (queries of the R covariate tokens ``2Rd^2``, keys and values of all RS tokens ``4RSd^2``,
  scores and weighted values ``4RSd``, the output projection of 2 tokens per row ``4Rd^2``)
  and datapoint attention (queries and output of RS tokens ``4RSd^2``, keys and values of
  the NS train tokens ``4NSd^2``, scores and weighted values ``4RNSd``), each with an MLP on
  all RS tokens (``4RSdh``). Around them: the covariate encoder ``4Rfd``, the target encoder
  ``2NKd`` and the decoder's attention over width Sd (``2MNSd + 2MNK``) and pointwise MLP
  (``4MK * decoder_hidden``).
* TabPFN* holds one token per row and 2L datapoint-attention blocks (the above with S = 1),
  the covariate and target encoders ``4Rfd + 2N * max_classes * d`` and the decoder MLP
  ``2M(dh + h * max_classes)``.

A training step costs three forward passes (the backward pass computes the gradients of both
the inputs and the weights of each product: twice the forward's), the usual ``6 x parameters
x tokens`` rule with the attention terms added. Normalisations, activations, the loss and the
optimizer are left out (a few percent at these widths).
"""

from __future__ import annotations

from ..errors import InvalidInputError
from ..model.config import ModelConfig


def forward_flops(arch: str, config: ModelConfig, rows: int, n_train: int, n_classes: int) -> float:
    """FLOPs of the forward pass on one dataset of ``rows`` rows, ``n_train`` of them train rows."""
    d, h, f = config.d_model, config.mlp_hidden, config.f_max
    n, m, k = n_train, rows - n_train, n_classes
    encoders = 4 * rows * f * d
    if arch == "equitabpfn":
        s = 1 + k
        component = 2 * rows * d * d + 4 * rows * s * d * d + 4 * rows * s * d + 4 * rows * d * d
        datapoint = 4 * rows * s * d * d + 4 * n * s * d * d + 4 * rows * n * s * d
        mlps = 2 * 4 * rows * s * d * h
        decoder = 2 * m * n * s * d + 2 * m * n * k + 4 * m * k * config.decoder_hidden
        return encoders + 2 * n * k * d + config.n_layers * (component + datapoint + mlps) + decoder
    if arch == "tabpfn-star":
        block = 4 * rows * d * d + 4 * n * d * d + 4 * rows * n * d + 4 * rows * d * h
        decoder = 2 * m * (d * h + h * config.max_classes)
        return encoders + 2 * n * config.max_classes * d + 2 * config.n_layers * block + decoder
    raise InvalidInputError(f"arch must be 'equitabpfn' or 'tabpfn-star', got {arch!r}")


def training_flops(arch: str, config: ModelConfig, rows: int, n_train: int, n_classes: int) -> float:
    """FLOPs of a training step's forward and backward passes on one dataset (3x the forward's)."""
    return 3 * forward_flops(arch, config, rows, n_train, n_classes)
