"""``equibench report``: tables, figures and REPORT.md from stored cells.

Modules: ``build`` (``build_report``: read the cells, write REPORT.md), ``tables`` (the
report's tables from cells) and ``figures`` (its box plots, critical-difference diagrams
and bubble plots).
"""

from .build import build_report

__all__ = ["build_report"]
