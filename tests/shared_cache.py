"""The read-only OpenML cache some tests read (the shared one beside the checkout, or the
folder ``EQUIBENCH_TEST_OPENML_CACHE`` names), and the skip that says how to provide one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

VARIABLE = "EQUIBENCH_TEST_OPENML_CACHE"
SHARED_CACHE = Path(os.environ.get(VARIABLE, Path(__file__).resolve().parents[2] / "shared" / "data" / "openml-cache"))


def missing_reason(cache: Path, task_ids: tuple[str, ...]) -> str | None:
    """Why ``cache`` cannot serve the OpenML tasks ``task_ids``, and how to provide a cache
    that can; None when it holds them all."""
    missing = [task for task in task_ids if not (cache / "org" / "openml" / "www" / "tasks" / task).is_dir()]
    if not missing:
        return None
    tasks = ",".join(task_ids)
    return (f"needs an OpenML cache holding task(s) {tasks}; {cache} lacks {','.join(missing)}: set {VARIABLE}=DIR, "
            f"an OpenML cache folder with them (fill one with `equibench download --tasks {tasks} --cache DIR`)")


def needs_shared_cache(*task_ids: str) -> pytest.MarkDecorator:
    """Skip the test unless the shared cache holds the OpenML tasks ``task_ids``, saying how to provide one."""
    reason = missing_reason(SHARED_CACHE, task_ids)
    return pytest.mark.skipif(reason is not None, reason=reason or "")
