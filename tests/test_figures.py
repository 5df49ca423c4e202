"""Reproducible figure files: the same figure gives the same bytes, and the figure is closed."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from equibench.figures import save_figure, save_image


def _draw(figure: Figure) -> Figure:
    axes = figure.subplots()
    axes.plot([0, 1, 2], [1, 3, 2], label="line")
    axes.imshow([[0, 1], [1, 0]], extent=(0, 2, 0, 2))
    axes.legend()
    figure.suptitle("a figure")
    return figure


def test_png_and_pdf_are_byte_identical_across_saves(tmp_path):
    first = save_figure(_draw(Figure(layout="constrained")), tmp_path / "a" / "figure", dpi=50)
    second = save_figure(_draw(Figure(layout="constrained")), tmp_path / "b" / "figure", dpi=50)
    assert [path.name for path in first] == ["figure.png", "figure.pdf"]
    for one, two in zip(first, second):
        assert one.read_bytes() == two.read_bytes(), one.name
    pdf = first[1].read_bytes()
    assert b"CreationDate" not in pdf and b"Matplotlib" not in pdf
    assert b"Software" not in first[0].read_bytes()


def test_pyplot_figures_are_closed_and_single_images_written(tmp_path):
    figure = _draw(plt.figure())
    save_figure(figure, tmp_path / "pyplot", tight=True)
    assert not plt.fignum_exists(figure.number)
    path = save_image(_draw(Figure()), tmp_path / "deep" / "image.svg")
    assert path == tmp_path / "deep" / "image.svg" and path.read_text().startswith("<?xml")
    assert "<dc:date>" not in path.read_text()
