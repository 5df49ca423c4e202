"""`equibench download` and `--verify` against a local OpenML-compatible server (tests/openml_server.py),
and `evaluate` on the downloaded cache with no server at all."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from openml_server import Fault, OpenMLServer, fixture_task, tasks_from_cache
from rich.console import Console
from shared_cache import SHARED_CACHE, needs_shared_cache
from typer.testing import CliRunner

from equibench.cli import app
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.tasks import download as download_module
from equibench.tasks.cache_check import check_cache, server_dir
from equibench.tasks.cache_manifest import MANIFEST
from equibench.tasks.download import PARTIAL_DIR, DownloadOptions, download_tasks

DATA = Path(__file__).parents[1] / "data"
TASKS = [fixture_task(101, 201, n_rows=120, n_classes=3, seed=0), fixture_task(102, 202, n_rows=150, n_classes=4, seed=1),
         fixture_task(103, 203, n_rows=90, n_classes=2, seed=2)]
TASK_IDS = [str(task.task_id) for task in TASKS]


def _documents() -> dict[str, str]:
    return {path: body for task in TASKS for path, body in task.documents.items()}


def _options(server: OpenMLServer, **changes) -> DownloadOptions:
    return DownloadOptions(**{"server": server.url, "retries": 2, "backoff_s": 0.01, "timeout_s": 5.0, **changes})


def _served(server: OpenMLServer) -> dict[str, bytes]:
    """The bytes of each served document, by the name of the file openml stores it in."""
    names = {"splits.arff": "datasplits.arff", ".arff": "dataset.arff", "features": "features.xml",
             "qualities": "qualities.xml", "/task/": "task.xml", "/data/": "description.xml"}
    files = {}
    for task in TASKS:
        for path, body in task.documents.items():
            name = next(value for key, value in names.items() if key in path)
            folder = f"tasks/{task.task_id}" if name in ("task.xml", "datasplits.arff") else f"datasets/{task.dataset_id}"
            files[f"{folder}/{name}"] = body.replace("{BASE}", server.base).encode()
    return files


def _assert_only_complete_files(cache: Path, server: OpenMLServer) -> None:
    """Every file in the cache's openml folder is byte-identical to what the server sends."""
    served = _served(server)
    for path in server_dir(cache).rglob("*"):
        if path.is_file():
            assert path.read_bytes() == served[path.relative_to(server_dir(cache)).as_posix()], path


def test_a_full_download_fills_a_cache_that_verifies_and_a_rerun_fetches_nothing(tmp_path):
    with OpenMLServer(_documents()) as server:
        summary = download_tasks([*TASK_IDS, "demo-iris"], tmp_path / "cache", _options(server), progress=False)
        assert [r.status for r in summary.results] == ["downloaded"] * 3 + ["built-in"] and not summary.failed
        for result, task in zip(summary.results, TASKS, strict=False):
            check = result.check
            assert (check.dataset_id, check.name, check.rows, check.features, check.classes) == (
                task.dataset_id, task.name, task.rows, task.features, task.classes)
            assert check.size_bytes == sum(len(body) for name, body in _served(server).items()
                                           if name.startswith((f"tasks/{task.task_id}/", f"datasets/{task.dataset_id}/")))
        _assert_only_complete_files(tmp_path / "cache", server)
        assert len(list(server_dir(tmp_path / "cache").rglob("*.*"))) == 18  # 6 files per task, no pickles
        assert all(check.ok for check in check_cache(tmp_path / "cache", TASK_IDS))
        assert not list((tmp_path / "cache" / PARTIAL_DIR).iterdir())
        asked = len(server.requests)
        again = download_tasks(TASK_IDS, tmp_path / "cache", _options(server), progress=False)
        assert [r.status for r in again.results] == ["cached"] * 3
        assert [r.check.rows for r in again.results] == [task.rows for task in TASKS]
        assert len(server.requests) == asked  # nothing fetched again


