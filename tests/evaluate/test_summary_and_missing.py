"""What `equibench evaluate` tells a newcomer: where it writes by default, that the committed
results resume, the summary at the end, the running cell and the time left, and tasks that
are missing (not in the OpenML cache, no server) named once per cause, never as failed rows."""

from __future__ import annotations

import io
import json
import shutil
import socket
import time
from pathlib import Path

import pandas as pd
import pytest
from openml_server import OpenMLServer, fixture_task
from rich.console import Console
from rich.progress import Progress, TimeRemainingColumn
from typer.testing import CliRunner

from equibench.cli import app
from equibench.cli.evaluation import default_out
from equibench.evaluate import EvaluateConfig, evaluate
from equibench.evaluate.config import prepared_settings, run_fingerprint
from equibench.evaluate.progress import CellsRemainingColumn
from equibench.evaluate.results_store import ResultsStore
from equibench.evaluate.run_manifest import methods_to_rerun
from equibench.tasks.cache_check import server_dir
from equibench.tasks.download import DownloadOptions, download_tasks
from equibench.tasks.openml import TaskNotCachedError, TaskUnavailableError, load_task
from equibench.tasks.suites import load_suite

ROOT = Path(__file__).parents[2]
RESULTS = ROOT / "results"
TASKS = [fixture_task(101, 201, n_rows=120, n_classes=3, seed=0), fixture_task(102, 202, n_rows=90, n_classes=2, seed=2)]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """An OpenML cache holding the fixture tasks 101 and 102 (read it, never write it)."""
    root = tmp_path_factory.mktemp("openml") / "cache"
    documents = {path: body for task in TASKS for path, body in task.documents.items()}
    with OpenMLServer(documents) as server:
        options = DownloadOptions(server=server.url, retries=1, backoff_s=0.01, timeout_s=5.0)
        assert not download_tasks(["101", "102"], root, options, progress=False).failed
    return root


@pytest.fixture
def offline(monkeypatch):
    """No network: every connection fails at once, as on a machine without one."""
    def refuse(*args, **kwargs):
        raise OSError("network access is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _suite(tmp_path: Path, tasks: str, name: str = "fixtures") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\ntasks: [{tasks}]\n")
    return path


# -- where it writes, and the committed results ---------------------------------------------

def test_the_default_output_is_a_user_folder_never_the_committed_results(tmp_path, monkeypatch):
    assert default_out("gt10") == Path("runs/gt10")
    assert default_out("results/suites/gt10-cached.toml") == Path("runs/gt10-cached")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--jobs", "1",
                                      "--no-progress"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "demo" / "results.csv").is_file() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("folder, suite", [("demo", "demo"), ("gt10", "results/suites/gt10-cached.toml"),
                                           ("le10", "results/suites/le10-cached.toml")])
def test_the_committed_manifests_say_how_their_cells_were_made_and_resume(folder, suite, monkeypatch):
    """Every method of the committed folders records its threads per cell (1, as
    results/README.md states), so the README's commands resume them instead of being refused."""
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    manifest = json.loads((RESULTS / folder / "manifest.json").read_text())
    methods = manifest["settings"]["methods"]
    assert {fingerprint.get("threads_per_cell") for fingerprint in methods.values()} == {1}
    assert "threads_per_cell 1" in manifest["migrations"][0]["change"]
    config = EvaluateConfig(suite=str(ROOT / suite) if suite.endswith(".toml") else suite)
    current = run_fingerprint(config, prepared_settings(config), load_suite(config.suite))
    stored = {row["method"] for row in ResultsStore(RESULTS / folder).rows()}
    assert methods_to_rerun(RESULTS / folder, manifest["settings"], current, stored, tuple(methods),
                            rerun_changed=False) == []


def test_a_copy_of_the_committed_demo_results_resumes_with_nothing_to_run(tmp_path):
    copy = tmp_path / "demo"
    shutil.copytree(RESULTS / "demo", copy)
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--folds", "0", "--out",
                                      str(copy), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "6 cells, 0 to run" in result.stdout


# -- the summary at the end, the progress while it runs -------------------------------------

