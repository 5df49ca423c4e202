"""Writing tables of string cells: GitHub Markdown, booktabs LaTeX (pandas' Styler, with
escaping) and the three files of a report table."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

_NUMERIC_CELL = re.compile(r"-?\d|n/a$")
#: Symbols written in math mode after Styler's LaTeX escaping (which leaves them as text).
_LATEX_MATH = {"<": "$<$", ">": "$>$", "±": r"$\pm$", "×": r"$\times$"}


def markdown_escape(text: str) -> str:
    """Text safe inside a Markdown table cell or sentence (on one line)."""
    return " ".join(text.split()).replace("|", r"\|").replace("*", r"\*")


def _right_aligned(display: pd.DataFrame) -> list[bool]:
    """Per column: whether every cell is a number (or "n/a"), to be right-aligned."""
    return [all(_NUMERIC_CELL.match(str(cell)) for cell in display[column]) for column in display.columns]


def markdown_table(display: pd.DataFrame) -> str:
    """A GitHub Markdown table of the cells as strings (numbers right-aligned); the index is not written."""
    header = "| " + " | ".join(markdown_escape(str(name)) for name in display.columns) + " |"
    rule = "|" + "|".join(" ---: " if right else " --- " for right in _right_aligned(display)) + "|"
    body = ["| " + " | ".join(markdown_escape(str(cell)) for cell in row) + " |" for row in display.itertuples(index=False)]
    return "\n".join([header, rule, *body]) + "\n"


def _latex_text(escaped: str) -> str:
    """One line, with the symbols LaTeX text fonts may lack set in math mode (after escaping)."""
    return "".join(_LATEX_MATH.get(char, char) for char in " ".join(escaped.split()))


def latex_table(display: pd.DataFrame) -> str:
    """A booktabs ``tabular`` of the cells as strings (numbers right-aligned, LaTeX specials
    escaped); the index is not written."""
    styler = display.astype(str).style.hide(axis="index")
    styler = styler.format(_latex_text, escape="latex").format_index(_latex_text, escape="latex", axis=1)
    columns = "".join("r" if right else "l" for right in _right_aligned(display))
    return styler.to_latex(column_format=columns, hrules=True)


def write_table(display: pd.DataFrame, raw: pd.DataFrame, stem: Path) -> str:
    """Write ``stem``.md and .tex (from ``display``) and .csv (from ``raw``); return the Markdown."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    markdown = markdown_table(display)
    Path(f"{stem}.md").write_text(markdown)
    Path(f"{stem}.tex").write_text(latex_table(display))
    raw.to_csv(f"{stem}.csv", lineterminator="\n")
    return markdown