def test_the_cli_downloads_a_suite_file_verifies_it_and_names_missing_tasks(tmp_path):
    (tmp_path / "suite.toml").write_text(f"tasks = [{', '.join(TASK_IDS)}, 104]\n")
    runner = CliRunner()
    with OpenMLServer(_documents()) as server:
        args = ["download", "--suite", str(tmp_path / "suite.toml"), "--cache", str(tmp_path / "cache"),
                "--server", server.url, "--no-progress", "--retries", "0"]
        result = runner.invoke(app, args)
        assert result.exit_code == 1
        assert "missing tasks: 104" in result.output and "error 151" in result.output
        assert "fixture-202" in result.output and "downloaded" in result.output
        result = runner.invoke(app, [*args, "--tasks", ",".join(TASK_IDS)])
        assert result.exit_code == 0, result.output
        assert result.output.count("cached") == 3 and "cache complete" in result.output
        result = runner.invoke(app, ["download", "--tasks", "999", "--cache", str(tmp_path / "cache"), "--suite",
                                     str(tmp_path / "suite.toml")])
        assert result.exit_code == 2 and "--tasks 999 not in suite" in result.output
    result = runner.invoke(app, ["download", "--verify", str(tmp_path / "cache")])
    assert result.exit_code == 0, result.output
    assert "all 3 tasks complete" in result.output
    result = runner.invoke(app, ["download", "--verify", str(tmp_path / "cache"), "--suite", str(tmp_path / "suite.toml")])
    assert result.exit_code == 1 and "task 104: not in the cache" in result.output
    assert f"equibench download --cache {tmp_path / 'cache'} --tasks 104" in result.output.replace("\n", "")
    result = runner.invoke(app, ["download", "--suite", "gt10"])
    assert result.exit_code == 2 and "--cache DIR is required" in result.output


def test_a_download_killed_midway_resumes_without_refetching_what_is_complete(tmp_path):
    cache = tmp_path / "cache"
    with OpenMLServer(_documents()) as server:
        server.fail("/data/v1/download/202/", Fault("hang"))  # the second task's data never finishes
        command = [sys.executable, "-m", "equibench.cli", "download", "--tasks", ",".join(TASK_IDS),
                   "--cache", str(cache), "--server", server.url, "--no-progress"]
        # outside the checkout, so that `-m` finds the installed package, not the source tree
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp_path)
        deadline = time.monotonic() + 120
        while not server.asked("/data/v1/download/202/") and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.poll() is None, process.communicate()[0].decode()
        process.send_signal(signal.SIGKILL)
        process.wait()
        checks = {check.task_id: check for check in check_cache(cache, TASK_IDS)}
        assert checks["101"].ok and checks["102"].status == "missing" and checks["103"].status == "missing"
        _assert_only_complete_files(cache, server)  # nothing half-written in the cache proper
        assert list((cache / PARTIAL_DIR).iterdir())  # the staging folder of task 102 was left behind
        server.release()
        before = server.asked("/201")
        summary = download_tasks(TASK_IDS, cache, _options(server), progress=False)
        assert [r.status for r in summary.results] == ["cached", "downloaded", "downloaded"]
        assert server.asked("/201") == before  # the complete task was not fetched again
        assert not list((cache / PARTIAL_DIR).iterdir())
        _assert_only_complete_files(cache, server)
    assert all(check.ok for check in check_cache(cache, TASK_IDS))


def test_a_failing_server_is_retried_with_backoff_then_recovers(tmp_path, monkeypatch):
    waits = []
    monkeypatch.setattr(download_module, "sleep", waits.append)
    with OpenMLServer(_documents()) as server:
        server.fail("/task/101", Fault("status", 503), Fault("status", 500))
        server.fail("/data/v1/download/202/", Fault("stall", seconds=4.0))  # longer than the timeout
        server.fail("/api_splits/get/103/", Fault("truncate"))
        server.fail("/data/features/203", Fault("status", 502))
        summary = download_tasks(TASK_IDS, tmp_path / "cache", _options(server, timeout_s=2.0), progress=False)
        assert [r.status for r in summary.results] == ["downloaded"] * 3
        assert [r.attempts for r in summary.results] == [3, 2, 3]
        assert waits == [0.01, 0.02, 0.01, 0.01, 0.02]  # doubling per task, reset for the next one
        assert not any(server.faults.values())
        _assert_only_complete_files(tmp_path / "cache", server)

        # a server that keeps failing: the task is reported missing, and a later run completes it
        server.fail("/task/102", *[Fault("status", 503)] * 3)
        summary = download_tasks(["102"], tmp_path / "other", _options(server), progress=False)
        assert summary.failed == ["102"]
        assert "gave up after 3 attempts" in summary.results[0].error and "503" in summary.results[0].error
        summary = download_tasks(["102"], tmp_path / "other", _options(server), progress=False)
        assert summary.results[0].status == "downloaded"