def test_the_run_ends_with_counts_accuracy_skip_reasons_and_the_next_command(tmp_path, monkeypatch):
    monkeypatch.delenv("EQUIBENCH_TABPFN_WEIGHTS", raising=False)
    out = tmp_path / "demo-eval"
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn,tabpfn-v1,tabpfn-v2", "--folds",
                                      "0", "--jobs", "1", "--out", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "demo: 18 cells (0 already done); this run: 6 ok, 12 skipped"
    knn = next(line for line in lines if "│ knn" in line).replace("│", " ").split()
    accuracy = pd.read_csv(out / "results.csv").query("method == 'knn'").accuracy.mean()
    assert knn == ["knn", "6", "0", "0", f"{accuracy:.3f}"]
    skipped = [line for line in lines if "skipped:" in line]
    assert skipped == [f"{name}: 6 cells skipped: no weights: pass --weights {name}=DIR or set EQUIBENCH_TABPFN_WEIGHTS: "
                       f"a folder with the TabPFN {name[-2:]} weights ({folder})" for name, folder in (
                           ("tabpfn-v1", "models_diff/prior_diff_real_checkpoint_n_0_epoch_42.cpkt"),
                           ("tabpfn-v2", "tabpfn-v2-classifier*.ckpt"))]
    assert lines[-1] == f"next: equibench report --results {out} --out {out / 'report'}"
    assert result.stderr == ""  # nothing went wrong, and no bar with --no-progress


def test_progress_names_the_running_cell_and_the_time_left_from_the_first_cell_on(tmp_path):
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160, color_system=None)
    evaluate(EvaluateConfig(suite="demo", methods=("knn",), folds=(0,)), tmp_path, console=console)
    text = screen.getvalue()
    assert "running on 1 worker: demo-iris knn fold 0" in text and "running on 1 worker: demo-digits knn fold 0" in text
    assert "6/6" in text and "ETA 0:00:00" in text
    progress = Progress()
    task_id = progress.add_task("cells", total=10)
    time.sleep(0.01)
    progress.advance(task_id)
    task = progress.tasks[0]
    assert TimeRemainingColumn().render(task).plain == "-:--:--"  # rich's own needs two samples within 30 s
    assert CellsRemainingColumn().render(task).plain.count(":") == 2


def test_the_summary_of_a_run_has_a_short_repr(tmp_path):
    summary = evaluate(EvaluateConfig(suite="demo", methods=("knn", "linear-model"), folds=(0,)), tmp_path,
                       progress=False)
    text = repr(summary)
    assert "\n" not in text and len(text) < 200 and "12 cells (ok=12, skipped=0, failed=0)" in text
    assert "knn, linear-model" in text and str(tmp_path) in text and "Cell(" not in text
    assert summary.methods()["knn"]["ok"] == 6 and 0 < summary.methods()["knn"]["accuracy"] <= 1
    assert len(summary.table()) == 12


# -- missing tasks: not cached, no server --------------------------------------------------

