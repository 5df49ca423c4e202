"""Table writing: Markdown and booktabs LaTeX of string cells, and the three table files."""

from __future__ import annotations

import pandas as pd

from equibench.tables import latex_table, markdown_escape, markdown_table, write_table

DISPLAY = pd.DataFrame({
    "method": ["TabPFN* (ECOC >10)", "a_b & 50% | #1"],
    "accuracy (%)": ["81.2 ± 0.4", "n/a"],
    "speed-up": ["2.00×", "-0.5"],
})


def test_markdown_right_aligns_numbers_and_escapes_cells():
    assert markdown_table(DISPLAY).splitlines() == [
        "| method | accuracy (%) | speed-up |",
        "| --- | ---: | ---: |",
        r"| TabPFN\* (ECOC >10) | 81.2 ± 0.4 | 2.00× |",
        r"| a_b & 50% \| #1 | n/a | -0.5 |",
    ]
    assert markdown_escape("one\n  line | *") == r"one line \| \*"


def test_latex_is_booktabs_with_escaped_cells():
    assert latex_table(DISPLAY).splitlines() == [
        r"\begin{tabular}{lrr}",
        r"\toprule",
        r"method & accuracy (\%) & speed-up \\",
        r"\midrule",
        r"TabPFN* (ECOC $>$10) & 81.2 $\pm$ 0.4 & 2.00$\times$ \\",
        r"a\_b \& 50\% | \#1 & n/a & -0.5 \\",
        r"\bottomrule",
        r"\end{tabular}",
    ]


def test_write_table_writes_markdown_latex_and_csv(tmp_path):
    raw = pd.DataFrame({"accuracy_pct": [81.2, None]}, index=pd.Index(["x", "y"], name="entry"))
    markdown = write_table(DISPLAY, raw, tmp_path / "tables" / "demo")
    assert (tmp_path / "tables" / "demo.md").read_text() == markdown == markdown_table(DISPLAY)
    assert (tmp_path / "tables" / "demo.tex").read_text() == latex_table(DISPLAY)
    assert (tmp_path / "tables" / "demo.csv").read_text() == "entry,accuracy_pct\nx,81.2\ny,\n"
