"""Option types and parsers that several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..baselines.registry import METHODS, check_weights, weights_methods
from ..errors import InvalidInputError
from .completion import complete_weights

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def comma_list(text: str) -> tuple[str, ...]:
    """The items of a comma-separated list, stripped, the blank ones left out."""
    return tuple(filter(None, (part.strip() for part in text.split(","))))


def int_list(text: str, option: str) -> tuple[int, ...]:
    """``"0,1,2"`` or ``"0-2"`` (or a mix) given to the flag ``option`` -> (0, 1, 2)."""
    values = []
    for part in comma_list(text):
        low, _, high = part.partition("-")
        try:
            low, high = int(low), int(high) if high else None
        except ValueError:
            raise InvalidInputError(f"{option} takes comma-separated integers or ranges like 0-2, got {text!r}") from None
        if high is not None and high < low:
            raise InvalidInputError(f"{option}: the range {part} runs backwards; write it low-high, e.g. {high}-{low}")
        values.extend(range(low, high + 1) if high is not None else [low])
    if not values:
        raise InvalidInputError(f"{option} is empty; give e.g. {option} 0,1,2")
    return tuple(dict.fromkeys(values))


def _weights_help() -> str:
    """``--weights``' help: the form, then each method that takes weights, from the registry."""
    methods = "; ".join(f"{name}={spec.weights.metavar}: {spec.weights.what}"
                        + (f", default ${spec.weights.env}" if spec.weights.env else "")
                        for name, spec in METHODS.items() if spec.weights is not None)
    return (f"A method's weights, as METHOD=PATH; repeat the option for several methods. {methods}. A method "
            "that needs weights and has none is skipped, with why.")


WeightsOption = Annotated[Optional[list[str]], typer.Option(metavar="METHOD=PATH", help=_weights_help(), show_default=False,
                                                            autocompletion=complete_weights)]


def weights_map(values: list[str] | None) -> dict[str, str]:
    """``--weights`` values (``METHOD=PATH``, each method once) as ``MethodOptions.weights``;
    refused unless each names a method that takes weights."""
    weights: dict[str, str] = {}
    for value in values or []:
        method, _, path = value.partition("=")
        method = method.strip()
        if not method or not path:
            raise InvalidInputError(f"--weights takes METHOD=PATH, got {value!r}; the methods that take weights: "
                                    f"{', '.join(weights_methods())}")
        if method in weights:
            raise InvalidInputError(f"--weights gives {method} twice ({weights[method]!r} and {path!r}); give it once")
        weights[method] = path
    check_weights(weights)
    return weights


def check_out_file(out: Path, overwrite: bool, example: str) -> None:
    """Refuse an ``--out`` that is a folder (suggesting ``out``/``example``), or that exists without --overwrite."""
    if out.is_dir():
        raise InvalidInputError(f"--out {str(out)!r} is a folder; pass a file path such as {str(out / example)!r}")
    if out.exists() and not overwrite:
        raise InvalidInputError(f"--out {str(out)!r} already exists; pass --overwrite to replace it, or another path")
