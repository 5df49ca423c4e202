"""The one error mapping: every deliberate error of a command is one ``error:`` line with
the library's parameters written as flags, and exit status 2 (bad input) or 1 (failure); the
library's messages name parameters, never flags."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from equibench.cli import app
from equibench.cli.failures import Command, CommandGroup, with_flags
from equibench.errors import (
    FolderInUseError,
    InvalidInputError,
    NonFiniteLossError,
    TaskUnavailableError,
)

ERRORS = {
    "bad-count": InvalidInputError("`jobs` must be at least 1, got 0"),
    "changed": ValueError("made with `threads_per_cell=1`, not 2; pass `rerun_changed=True` to rerun every cell"),
    "renamed": InvalidInputError("`timeout_s` must be a positive number of seconds, got 0"),
    "prose": InvalidInputError("the jobs of this run must be fewer; rows stay as they are"),
    "path": InvalidInputError("'runs/threads_per_cell/log.jsonl' and 'x.threads_per_cell' are damaged"),
    "denied": PermissionError(13, "Permission denied", "/no/write"),
    "in-use": FolderInUseError("'out' is in use by process 7 on host; wait for it to finish"),
    "unavailable": TaskUnavailableError("task 3 is neither in the cache nor on the server"),
    "diverged": NonFiniteLossError("step 5: the training loss is nan"),
    "nothing-loads": InvalidInputError("nothing can run: 2 of 2 le10 tasks are not in the OpenML cache 'c' and the "
                                       "OpenML server could not be reached (ConnectionError). Next: point `openml_cache` "
                                       "at your OpenML cache folder (DIR); then rerun this command with `openml_cache` DIR"),
    "device": InvalidInputError("this torch cannot use MPS here; use `device='auto'` or `device=\"cpu\"`, not `jobs=0`"),
    "config": InvalidInputError("`threads_per_cell` (1) must exceed `jobs`; Other.jobs stays"),
    "switches": InvalidInputError("pass `progress=False`, not `progress=True` or `progress='yes'`"),
    "steps": InvalidInputError("fetch with `download_tasks(task_ids=select_tasks(suite='le10'), cache='my cache')`, "
                               "check with `check_cache(cache='c', task_ids=['5', '7'])`; `equibench run`, `nope` stay"),
}


def _app() -> typer.Typer:
    demo = typer.Typer(cls=CommandGroup)

    @demo.callback()
    def root() -> None:
        """A group, as the equibench app is."""

    @demo.command(cls=Command)  # as every command of the app
    def run(
        error: Annotated[str, typer.Option()],
        jobs: int = 1,
        threads_per_cell: int = 1,
        timeout_s: Annotated[float, typer.Option("--timeout")] = 60.0,
        rerun_changed: bool = False,
        openml_cache: str = "",
        device: str = "cpu",
        progress: bool = True,
    ) -> None:
        raise ERRORS[error]

    return demo


@pytest.mark.parametrize("error, code, line", [
    ("bad-count", 2, "error: --jobs must be at least 1, got 0"),
    ("changed", 2, "error: made with --threads-per-cell=1, not 2; pass --rerun-changed to rerun every cell"),
    ("renamed", 2, "error: --timeout must be a positive number of seconds, got 0"),
    ("prose", 2, "error: the jobs of this run must be fewer; rows stay as they are"),
    ("path", 2, "error: 'runs/threads_per_cell/log.jsonl' and 'x.threads_per_cell' are damaged"),
    ("denied", 2, "error: Permission denied: '/no/write'; choose a folder you can write to, or fix its permissions"),
    ("in-use", 2, "error: 'out' is in use by process 7 on host; wait for it to finish"),
    ("unavailable", 1, "error: task 3 is neither in the cache nor on the server"),
    ("diverged", 1, "error: step 5: the training loss is nan"),
    ("nothing-loads", 2, "error: nothing can run: 2 of 2 le10 tasks are not in the OpenML cache 'c' and the OpenML "
                         "server could not be reached (ConnectionError). Next: point --openml-cache at your OpenML "
                         "cache folder (DIR); then rerun this command with --openml-cache DIR"),
    ("device", 2, "error: this torch cannot use MPS here; use --device=auto or --device=cpu, not --jobs=0"),
    ("config", 2, "error: --threads-per-cell (1) must exceed --jobs; Other.jobs stays"),
    ("switches", 2, "error: pass --no-progress, not --progress or `progress='yes'`"),
    ("steps", 2, "error: fetch with `equibench download --suite le10 --cache 'my cache'`, check with `equibench download "
                 "--verify c --tasks 5,7`; `equibench run`, `nope` stay"),
])
def test_errors_become_one_line_and_an_exit_status(error, code, line):
    result = CliRunner().invoke(_app(), ["run", "--error", error])
    assert result.exit_code == code and result.stdout == ""
    assert result.stderr == line + "\n"


def test_other_exceptions_are_bugs_with_a_traceback():
    ERRORS["bug"] = KeyError("model_")
    try:
        result = CliRunner().invoke(_app(), ["run", "--error", "bug"])
    finally:
        del ERRORS["bug"]
    assert isinstance(result.exception, KeyError) and "error:" not in result.output


def test_library_parameters_are_named_by_the_flags_of_the_app(tmp_path):
    result = CliRunner().invoke(app, ["download", "--cache", str(tmp_path / "c"), "--tasks", "5", "--retries", "-1"])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "retries" in result.stderr and not result.stderr.startswith("error: retries")  # a leading name is a flag
    result = CliRunner().invoke(app, ["prior", "preview", "--out", str(tmp_path / "prior.png"), "--rows", "0"])
    assert result.exit_code == 2 and result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "rows" in result.stderr  # a command of the `prior` group, mapped alike
    result = CliRunner().invoke(app, ["prior", "preview", "--out", str(tmp_path / "prior.png"), "--batches", "0"])
    assert result.exit_code == 2 and result.stderr.startswith("error: --batches must be >= 1, got 0")  # not n_batches


@pytest.mark.parametrize("contexts, line", [
    ("nearest", "--contexts: 'nearest' is not a context strategy; choose from auto, subsample, local (several: e.g. "
                "auto,subsample)"),
    ("auto,auto", "--contexts lists 'auto' more than once; give each once"),
    (",", "--contexts: none given; choose from auto, subsample, local (several: e.g. auto,subsample)"),
])
def test_a_bad_contexts_value_names_the_strategies(contexts, line, tmp_path):
    """Where an unknown strategy read "contexts must be distinct names ...": which value is wrong
    and the valid ones."""
    result = CliRunner().invoke(app, ["evaluate", "--suite", "demo", "--methods", "knn", "--contexts", contexts,
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and result.stderr == f"error: {line}\n"
    assert not (tmp_path / "out").exists()


def test_pretrain_messages_name_its_flags_never_python_syntax(tmp_path):
    """What a CLI user of pretrain reads: flags, never ``resume=True`` or ``PriorConfig.rows``."""
    runner = CliRunner()
    (tmp_path / "empty").mkdir()
    resume = runner.invoke(app, ["pretrain", "--out", str(tmp_path / "empty"), "--resume", "--size", "tiny"])
    assert resume.exit_code == 2 and resume.stderr.count("\n") == 1
    assert resume.stderr.startswith("error: --resume was given but") and "leave out --resume to start" in resume.stderr
    out = ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny"]
    classes = runner.invoke(app, [*out, "--max-classes", "1"])
    assert classes.exit_code == 2 and classes.stderr.startswith("error: --max-classes must be >= 2, got 1")
    rows = runner.invoke(app, [*out, "--rows", "8", "--max-classes", "10"])
    assert rows.exit_code == 2 and rows.stderr.startswith("error: --rows (8) must exceed --max-classes (10)")
    for result in (resume, classes, rows):
        words = re.sub(r"'[^']*'", "", result.stderr)  # the paths quoted aside
        assert not re.search(r"\w=(True|False)\b|Config\.|\b[a-z]+_[a-z_]+\b", words), result.stderr


def test_a_library_error_names_parameters_as_python_does_and_the_cli_as_its_flags(tmp_path):
    """One direction: str() of a library error reads ``name=value`` (what a Python caller
    passes); the CLI writes the same error with the command's flags."""
    from equibench.baselines.registry import check_weight_paths
    from equibench.devices import resolve_device
    from equibench.pretrain.run_dir import load_state

    commands = typer.main.get_command(app).commands
    with pytest.raises(InvalidInputError) as weights:
        check_weight_paths({"tabicl": "nope.ckpt"})
    assert str(weights.value).startswith("`weights={'tabicl': 'nope.ckpt'}`: no such file or folder")
    assert with_flags(str(weights.value), commands["evaluate"]).startswith("--weights tabicl=nope.ckpt: no such file")
    with pytest.raises(FileNotFoundError) as resume:
        load_state(tmp_path)
    assert str(resume.value).startswith("`resume=True` was given but")
    assert with_flags(str(resume.value), commands["pretrain"]).startswith("--resume was given but")
    with pytest.raises(InvalidInputError) as device:
        resolve_device("cuda:99")  # no such device: neither without CUDA nor with it
    assert "`device='auto'`" in str(device.value)
    assert "--device=auto" in with_flags(str(device.value), commands["evaluate"])
    assert "`device='auto'`" in with_flags(str(device.value), commands["report"])  # no such option: as it was


#: The library's message-producing code: every module outside the CLI.
LIBRARY = [path for folder in ("equibench", "model", "baselines")
           for path in sorted((Path(__file__).parents[2] / folder).rglob("*.py")) if "cli" not in path.parts]


@pytest.mark.parametrize("path", LIBRARY, ids=lambda path: str(path.relative_to(path.parents[1])))
def test_library_messages_write_no_flags(path):
    """A string of the library (its docstrings aside, which may document the CLI) never holds
    a flag: the library names parameters, the CLI alone turns them into flags."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    flags = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and id(node) not in docstrings and re.search(r"(?<![\w-])--[a-z]", node.value)]
    assert flags == []


def test_a_reader_that_goes_away_ends_the_command_quietly():
    # as `equibench evaluate --help | head -1` once head has its line: no "error: Broken pipe"
    ERRORS["pipe"] = BrokenPipeError(32, "Broken pipe")
    try:
        result = CliRunner().invoke(_app(), ["run", "--error", "pipe"])
    finally:
        del ERRORS["pipe"]
    assert result.exit_code == 1
    assert "error" not in result.output
