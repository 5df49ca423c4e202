"""`equibench download`: fetch OpenML tasks into a portable cache in openml's own layout.

Each task is fetched through openml-python into a private staging folder
(``DIR/.equibench-partial/``), checked there (see cache_check), and only then moved file by
file into ``DIR/org/openml/www`` with atomic renames, the dataset's files first and
``task.xml`` last. ``DIR/equibench-download.json`` records what was written (see
cache_manifest). So a kill at any moment leaves only complete files behind, a rerun skips
the tasks that are complete, and a file someone else put in the cache is never replaced.
Transient errors (connection errors, timeouts, 5xx answers, damaged transfers) are retried
with exponential backoff (tenacity), a task at a time: a body cut short, a wrong checksum or a
failed check shows only once the files are in, past what urllib3's ``Retry`` of one request
can see. The cache is the one openml reads for www.openml.org, whichever server the files
came from, so `equibench evaluate --openml-cache DIR` uses it offline.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from time import sleep
from xml.parsers.expat import ExpatError

from filelock import FileLock, Timeout
from rich.console import Console
from rich.filesize import decimal
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from ..errors import InvalidInputError, UnsupportedTaskError, first_line
from ..progress import Progress
from .cache_check import DATASET_FILES, TASK_FILES, TaskCheck, check_task, server_dir
from .cache_manifest import Manifest, file_digest
from .suites import load_suite

DEFAULT_SERVER = "https://www.openml.org/api/v1/xml"
PARTIAL_DIR = ".equibench-partial"
LOCK_FILE = ".equibench-download.lock"
MAX_BACKOFF_S = 60.0


@dataclass(frozen=True)
class DownloadOptions:
    server: str = DEFAULT_SERVER  # OpenML REST API base URL
    retries: int = 4  # further attempts at a task after a transient error
    backoff_s: float = 2.0  # wait before the first retry; doubles with each retry (at most 60 s)
    timeout_s: float = 60.0  # of each HTTP request: connecting, and each wait for data

    def __post_init__(self) -> None:
        if not self.server.startswith(("http://", "https://")) or "/api/" not in self.server:
            raise InvalidInputError(f"`server` must be an OpenML API URL like {DEFAULT_SERVER}, got {self.server!r}")
        if self.retries < 0:
            raise InvalidInputError(f"`retries` must be 0 or more, got {self.retries}")
        if not self.backoff_s >= 0:
            raise InvalidInputError(f"`backoff_s` must be 0 or more seconds, got {self.backoff_s}")
        if not self.timeout_s > 0:
            raise InvalidInputError(f"`timeout_s` must be a positive number of seconds, got {self.timeout_s}")


@dataclass
class TaskDownload:
    check: TaskCheck  # what the cache now holds for the task
    status: str  # "downloaded", "cached" (complete before this run), "failed", "built-in" (a demo task)
    error: str | None = None
    attempts: int = 0


@dataclass
class DownloadSummary:
    cache: Path
    results: list[TaskDownload] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [result.check.task_id for result in self.results if result.status == "failed"]


class _BrokenDownload(Exception):
    """The fetched files of a task do not pass the cache check (a damaged transfer: retried)."""


def select_tasks(suite: str | None, tasks: list[str] | None = None) -> list[str]:
    """The task ids to fetch: the suite's, or only ``tasks`` (which must be in the suite, if one is given)."""
    if suite is None and not tasks:
        raise InvalidInputError("name the tasks to fetch: a `suite` (gt10, le10 or a suite file) and/or `tasks` (OpenML task ids)")
    if suite is None:
        return list(dict.fromkeys(tasks))
    task_ids = list(load_suite(suite).task_ids)
    if not tasks:
        return task_ids
    unknown = [task_id for task_id in tasks if task_id not in task_ids]
    if unknown:
        raise InvalidInputError(f"`tasks` {','.join(unknown)} not in suite {suite!r} (its tasks: {', '.join(task_ids)})")
    return list(dict.fromkeys(tasks))