def test_the_waits_double_up_to_60_s_and_each_retry_is_announced(tmp_path, monkeypatch):
    waits = []
    monkeypatch.setattr(download_module, "sleep", waits.append)
    output = io.StringIO()
    with OpenMLServer(_documents()) as server:
        server.fail("/task/101", *[Fault("status", 503)] * 3)
        summary = download_tasks(["101"], tmp_path / "cache", _options(server, retries=3, backoff_s=20.0),
                                 progress=False, console=Console(file=output, soft_wrap=True))
    assert [(r.status, r.attempts) for r in summary.results] == [("downloaded", 4)]
    assert waits == [20.0, 40.0, 60.0]  # doubling, at most MAX_BACKOFF_S
    lines = output.getvalue().splitlines()
    assert [line.split("; ", 1)[1] for line in lines] == [
        "retrying in 20 s (attempt 2 of 4)", "retrying in 40 s (attempt 3 of 4)", "retrying in 60 s (attempt 4 of 4)"]
    assert all(line.startswith("task 101: HTTPError: 503 Service Unavailable from ") for line in lines)


def test_the_timeout_and_the_5xx_errors_apply_to_openmls_sessions_only(tmp_path):
    """No process-wide patch of requests: during a download, another caller's session still
    gets a 503 as an answer and waits as long as it asks; openml's sessions raise it and time out."""
    import requests
    from openml import _api_calls

    request = requests.Session.request
    with OpenMLServer(_documents()) as server:
        server.fail("/task/101", Fault("status", 503), Fault("status", 503), Fault("stall", seconds=2.0))
        url = f"{server.url}/task/101"
        with download_module._openml_session(tmp_path, _options(server, timeout_s=0.5)):
            assert requests.Session.request is request
            assert requests.get(url).status_code == 503
            with pytest.raises(requests.HTTPError, match="503"):
                _api_calls.requests.Session().get(url)
            started = time.monotonic()
            with pytest.raises(requests.Timeout):
                _api_calls.requests.Session().get(url)
            assert time.monotonic() - started < 1.5
        assert _api_calls.requests is requests and not any(server.faults.values())


def test_openmls_settings_are_restored_after_a_download_that_raises(tmp_path, monkeypatch):
    """The server, key, retries, cache folder, parquet setting and requests of openml are as they
    were after the download, also when it raised."""
    import openml
    import requests
    from openml import _api_calls

    config = openml.config
    monkeypatch.setenv("OPENML_SKIP_PARQUET", "no")
    before = (config.server, config.apikey, config.connection_n_retries, config.show_progress,
              config.get_config_as_dict()["cachedir"])
    with pytest.raises(KeyboardInterrupt):
        with download_module._openml_session(tmp_path, DownloadOptions(server="http://127.0.0.1:9/api/v1/xml")):
            assert (config.server, config.apikey, config.connection_n_retries) == ("http://127.0.0.1:9/api/v1/xml", "", 1)
            assert os.environ["OPENML_SKIP_PARQUET"] == "true" and _api_calls.requests is not requests
            raise KeyboardInterrupt
    assert (config.server, config.apikey, config.connection_n_retries, config.show_progress,
            config.get_config_as_dict()["cachedir"]) == before
    assert os.environ["OPENML_SKIP_PARQUET"] == "no" and _api_calls.requests is requests


