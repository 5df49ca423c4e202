"""Saving matplotlib figures reproducibly: no timestamps or version stamps in the files, so
the same figure gives the same bytes (report, equivariance, training curves, prior preview)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

_VECTOR = ("pdf", "svg", "eps", "ps")
#: Metadata entries set to None are left out of the file (PNG: software; PDF: creator,
#: producer, creation date; SVG: creator, date).
_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}


def _layout_once(figure: Figure) -> None:
    """Run the layout engine once and freeze it, so every file shows the same layout."""
    figure.draw_without_rendering()
    figure.set_layout_engine("none")


def _write(figure: Figure, path: Path, dpi: float, tight: bool) -> None:
    fmt = path.suffix.lower().lstrip(".")
    figure.savefig(path, dpi="figure" if fmt in _VECTOR else dpi, metadata=_METADATA.get(fmt), bbox_inches="tight" if tight else None,
                   facecolor="white")


def save_image(figure: Figure, path: str | Path, dpi: float = 200) -> Path:
    """Write ``figure`` to ``path`` (its suffix picks the format: .png, .pdf, .svg, ...; ``dpi``
    applies to raster formats), creating the folder; close the figure; return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _layout_once(figure)
    _write(figure, path, dpi, tight=False)
    plt.close(figure)
    return path


def save_figure(figure: Figure, stem: str | Path, dpi: float = 200, tight: bool = False) -> list[Path]:
    """Write ``stem``.png (at ``dpi``) and ``stem``.pdf with one layout (cropped to the drawn content when
    ``tight``), creating the folder; close the figure; return both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [Path(f"{stem}.png"), Path(f"{stem}.pdf")]
    _layout_once(figure)
    for path in paths:
        _write(figure, path, dpi, tight)
    plt.close(figure)
    return paths
