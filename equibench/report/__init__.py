"""``equibench report``: tables, figures and REPORT.md from stored cells (docs/ARCHITECTURE.md
lists the modules)."""

from .build import build_report

__all__ = ["build_report"]