def _is_transient(error: BaseException) -> bool:
    import requests
    from openml.exceptions import OpenMLHashException, OpenMLServerError, OpenMLServerException

    if isinstance(error, OpenMLServerException):  # an answer of the API: unknown task, private data, ...
        return error.code == 107  # except "database connection error"
    return isinstance(
        error, (requests.RequestException, OpenMLServerError, OpenMLHashException, ExpatError, _BrokenDownload,
                ConnectionError, TimeoutError),
    )


def _raise_if_busy(response, *args, **kwargs):
    """A session's response hook: a 5xx or 429 answer (busy or failing: worth a retry) raised as
    an HTTP error, where openml would try to parse its body as an API error."""
    import requests

    if response.status_code >= 500 or response.status_code == 429:
        raise requests.HTTPError(f"{response.status_code} {response.reason} from {response.url}", response=response)


def _openml_requests(timeout_s: float):
    """``requests`` as openml's HTTP calls see it during a download: the same module, but its
    sessions wait at most ``timeout_s`` for the server to connect or send data (a transport
    adapter's default) and raise 5xx/429 answers (a response hook).

    Why openml's private name ``_api_calls.requests`` is replaced: openml 0.15.1 (the latest
    release) opens a new ``requests.Session()`` per call in ``_api_calls._send_request``, sends
    it without a timeout, and takes no session, adapter or timeout setting (``openml.config``
    has only the retry settings; a timeout setting is proposed in openml/openml-python pull
    request 1651, not merged); requests has no default timeout. Patching this one name for the
    download's duration is the narrowest patch: patching ``requests.Session`` would change every
    session of the process. Drop it for openml's own timeout setting once a release has one."""
    import types

    import requests
    from requests.adapters import HTTPAdapter

    class TimeoutAdapter(HTTPAdapter):
        def send(self, request, timeout=None, **kwargs):
            return super().send(request, timeout=timeout_s if timeout is None else timeout, **kwargs)

    def session() -> requests.Session:
        session = requests.Session()
        adapter = TimeoutAdapter()
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        session.hooks["response"].append(_raise_if_busy)
        return session

    return types.SimpleNamespace(**{**vars(requests), "Session": session})


@contextmanager
def _openml_session(root: Path, options: DownloadOptions):
    """openml configured to fetch from ``options.server`` into the root cache ``root``, with no
    retries of its own (:func:`download_tasks` retries), no API key (public data only, and no
    key sent to a mirror), ARFF rather than parquet data, and sessions with a timeout on every
    request that raise 5xx/429 answers as HTTP errors (:func:`_openml_requests`); all as it was after."""
    from unittest import mock

    import openml
    from openml import _api_calls

    config = openml.config
    with ExitStack() as restore:
        for name, value in (("server", options.server), ("apikey", ""), ("connection_n_retries", 1),
                            ("show_progress", False)):
            restore.enter_context(mock.patch.object(config, name, value))
        restore.enter_context(mock.patch.dict(os.environ, {"OPENML_SKIP_PARQUET": "true"}))
        restore.enter_context(mock.patch.object(_api_calls, "requests", _openml_requests(options.timeout_s)))
        restore.callback(config.set_root_cache_directory, config.get_config_as_dict()["cachedir"])
        config.set_root_cache_directory(root)
        yield Path(config.get_cache_directory())


def _fetch(task_id: str, stage: Path, options: DownloadOptions) -> tuple[Path, TaskCheck]:
    """Fetch every file of the task into the root cache ``stage``; (its server folder, the check of the files)."""
    import openml

    with _openml_session(stage, options) as root:
        openml.tasks.get_task(
            int(task_id), download_splits=True, download_data=True, download_qualities=True,
            download_features_meta_data=True,
        )
    check = check_task(root, task_id, deep=True)
    if check.unsupported:
        raise UnsupportedTaskError(check.describe())  # not retried
    if not check.ok:
        raise _BrokenDownload(check.describe())
    return root, check


