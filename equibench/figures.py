"""Matplotlib figures made and saved reproducibly: no timestamps or version stamps in the files, so
the same figure gives the same bytes (report, equivariance, training curves, prior preview)."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_VECTOR = ("pdf", "svg", "eps", "ps")
#: Metadata entries set to None are left out of the file.
_METADATA = {
    "png": {"Software": None},
    "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
    "svg": {"Creator": None, "Date": None},
}


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches with a constrained layout, on its own Agg canvas."""
    figure = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _save(figure: Figure, paths: list[Path], dpi: float, tight: bool) -> list[Path]:
    """Write ``figure`` to each of ``paths`` with one layout (the layout engine runs once and is
    then frozen, so every file shows the same layout), creating the folder; close the figure."""
    paths[0].parent.mkdir(parents=True, exist_ok=True)
    figure.draw_without_rendering()
    figure.set_layout_engine("none")
    for path in paths:
        fmt = path.suffix.lower().lstrip(".")
        figure.savefig(path, dpi="figure" if fmt in _VECTOR else dpi, metadata=_METADATA.get(fmt),
                       bbox_inches="tight" if tight else None, facecolor="white")
    plt.close(figure)
    return paths


def save_image(figure: Figure, path: str | Path, dpi: float = 200) -> Path:
    """Write ``figure`` to ``path`` (its suffix picks the format: .png, .pdf, .svg, ...; ``dpi``
    applies to raster formats), creating the folder; close the figure; return the path."""
    return _save(figure, [Path(path)], dpi, tight=False)[0]


def save_figure(figure: Figure, stem: str | Path, dpi: float = 200, tight: bool = False) -> list[Path]:
    """Write ``stem``.png (at ``dpi``) and ``stem``.pdf with one layout (cropped to the drawn content when
    ``tight``), creating the folder; close the figure; return both paths."""
    return _save(figure, [Path(f"{stem}.png"), Path(f"{stem}.pdf")], dpi, tight)
