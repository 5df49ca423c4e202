"""Where and in which precision the networks run: ``device`` and ``inference_precision``
values as the classifiers, pretraining and the equivariance experiment accept them."""

from __future__ import annotations

import torch

from .errors import InvalidInputError

#: Values of ``inference_precision`` given by name (torch dtypes are accepted too).
PRECISIONS = ("auto", "autocast", "float32", "float64", "bfloat16", "float16")


#: Device types, and whether torch can use one here ("auto" takes the first usable one).
_DEVICES = {
    "cuda": lambda: torch.cuda.is_available(),
    "mps": lambda: torch.backends.mps.is_available(),
    "cpu": lambda: True,
}
_NAMES = "'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'"


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` picks CUDA when present, else Apple's MPS when present, else CPU; anything
    else goes to torch.device and must be a device torch can use here (refused otherwise)."""
    if isinstance(device, str) and device == "auto":
        return torch.device(next(name for name, available in _DEVICES.items() if available()))
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as error:
        raise InvalidInputError(f"`device` must be {_NAMES}, got {device!r}") from error
    available = _DEVICES.get(resolved.type)
    if available is None:
        raise InvalidInputError(f"`device` must be {_NAMES}, got {device!r}")
    if not available():
        raise InvalidInputError(
            f"`device` {str(device)!r} was requested but this torch ({torch.__version__}) cannot use "
            f"{resolved.type.upper()} here; use `device='auto'` (the best device present) or `device='cpu'`"
        )
    if resolved.type == "cuda" and resolved.index is not None and resolved.index >= torch.cuda.device_count():
        raise InvalidInputError(
            f"`device` {str(device)!r} was requested but this machine has {torch.cuda.device_count()} CUDA device(s); "
            f"use cuda:0 to cuda:{torch.cuda.device_count() - 1} or `device='auto'`"
        )
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
        f"`inference_precision` must be one of {', '.join(map(repr, PRECISIONS))} or a floating-point torch dtype, "
        f"got {precision!r}"
    )