def _install_order(name: str) -> tuple[int, int]:
    """Dataset files, then the splits, then task.xml (openml's first look for a task)."""
    base = name.rsplit("/", 1)[-1]
    return (0, DATASET_FILES.index(base)) if name.startswith("datasets/") else (1, TASK_FILES.index(base))


def _install(stage_root: Path, root: Path, check: TaskCheck, manifest: Manifest) -> list[str]:
    """Move the checked files of a task from ``stage_root`` into the cache ``root``; return the
    files left as they were because someone else put a different copy there."""
    moves, conflicts = [], []
    for name in sorted(check.files, key=_install_order):
        source, target = stage_root / name, root / name
        if target.is_file():
            if file_digest(target) == file_digest(source):
                continue
            if name not in manifest.files:
                conflicts.append(name)
                continue
        moves.append(name)
    for name in moves:  # recorded before the renames: a kill between them leaves files that are ours
        path = stage_root / name
        manifest.files[name] = {"sha256": file_digest(path), "bytes": path.stat().st_size}
    manifest.save()
    for name in moves:
        source, target = stage_root / name, root / name
        with source.open("rb") as handle:  # on disk before the rename makes it part of the cache
            os.fsync(handle.fileno())
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
    return conflicts


def _record_task(manifest: Manifest, check: TaskCheck) -> None:
    manifest.tasks[check.task_id] = {
        "dataset_id": check.dataset_id, "name": check.name, "rows": check.rows, "features": check.features,
        "classes": check.classes, "files": check.files,
    }
    manifest.save()


def _complete(cache: Path, task_id: str, manifest: Manifest) -> TaskCheck | None:
    """The check of a task the cache already holds completely, else None. A task recorded by
    an earlier download is compared by checksum; one put there otherwise is checked in full."""
    root = server_dir(cache)
    entry = manifest.tasks.get(task_id)
    if entry is not None:
        check = check_task(root, task_id, deep=False, manifest=manifest, checksums=True)
        if check.ok and set(check.files) == set(entry["files"]):
            check.rows, check.features, check.classes = entry["rows"], entry["features"], entry["classes"]
            return check
        return None
    check = check_task(root, task_id, deep=True, manifest=manifest)
    if not check.ok:
        return None
    _record_task(manifest, check)
    return check


def _reason(error: BaseException) -> str:
    from openml.exceptions import OpenMLServerException

    if isinstance(error, OpenMLServerException):
        return f"the server answered error {error.code} ({error.message}) for {error.url}"
    return first_line(error)


def _download_task(task_id: str, cache: Path, manifest: Manifest, options: DownloadOptions, log) -> TaskDownload:
    if task_id.startswith("demo-"):
        return TaskDownload(TaskCheck(task_id, name=task_id.removeprefix("demo-")), "built-in")
    if (done := _complete(cache, task_id, manifest)) is not None:
        return TaskDownload(done, "cached")
    attempts = options.retries + 1

    def announce(state: RetryCallState) -> None:
        log(f"task {task_id}: {_reason(state.outcome.exception())}; retrying in {state.next_action.sleep:g} s "
            f"(attempt {state.attempt_number + 1} of {attempts})")

    retrying = Retrying(
        retry=retry_if_exception(_is_transient), stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=options.backoff_s, max=MAX_BACKOFF_S), before_sleep=announce,
        sleep=sleep, reraise=True,
    )
    try:
        download = retrying(_attempt_task, task_id, cache, manifest, options)
    except Exception as error:  # noqa: BLE001 - openml raises many kinds; each is a row, not a crash
        attempt = retrying.statistics["attempt_number"]
        reason = _reason(error)
        if _is_transient(error):
            reason = f"gave up after {attempt} attempts; last error {reason}"
        return TaskDownload(check_task(server_dir(cache), task_id, deep=False), "failed", reason, attempt)
    download.attempts = retrying.statistics["attempt_number"]
    return download


