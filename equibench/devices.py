"""Where and in which precision the networks run: ``device`` and ``inference_precision``
values as the classifiers, pretraining and the equivariance experiment accept them."""

from __future__ import annotations

import torch

from .errors import InvalidInputError

#: Values of ``inference_precision`` given by name (torch dtypes are accepted too).
PRECISIONS = ("auto", "autocast", "float32", "float64", "bfloat16", "float16")


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` picks CUDA when present, else CPU; anything else goes to torch.device."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise InvalidInputError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', got {device!r}") from error
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(f"device {device!r} was requested but CUDA is not available; use device='cpu'")
    return resolved


def resolve_precision(precision, device: torch.device) -> tuple[torch.dtype, torch.dtype | None]:
    """``(dtype of weights and inputs, autocast dtype or None)`` for an ``inference_precision``.

    "auto": bfloat16 autocast on CUDA devices that support it, float32 otherwise;
    "autocast": bfloat16 autocast on any device; a dtype (or its name): weights and
    inputs in that dtype, no autocast.
    """
    if isinstance(precision, str) and precision in PRECISIONS:
        if precision == "auto":
            cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
            return torch.float32, torch.bfloat16 if cuda_bf16 else None
        if precision == "autocast":
            return torch.float32, torch.bfloat16
        precision = getattr(torch, precision)
    if isinstance(precision, torch.dtype) and precision.is_floating_point:
        return precision, None
    raise InvalidInputError(
        f"inference_precision must be one of {', '.join(map(repr, PRECISIONS))} or a floating-point torch dtype, "
        f"got {precision!r}"
    )
