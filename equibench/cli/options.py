"""Option types and parsers that several commands share."""

from __future__ import annotations

from typing import Annotated

import typer

from ..errors import InvalidInputError

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