def _attempt_task(task_id: str, cache: Path, manifest: Manifest, options: DownloadOptions) -> TaskDownload:
    """One attempt at a task: fetch it into a staging folder of its own, check it, install it."""
    stage = Path(tempfile.mkdtemp(dir=cache / PARTIAL_DIR, prefix=f"task-{task_id}-"))
    try:
        stage_root, check = _fetch(task_id, stage, options)
        conflicts = _install(stage_root, server_dir(cache), check, manifest)
        if conflicts:
            check = check_task(server_dir(cache), task_id, deep=True, manifest=manifest)
            if not check.ok:
                return TaskDownload(check, "failed", (
                    f"{', '.join(conflicts)} in the cache differ from the server's copy and were not written by "
                    f"equibench, so they were left as they are, and the task fails the check with them "
                    f"({check.describe()}); move them away and rerun"
                ))
        _record_task(manifest, check)
        return TaskDownload(check, "downloaded")
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def download_tasks(
    task_ids: list[str], cache: str | os.PathLike, options: DownloadOptions = DownloadOptions(),
    progress: bool = True, console: Console | None = None,
) -> DownloadSummary:
    """Fetch the OpenML tasks ``task_ids`` into the root cache directory ``cache`` (created if
    missing); tasks already complete there are kept. Demo tasks need nothing and are listed
    as built-in. One process at a time writes a cache (a lock file says so)."""
    cache = Path(cache)
    if cache.exists() and not cache.is_dir():
        raise InvalidInputError(f"`cache` {str(cache)!r} is a file; pass a folder (it is created if missing)")
    console = console or Console(stderr=True)
    try:
        (cache / PARTIAL_DIR).mkdir(parents=True, exist_ok=True)
        lock = FileLock(cache / LOCK_FILE).acquire(timeout=0)
    except Timeout:
        raise InvalidInputError(f"another download is writing {str(cache)!r}; wait for it to finish") from None
    except OSError as error:
        raise InvalidInputError(f"cannot write to the cache folder {str(cache)!r} ({error.strerror}); pass a writable folder") from None
    with lock:
        for leftover in (cache / PARTIAL_DIR).iterdir():  # staging folders of a killed download
            shutil.rmtree(leftover, ignore_errors=True)
        manifest = Manifest.load(cache)
        summary = DownloadSummary(cache)
        columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("[red]{task.fields[failed]} failed"), TimeElapsedColumn()]
        with Progress(*columns, console=console, disable=not progress, name="download") as bar:
            job = bar.add_task("download", total=len(task_ids), failed=0)

            def log(line: str) -> None:
                bar.console.print(escape(line), highlight=False)

            for task_id in task_ids:
                bar.update(job, description=f"task {task_id}")
                summary.results.append(_download_task(task_id, cache, manifest, options, log))
                bar.update(job, advance=1, failed=len(summary.failed))
            bar.update(job, description="download")
    return summary


def _count(value: int | None) -> str:
    return "" if value is None else str(value)


STATUS_STYLE = {"downloaded": "green", "cached": "green", "built-in": "dim", "ok": "green", "failed": "red",
                "missing": "red", "broken": "red"}


def tasks_table(rows: list[tuple[TaskCheck, str]], title: str) -> Table:
    """task, dataset, rows, features, classes, size, status of each (check, status)."""
    table = Table("task", "dataset", "rows", "features", "classes", "size", "status", title=title)
    for check, status in rows:
        dataset = f"{check.name} ({check.dataset_id})" if check.dataset_id is not None else check.name
        table.add_row(check.task_id, escape(dataset), _count(check.rows), _count(check.features),
                      _count(check.classes), decimal(check.size_bytes) if check.size_bytes else "",
                      f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]")
    return table