def test_unknown_and_unsupported_tasks_fail_at_once_without_retries(tmp_path, monkeypatch):
    monkeypatch.setattr(download_module, "sleep", lambda s: pytest.fail("a permanent error is not retried"))
    documents = _documents()
    documents["/api/v1/xml/task/103"] = documents["/api/v1/xml/task/103"].replace(
        "<oml:task_type_id>1<", "<oml:task_type_id>2<").replace("Supervised Classification", "Supervised Regression")
    with OpenMLServer(documents) as server:
        summary = download_tasks(["999", "103"], tmp_path / "cache", _options(server), progress=False)
    assert summary.failed == ["999", "103"] and [r.attempts for r in summary.results] == [1, 1]
    assert "error 151" in summary.results[0].error
    assert "'Supervised Regression' task, not supervised classification" in summary.results[1].error
    assert not server_dir(tmp_path / "cache").exists()  # nothing of either was installed


def test_bad_download_options_are_one_line_errors(tmp_path):
    (tmp_path / "file").write_text("")
    runner = CliRunner()
    cases = [
        (["--cache", str(tmp_path / "file"), "--tasks", "5"], "is a file"),
        (["--cache", str(tmp_path / "c"), "--tasks", "5", "--server", "ftp://x"], "--server must be an OpenML API URL"),
        (["--cache", str(tmp_path / "c"), "--tasks", "5", "--retries", "-1"], "--retries must be 0 or more"),
        (["--cache", str(tmp_path / "c")], "name the tasks to fetch"),
        (["--verify", str(tmp_path)], "is not an OpenML cache"),
        (["--suite", "nope", "--cache", str(tmp_path / "c")], "neither a built-in suite"),
    ]
    for args, message in cases:
        result = runner.invoke(app, ["download", *args])
        assert result.exit_code == 2 and message in result.output, (args, result.output)
        assert "Traceback" not in result.output


def test_verify_detects_corrupted_files_and_the_fix_command_repairs_them(tmp_path):
    cache = tmp_path / "cache"
    runner = CliRunner()
    with OpenMLServer(_documents()) as server:
        download_tasks(TASK_IDS, cache, _options(server), progress=False)
        data = server_dir(cache) / "datasets/201/dataset.arff"
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])  # truncated
        splits = server_dir(cache) / "tasks/102/datasplits.arff"
        text = splits.read_text()
        splits.write_text(text.replace("TEST,", "TRAIN,", 1).replace("TRAIN,", "TEST,", 2).replace("TEST,", "TRAIN,", 1))
        description = server_dir(cache) / "datasets/203/description.xml"
        same_size = description.read_bytes().replace(b"seeded test", b"seeded Test")  # parses, but not the original
        description.write_bytes(same_size)
        checks = {check.task_id: check for check in check_cache(cache, TASK_IDS)}
        assert {task_id: check.status for task_id, check in checks.items()} == {"101": "broken", "102": "broken", "103": "broken"}
        assert any("datasets/201/dataset.arff changed" in p for p in checks["101"].problems)
        assert any("dataset.arff has" in p or "not a readable ARFF" in p for p in checks["101"].problems)
        assert any("in several" in p or "in no test fold" in p for p in checks["102"].problems)
        assert checks["103"].problems == [
            "datasets/203/description.xml changed since it was downloaded (size or checksum differs)"]

        result = runner.invoke(app, ["download", "--verify", str(cache)])
        assert result.exit_code == 1 and "broken" in result.output
        fix = result.output.replace("\n", "").split("fix: ", 1)[1].strip()
        assert fix == f"equibench download --cache {cache} --tasks 101,102,103"
        result = runner.invoke(app, [*fix.split()[1:], "--server", server.url, "--no-progress"])
        assert result.exit_code == 0, result.output
    assert all(check.ok for check in check_cache(cache, TASK_IDS))
    assert runner.invoke(app, ["download", "--verify", str(cache)]).exit_code == 0


