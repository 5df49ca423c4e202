"""Where tasks come from: built-in demo tasks, the paper's suites, an offline OpenML cache,
your own CSV/parquet files, and ``equibench download`` / ``--verify`` of such a cache.
"""

from .._lazy import lazy_exports

# Loaded on first use: `equibench suites` reads the suites without numpy, pandas or scikit-learn.
_LAZY = {
    "check_cache": "cache_check",
    "DownloadOptions": "download", "DownloadSummary": "download", "download_tasks": "download",
    "BUILTIN_SUITES": "suites", "GT10": "suites", "LARGE": "suites", "Suite": "suites", "load_suite": "suites", "load_task": "suites",
    "Task": "task", "demo_task": "task",
}

# The public names (docs/API.md); the others of _LAZY are importable but internal.
__all__ = [
    "BUILTIN_SUITES", "DownloadOptions", "DownloadSummary", "Suite", "Task", "check_cache", "demo_task",
    "download_tasks", "load_suite", "load_task",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