def test_missing_tasks_are_named_once_per_cause_and_write_no_rows(tmp_path, cache, offline, monkeypatch):
    import equibench.evaluate.plan as plan_module

    suite = _suite(tmp_path, "101, 104, 102, 105")
    asked = []
    load = plan_module.load_task
    monkeypatch.setattr(plan_module, "load_task", lambda task_id, *a: asked.append(task_id) or load(task_id, *a))
    out = tmp_path / "out"
    key = "fixtures__104__fold0__knn__default"  # a failed row an older equibench wrote for a missing task
    ResultsStore(out).write(key, {"suite": "fixtures", "task_id": "104", "fold": 0, "method": "knn",
                                  "variant": "default", "status": "failed", "reason": "not in the cache"})
    args = ["evaluate", "--suite", str(suite), "--methods", "knn", "--folds", "0", "--jobs", "1",
            "--openml-cache", str(cache), "--out", str(out), "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output  # every cell that could run is ok
    assert asked == ["101", "104", "102"]  # the server is not asked again once it was unreachable
    errors = result.stderr.splitlines()
    missing = [line for line in errors if line.startswith("missing:")]
    assert missing == [f"missing: 2 of 4 fixtures tasks are not in the OpenML cache '{cache}' and the OpenML server "
                       "could not be reached (ConnectionError): 104, 105; 2 cells were not run"]
    next_step = [line for line in errors if line.startswith("to run them:")]
    assert len(next_step) == 1 and f"equibench download --suite {suite} --cache {cache}" in next_step[0]
    assert "task 104" not in result.output and "tracebacks" not in result.output
    table = pd.read_csv(out / "results.csv", dtype={"task_id": str})
    assert sorted(table.task_id) == ["101", "102"] and set(table.status) == {"ok"}  # no failed rows
    assert not (out / "cells" / f"{key}.json").exists()
    assert json.loads((out / "manifest.json").read_text())["invocations"][-1]["missing_tasks"] == ["104", "105"]
    assert "│ knn    │  2 │       0 │      0 │       2 │" in result.stdout
    dry = CliRunner().invoke(app, [*args, "--dry-run"])
    assert dry.exit_code == 0 and "4 cells, 0 to run, 2 missing" in dry.stdout


def test_nothing_loadable_is_one_line_exit_2_and_no_folder(tmp_path, offline, monkeypatch):
    import openml

    empty = tmp_path / "empty"
    server_dir(empty).mkdir(parents=True)
    suite = _suite(tmp_path, "104, 105")
    out = tmp_path / "runs" / "out"
    result = CliRunner().invoke(app, ["evaluate", "--suite", str(suite), "--methods", "knn", "--openml-cache",
                                      str(empty), "--out", str(out)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(
        f"error: nothing can run: 2 of 2 fixtures tasks are not in the OpenML cache '{empty}' and the OpenML server "
        "could not be reached")
    assert f"equibench download --suite {suite} --cache DIR" in result.stderr and "--openml-cache DIR" in result.stderr
    assert not out.exists()
    # without --openml-cache: openml's own cache, said so
    monkeypatch.delenv("OPENML_CACHE_DIR", raising=False)
    monkeypatch.setattr(openml.config, "_root_cache_directory", tmp_path / "own")
    with pytest.raises(ValueError, match=r"not in openml's own cache .*own' \(no `openml_cache` given\)"):
        evaluate(EvaluateConfig(suite=str(suite), methods=("knn",)), out, progress=False)
    assert not out.exists()


def _cut(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


#: (file of task 101, damage): each makes openml fail differently; a garbage datasplits.arff makes
#: openml delete the task's folder, a halved one loads with rows in no fold
DAMAGES = {
    "appended row": ("datasets/201/dataset.arff", lambda path: path.write_text(path.read_text() + "1,2,x,@@@\n")),
    "truncated data": ("datasets/201/dataset.arff", _cut),
    "garbage task.xml": ("tasks/101/task.xml", lambda path: path.write_bytes(b"\x00garbage<<<")),
    "garbage splits": ("tasks/101/datasplits.arff", lambda path: path.write_bytes(b"garbage")),
    "truncated splits": ("tasks/101/datasplits.arff", _cut),
}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_cached_file_is_named_never_called_missing(tmp_path, cache, offline, damage):
    name, spoil = DAMAGES[damage]
    damaged = Path(shutil.copytree(cache, tmp_path / "damaged"))
    spoil(server_dir(damaged) / name)
    with pytest.raises(TaskUnavailableError) as raised:
        load_task(101, damaged)
    assert not isinstance(raised.value, TaskNotCachedError)
    message = str(raised.value)
    assert f"{server_dir(damaged) / name} " in message and "not in the cache" not in message
    assert f"`check_cache(cache='{damaged}', task_ids=['101'])`" in message
    assert load_task(102, damaged).n_folds == 10  # an intact task of the same cache


def test_loading_keeps_every_file_of_the_cache_and_leaves_no_folder_of_its_own(tmp_path, cache, offline):
    copy = Path(shutil.copytree(cache, tmp_path / "copy"))
    (copy / "notes.txt").write_text("mine")  # a user's file beside openml's
    (server_dir(copy) / "tasks" / "101" / "mine.txt").write_text("mine too")
    DAMAGES["garbage task.xml"][1](server_dir(copy) / "tasks" / "102" / "task.xml")
    before = {path.relative_to(copy) for path in copy.rglob("*") if path.is_file()}
    assert load_task(101, copy).n_folds == 10
    with pytest.raises(TaskUnavailableError):
        load_task(102, copy)
    after = {path.relative_to(copy) for path in copy.rglob("*") if path.is_file()}
    assert {Path("notes.txt"), server_dir(Path()) / "tasks" / "101" / "mine.txt"} <= after
    assert {path for path in before if path.parts[-3:-1] != ("tasks", "102")} <= after  # openml's own removal aside
    assert not list(copy.glob(".equibench-kept-*"))


@pytest.mark.parametrize("damage", ["appended row", "garbage task.xml"])
def test_a_damaged_cached_task_is_a_failure_naming_the_file(tmp_path, cache, offline, damage):
    damaged = tmp_path / "damaged"
    shutil.copytree(cache, damaged)
    name, spoil = DAMAGES[damage]
    data = server_dir(damaged) / name
    spoil(data)
    suite = _suite(tmp_path, "101, 102")
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["evaluate", "--suite", str(suite), "--methods", "knn", "--folds", "0", "--jobs",
                                      "1", "--openml-cache", str(damaged), "--out", str(out), "--no-progress"])
    assert result.exit_code == 1, result.output
    assert "missing:" not in result.output and "tracebacks" not in result.output
    assert "lacks" not in result.output and "not in the" not in result.output  # held, damaged: not missing
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "damaged or incomplete files of 1 of the suite's 2" in warned[0]
    assert f"Check them with `equibench download --verify {damaged} --tasks 101`" in warned[0]  # the library's line, in flags
    named = [line for line in result.stderr.splitlines() if line.startswith("task 101 cannot be loaded:")]
    assert len(named) == 1 and str(data) in named[0]  # the file of the cache given, not of its working copy
    assert f"equibench download --verify {damaged} --tasks 101" in named[0]
    table = pd.read_csv(out / "results.csv", dtype={"task_id": str}).set_index("task_id")
    assert table.loc["101", "status"] == "failed" and str(data) in table.loc["101", "reason"]
    assert table.loc["102", "status"] == "ok"


def test_user_facing_text_names_no_sibling_folder():
    """Paths like ../shared/... exist on the machines the results were made on, not a user's."""
    for path in (ROOT / "docs" / "EVALUATE.md", ROOT / "results" / "README.md"):
        assert "../shared" not in path.read_text(), path
    for command in ("evaluate", "download"):
        assert "shared/" not in CliRunner().invoke(app, [command, "--help"]).stdout, command


def test_two_suites_of_the_same_name_do_not_share_a_results_folder(tmp_path, monkeypatch):
    """Two different suite files named alike both default to runs/<name>: the second is refused
    with one line instead of being merged into the first's results."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    (tmp_path / "first" / "mine.toml").write_text('name = "mine"\ntasks = ["demo-iris"]\n')
    (tmp_path / "second" / "mine.toml").write_text('name = "mine"\ntasks = ["demo-wine"]\n')
    runner = CliRunner()
    first = runner.invoke(app, ["evaluate", "--suite", "first/mine.toml", "--methods", "knn", "--folds", "0", "--jobs", "1",
                                "--no-progress"])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["evaluate", "--suite", "second/mine.toml", "--methods", "knn", "--folds", "0", "--jobs", "1",
                                 "--no-progress"])
    assert second.exit_code == 2 and second.stderr.count("\n") == 1
    assert ("holds results of suite 'mine', and this suite adds 1 task (demo-wine) and drops 1 (demo-iris) (its file "
            "changed since, or another suite has its name)") in second.stderr
    again = runner.invoke(app, ["evaluate", "--suite", "first/mine.toml", "--methods", "knn", "--folds", "0", "--jobs", "1",
                                "--no-progress"])
    assert again.exit_code == 0, again.output  # the same suite resumes


def test_a_suite_file_that_gained_a_task_says_what_changed_and_the_choices(tmp_path):
    """A task added to the suite file after a run, rerun with the same --out: the line says which
    task was added and what to do, where it said "pass --out for this one" though --out was given;
    the same tasks in another order resume."""
    suite, out = tmp_path / "mine.toml", str(tmp_path / "out")
    suite.write_text('tasks = ["demo-iris", "demo-wine"]\n')
    command = ["evaluate", "--suite", str(suite), "--methods", "knn", "--folds", "0", "--jobs", "1", "--no-progress",
               "--out", out]
    runner = CliRunner()
    assert runner.invoke(app, command).exit_code == 0
    suite.write_text('tasks = ["demo-iris", "demo-wine", "demo-digits"]\n')
    result = runner.invoke(app, command)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {out!r} holds results of suite 'mine', and this suite adds 1 task "
                                    "(demo-digits) (its file changed since, or another suite has its name); a results "
                                    "folder holds one task list: pass a new --out for this suite (all its cells run "
                                    "there), or restore the former task list to resume here; to run only the added "
                                    "tasks, put them in a suite of their own with a new --out")
    assert "pass --out for this one" not in result.stderr
    suite.write_text('tasks = ["demo-wine", "demo-iris"]\n')
    result = runner.invoke(app, command)
    assert result.exit_code == 0 and "(2 already done); this run: nothing new" in result.stdout, result.output