def test_files_equibench_did_not_write_are_never_replaced(tmp_path):
    cache = tmp_path / "cache"
    with OpenMLServer(_documents()) as server:
        download_tasks(["101"], cache, _options(server), progress=False)
        (cache / MANIFEST).unlink()  # as if the files had been put there by hand
        data = server_dir(cache) / "datasets/201/dataset.arff"
        data.write_text(data.read_text().replace("@DATA", "@DATA\n1,2,3,red,c9", 1))  # an undeclared class
        before = data.read_bytes()
        summary = download_tasks(["101"], cache, _options(server), progress=False)
    assert summary.failed == ["101"] and "were not written by equibench" in summary.results[0].error
    assert data.read_bytes() == before


def test_evaluate_runs_on_the_downloaded_cache_with_no_server(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    with OpenMLServer(_documents()) as server:
        download_tasks(TASK_IDS, cache, _options(server), progress=False)
    (tmp_path / "suite.yaml").write_text(f"name: fixtures\ntasks: [{', '.join(TASK_IDS)}, 104]\n")

    def no_network(*args, **kwargs):
        raise OSError("network access is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    output = io.StringIO()
    config = EvaluateConfig(
        suite=str(tmp_path / "suite.yaml"), methods=("knn", "decision-tree"), folds=(0, 1), openml_cache=str(cache),
        weights={"equitabpfn": str(DATA / "tiny-equitabpfn.pt"), "tabpfn-star": str(DATA / "tiny-tabpfn-star.pt")},
    )
    summary = evaluate(config, tmp_path / "out", progress=False, console=Console(file=output, soft_wrap=True))
    assert "lacks 1 of the suite's 4 OpenML tasks (104)" in output.getvalue()
    assert set(summary.missing) == {"104"} and not summary.task_errors  # missing, not failed: no rows
    table = pd.read_csv(tmp_path / "out" / "results.csv", dtype={"task_id": str})
    assert "104" not in set(table.task_id)
    done = table
    assert len(done) == 3 * 2 * 2 and set(done.status) == {"ok"}
    for task in TASKS:
        rows = done[done.task_id == str(task.task_id)]
        assert set(rows.n_classes) == {task.classes}
        assert set(rows.n_test + rows.n_val + rows.n_train) == {task.rows}
    assert np.isfinite(done.accuracy).all()


def test_evaluate_names_the_tasks_its_cache_lacks_before_any_cell_runs(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    with OpenMLServer(_documents()) as server:
        download_tasks(["101"], cache, _options(server), progress=False)
    (tmp_path / "suite.yaml").write_text("tasks: [101, 102, demo-iris]\n")
    config = EvaluateConfig(suite=str(tmp_path / "suite.yaml"), methods=("knn",), folds=(0,), openml_cache=str(cache))
    output = io.StringIO()
    monkeypatch.setattr("equibench.evaluate.run._prepare", lambda *a, **k: pytest.fail("the warning comes before tasks load"))
    with pytest.raises(pytest.fail.Exception):
        evaluate(config, tmp_path / "out", progress=False, console=Console(file=output, soft_wrap=True))
    text = output.getvalue()
    assert "lacks 1 of the suite's 2 OpenML tasks (102)" in text
    assert f"`download_tasks(cache='{cache}', task_ids=['102'])`" in text


@needs_shared_cache("59", "3022")
def test_tasks_served_from_the_shared_cache_download_identically(tmp_path):
    documents = tasks_from_cache(SHARED_CACHE, [59, 3022])  # iris; vowel (an ignored attribute)
    with OpenMLServer(documents) as server:
        summary = download_tasks(["59", "3022"], tmp_path / "cache", _options(server), progress=False)
    assert [r.status for r in summary.results] == ["downloaded"] * 2
    assert [(r.check.name, r.check.rows, r.check.features, r.check.classes) for r in summary.results] == [
        ("iris", 150, 4, 3), ("vowel", 990, 12, 11)]
    for relative in ("datasets/61/dataset.arff", "tasks/59/datasplits.arff", "datasets/307/dataset.arff"):
        assert (server_dir(tmp_path / "cache") / relative).read_bytes() == (server_dir(SHARED_CACHE) / relative).read_bytes()
