"""Where tasks come from: built-in demo tasks, the paper's suites, an offline OpenML cache,
your own CSV/parquet files, and ``equibench download`` / ``--verify`` of such a cache.

Modules: ``task`` (a task and its folds, the demo tasks), ``suites`` (suites and task ids),
``openml`` (a task from an OpenML cache), ``user_data`` (a task from a table file),
``download``, ``cache_check`` and ``cache_manifest`` (fetching and checking a cache).
"""

from .cache_check import check_cache
from .download import DownloadOptions, DownloadSummary, download_tasks
from .openml import working_cache
from .suites import BUILTIN_SUITES, GT10, Suite, load_suite, load_task
from .task import DEMO_TASKS, Task, demo_task, stratified_folds

__all__ = [
    "BUILTIN_SUITES", "DEMO_TASKS", "GT10", "DownloadOptions", "DownloadSummary", "Suite", "Task", "check_cache",
    "demo_task", "download_tasks", "load_suite", "load_task", "stratified_folds", "working_cache",
]
