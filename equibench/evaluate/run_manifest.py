"""``manifest.json`` of an evaluation's results folder: the settings its numbers depend on
(checked before a run resumes) and one entry per invocation (command, versions, machine).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import shlex
import subprocess
import sys
from collections import Counter
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from ..atomic_files import atomic_write_text
from ..errors import InvalidInputError
from ..machine import cpu_name

MANIFEST = "manifest.json"
_PACKAGES = ("equibench", "torch", "numpy", "pandas", "scikit-learn", "openml", "xgboost-cpu", "xgboost",
             "rtdl-revisiting-models", "pytorch-tabnet", "tabpfn", "tabicl")


def read_manifest(path: Path) -> dict:
    """manifest.json, checked: an InvalidInputError names the file and what to do when it is damaged."""
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest, dict) or not isinstance(manifest.get("invocations"), list):
            raise InvalidInputError("no 'invocations' list")
        settings = manifest.get("settings")
        if (not isinstance(settings, dict) or "seed" not in settings or not isinstance(settings.get("methods"), dict)
                or not isinstance(settings.get("suite"), dict)):
            raise InvalidInputError("no 'settings' with 'seed', 'methods' and 'suite'")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InvalidInputError(
            f"{str(path)!r} is damaged ({error}); move it aside (the stored cells are kept, only the run history "
            "and the settings check are lost) or pass a new `out_dir`"
        ) from None
    return manifest


def methods_to_rerun(out_dir: Path, saved: dict, current: dict, stored: set[str], run_methods,
                     rerun_changed: bool) -> list[str]:
    """The methods of this run whose stored cells the settings ``current`` must replace; an
    InvalidInputError when the run cannot resume on ``saved``'s cells, or when some must be
    replaced and ``rerun_changed`` is false. Stored methods outside ``run_methods`` are never
    replaced (this run would not make their cells again): they keep their recorded settings."""
    if set(saved["suite"]["tasks"]) != set(current["suite"]["tasks"]):  # an order change is none
        raise InvalidInputError(_other_tasks(out_dir, saved["suite"], current["suite"]))
    changed = sorted(k for k, v in saved.get("tables", {}).items() if current["tables"].get(k, v) != v)
    if changed:
        raise InvalidInputError(
            f"{str(out_dir)!r} holds results of {', '.join(changed)} made from table files whose content has "
            "changed since; pass a new `out_dir` (or restore the files) to keep results consistent"
        )
    if saved["seed"] != current["seed"]:
        raise InvalidInputError(f"{str(out_dir)!r} holds results made with seed {saved['seed']}; rerun with it to "
                                "resume, or pass a new `out_dir`")
    before, now = saved["methods"], current["methods"]
    stale = sorted(name for name in stored if name in run_methods and before.get(name, {}) != now[name])
    if stale and not rerun_changed:
        if all(_without_threads(before.get(name, {})) == _without_threads(now[name]) for name in stale):
            threads = sorted({before.get(name, {}).get("threads_per_cell") for name in stale})
            resume = "rerun each method with its own to resume" if len(threads) > 1 else "rerun with it to resume"
            raise InvalidInputError(
                f"{str(out_dir)!r} holds results made with `threads_per_cell` {', '.join(map(str, threads))} (threads "
                f"change the numbers); {resume}, pass `rerun_changed=True` to rerun them all with `threads_per_cell` "
                f"{now[stale[0]]['threads_per_cell']}, or a new `out_dir`")
        raise InvalidInputError(
            f"{str(out_dir)!r} holds results of {', '.join(stale)} made with different settings (another "
            "checkpoint, context cap, preprocessing, weights or threads per cell); pass `rerun_changed=True` to replace them, "
            "the original settings to resume, or a new `out_dir`"
        )
    return stale


def _other_tasks(out_dir: Path, saved: dict, now: dict) -> str:
    """Why a folder holding results of the task list ``saved`` (a manifest's ``suite``) cannot
    take those of ``now``: what differs, and the choices."""
    added = [task for task in now["tasks"] if task not in saved["tasks"]]
    dropped = [task for task in saved["tasks"] if task not in now["tasks"]]

    def listed(tasks: list) -> str:
        return ", ".join(map(str, tasks[:5])) + (f" and {len(tasks) - 5} more" if len(tasks) > 5 else "")

    changes = [f"adds {len(added)} task{'s' if len(added) > 1 else ''} ({listed(added)})"] if added else []
    changes += [f"drops {len(dropped)} ({listed(dropped)})"] if dropped else []
    what = " and ".join(changes)
    why = ("its file changed since, or another suite has its name" if saved["name"] == now["name"]
           else f"this is suite {now['name']!r}")
    return (f"{str(out_dir)!r} holds results of suite {saved['name']!r}, and this suite {what} ({why}); "
            "a results folder holds one task list: pass a new `out_dir` for this suite (all its cells run there), "
            "or restore the former task list to resume here; to run only the added tasks, put them in a suite "
            "of their own with a new `out_dir`, and give both folders to one report (`results_dirs`)")


def recorded_settings(saved: dict, current: dict, kept: set[str]) -> dict:
    """The settings a folder's manifest records after a run: ``current``, except for the
    methods in ``kept`` (stored cells this run leaves as they are), which keep ``saved``'s."""
    before = saved["methods"]
    return {**current, "methods": {**current["methods"], **{name: before[name] for name in kept if name in before}}}


def _without_threads(fingerprint: dict) -> dict:
    return {key: value for key, value in fingerprint.items() if key != "threads_per_cell"}


def start_invocation(out_dir: Path, config, settings: dict, n_cells: int, n_pending: int) -> int:
    """Record ``settings`` and a new invocation of ``config`` (a dataclass); its index."""
    path = out_dir / MANIFEST
    manifest = read_manifest(path) if path.exists() else {"invocations": []}
    manifest["settings"] = settings
    manifest["invocations"].append({
        "command": shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": dataclasses.asdict(config),
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "cells": n_cells, "pending": n_pending,
        "versions": _versions(), "git_sha": _git_sha(),
        "machine": {"cpu": cpu_name(), "cpu_count": os.cpu_count(), "platform": platform.platform()},
    })
    _write_json(path, manifest)
    return len(manifest["invocations"]) - 1


def finish_invocation(out_dir: Path, index: int, counts: Counter, interrupted: bool = False,
                      missing: list[str] | None = None) -> None:
    """Record the end of invocation ``index``: when, the rows it wrote by status and the
    ``missing`` tasks whose cells it could not run (not in the OpenML cache, no server)."""
    path = out_dir / MANIFEST
    manifest = read_manifest(path)
    invocation = manifest["invocations"][index]
    invocation["interrupted" if interrupted else "finished"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    invocation["written"] = dict(counts)
    if missing:
        invocation["missing_tasks"] = list(missing)
    _write_json(path, manifest)


def _versions() -> dict:
    versions = {"python": platform.python_version()}
    for package in _PACKAGES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[package] = metadata.version(package)
    return versions


def _git_sha() -> str | None:
    try:
        result = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() or None if result.returncode == 0 else None


def _write_json(path: Path, data: dict) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=str) + "\n")
