"""Option types and parsers that several commands share."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import InvalidInputError
from . import output
from .completion import complete_weights

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def int_list(text: str, option: str) -> tuple[int, ...]:
    """``"0,1,2"`` or ``"0-2"`` (or a mix) given to the flag ``option`` -> (0, 1, 2)."""
    values = []
    for part in filter(None, (p.strip() for p in text.split(","))):
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
    from ..baselines.registry import METHODS

    methods = "; ".join(f"{name}={spec.weights.metavar}: {spec.weights.what}"
                        + (f", default ${spec.weights.env}" if spec.weights.env else "")
                        for name, spec in METHODS.items() if spec.weights is not None)
    return (f"A method's weights, as METHOD=PATH; repeat the option for several methods. {methods}. A method "
            "that needs weights and has none is skipped, with why.")


WeightsOption = Annotated[Optional[list[str]], typer.Option(metavar="METHOD=PATH", help=_weights_help(), show_default=False,
                                                            autocompletion=complete_weights)]

#: The per-method flags that ``--weights`` replaced, by parameter name (``tabpfn_weights`` is
#: ``--tabpfn-weights``), and the methods whose weights each gives. Hidden, they work for one
#: release, each with a deprecation line.
OLD_WEIGHTS_FLAGS = {
    "tabpfn_weights": ("tabpfn-v1", "tabpfn-v2"),
    "tabicl_checkpoint": ("tabicl",),
    "official_checkpoint": ("equitabpfn-official",),
    "equitabpfn_checkpoint": ("equitabpfn",),
    "tabpfn_star_checkpoint": ("tabpfn-star",),
}
OldPathFlag = Annotated[Optional[Path], typer.Option(hidden=True)]  # the old folder and file flags
OldCheckpointFlag = Annotated[Optional[str], typer.Option(hidden=True)]  # --equitabpfn-checkpoint, --tabpfn-star-checkpoint


def weights_map(values: list[str] | None, **old) -> dict[str, str]:
    """``--weights`` values (``METHOD=PATH``, each method once) as ``MethodOptions.weights``, with
    those of the deprecated flags ``old`` (by parameter name, see :data:`OLD_WEIGHTS_FLAGS`), each
    announced by a deprecation line on stderr; refused unless each names a method that takes weights."""
    from ..baselines.registry import METHODS, check_weights, weights_methods

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
    for name, path in old.items():
        if path is None:
            continue
        flag, methods = "--" + name.replace("_", "-"), OLD_WEIGHTS_FLAGS[name]
        instead = " ".join(f"--weights {method}={METHODS[method].weights.metavar}" for method in methods)
        both = [method for method in methods if method in weights]
        if both:
            raise InvalidInputError(f"{flag} and --weights {both[0]}=... both give {both[0]}'s weights; keep {instead}")
        output.errors.print(f"[yellow]deprecated:[/yellow] {flag} goes in the next release; write {instead}",
                            highlight=False)
        weights.update(dict.fromkeys(methods, str(path)))
    check_weights(weights)
    return weights
