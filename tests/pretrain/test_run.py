"""pretrain(): exact resume after a kill or a time limit, the model card, continued
pretraining (init_from), and the `equibench pretrain` and `export` commands."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import equibench.pretrain.loop as loop_module
from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.cli import app
from equibench.model import load_checkpoint
from equibench.pretrain import pretrain
from equibench.pretrain.curves import read_log
from equibench.prior import PriorConfig

from .common import PRIOR, kill_during_step, log_records, step_losses, tiny_config, validation_at

#: Recipes whose resume must be exact: the paper's, and the study's options (pre-LN, QK-norm,
#: beta2, schedule-free or WSD, a rows curriculum, tree targets in the prior).
RECIPES = {
    "paper": ({}, PRIOR),
    "schedule-free": (
        {"schedule": "schedule-free", "adam_beta2": 0.95, "rows_curriculum": ((4, 64),),
         "model_overrides": {"norm_first": True, "qk_norm": True}},
        PriorConfig(rows=96, tree_fraction=0.5),
    ),
    "wsd": ({"schedule": "wsd", "decay_fraction": 0.5, "model_overrides": {"norm_first": True}}, PRIOR),
}


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_resume_continues_exactly(tmp_path, monkeypatch, recipe):
    changes, prior = RECIPES[recipe]

    def config(**more):
        return tiny_config(**changes, **more)

    pretrain(config(), prior, tmp_path / "straight", progress=False)

    real_sample = kill_during_step(monkeypatch, 5)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(), prior, tmp_path / "resumed", progress=False)
    assert [s for s, _ in step_losses(tmp_path / "resumed")] == [1, 2, 3, 4]  # step 4 is past the checkpoint
    validations = log_records(tmp_path / "straight")
    assert [r["step"] for r in validations if r["kind"] == "validation"] == [0, 3, 6]
    monkeypatch.setattr(loop_module, "sample_batch", real_sample)
    pretrain(config(), prior, tmp_path / "resumed", resume=True, progress=False)

    assert step_losses(tmp_path / "resumed") == step_losses(tmp_path / "straight")
    straight, _ = load_checkpoint(tmp_path / "straight" / "model.pt")
    resumed, card = load_checkpoint(tmp_path / "resumed" / "model.pt")
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    assert card.steps == 6 and card.datasets_seen == 18


def test_time_limit_stops_checkpointed_and_resume_continues_exactly(tmp_path):
    straight = pretrain(tiny_config(), PRIOR, tmp_path / "straight", progress=False)
    assert straight.finished and straight.step == 6
    # a zero limit stops after the first step, which is not a checkpoint step (every 3)
    stopped = pretrain(tiny_config(), PRIOR, tmp_path / "limited", progress=False, time_limit_s=0)
    assert (stopped.step, stopped.steps, stopped.finished) == (1, 6, False)
    assert torch.load(tmp_path / "limited" / "train_state.pt", weights_only=True)["step"] == 1
    assert load_checkpoint(stopped.model_path)[1].steps == 1
    resumed = pretrain(tiny_config(), PRIOR, tmp_path / "limited", resume=True, progress=False, time_limit_s=3600)
    assert resumed.finished
    assert step_losses(tmp_path / "limited") == step_losses(tmp_path / "straight")
    with pytest.raises(ValueError, match="`time_limit_s` must be a non-negative number"):
        pretrain(tiny_config(), PRIOR, tmp_path / "bad", progress=False, time_limit_s=-1)
    assert not (tmp_path / "bad").exists()


@pytest.mark.parametrize("arch, classifier", [("equitabpfn", EquiTabPFNClassifier), ("tabpfn-star", TabPFNStarClassifier)])
def test_checkpoint_to_classifier_round_trip(tmp_path, arch, classifier):
    path = pretrain(tiny_config(arch=arch, steps=2, bundled_validation=True), PRIOR, tmp_path, progress=False).model_path
    _, card = load_checkpoint(path)
    assert card.arch == arch and card.steps == 2 and card.datasets_seen == 6
    assert card.prior["rows"] == 96 and card.training["lr"] == 1e-3 and card.wall_time_s > 0
    assert 0 <= card.metrics["iris_accuracy"] <= 1 and "prior_loss" in card.metrics
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 3
    probabilities = classifier(checkpoint=path, device="cpu").fit(X, y).predict_proba(X)
    assert probabilities.shape == (40, 3) and np.isfinite(probabilities).all()


def test_init_from_continues_from_a_checkpoint(tmp_path):
    first = pretrain(tiny_config(steps=3), PRIOR, tmp_path / "first", progress=False).model_path
    source, source_card = load_checkpoint(first)
    second = pretrain(tiny_config(steps=3, init_from=str(first), seed=1), PRIOR, tmp_path / "second",
                      progress=False).model_path
    _, card = load_checkpoint(second)
    assert card.steps == 6 and card.datasets_seen == 2 * source_card.datasets_seen
    assert card.training["initialised_from"]["checkpoint"] == str(first)
    assert card.training["initialised_from"]["steps"] == 3
    # step 0 of the continued run validates the source weights, not a fresh init
    start, end_of_first = validation_at(tmp_path / "second", 0), validation_at(tmp_path / "first", 3)
    assert start["prior_loss"] == pytest.approx(end_of_first["prior_loss"], abs=1e-6)


def test_a_continued_run_resumes_without_the_checkpoint_it_started_from(tmp_path):
    first = pretrain(tiny_config(steps=3), PRIOR, tmp_path / "first", progress=False).model_path
    continued = tiny_config(steps=4, init_from=str(first), seed=1)
    pretrain(continued, PRIOR, tmp_path / "second", progress=False, time_limit_s=0)  # stops after step 1
    uninterrupted = pretrain(continued, PRIOR, tmp_path / "whole", progress=False).model_path
    first.rename(tmp_path / "moved.pt")  # e.g. a git-ignored file not carried to another machine
    resumed = pretrain(continued, PRIOR, tmp_path / "second", resume=True, progress=False).model_path
    assert step_losses(tmp_path / "second") == step_losses(tmp_path / "whole")
    (_, card), (_, whole_card) = load_checkpoint(resumed), load_checkpoint(uninterrupted)
    assert card.steps == 7 and card.training["initialised_from"] == whole_card.training["initialised_from"]


def test_init_from_refuses_a_different_model(tmp_path):
    first = pretrain(tiny_config(steps=1), PRIOR, tmp_path / "first", progress=False).model_path
    with pytest.raises(ValueError, match="`init_from` .* use the same `arch`, `size` and `model_overrides`"):
        pretrain(tiny_config(steps=1, arch="tabpfn-star", init_from=str(first)), PRIOR, tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "log.jsonl").exists()


def test_cli_pretrain_and_export(tmp_path):
    runner = CliRunner()
    args = ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny", "--steps", "2", "--batch-size", "2",
            "--rows", "64", "--device", "cpu", "--no-bundled-validation", "--no-progress", "--arch", "tabpfn",
            "--nan-prob", "0.5"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, args)  # the same directory again without --resume
    assert result.exit_code == 2 and "already holds a training run" in result.output
    limited = [*args[:2], str(tmp_path / "limited"), *args[3:]]
    result = runner.invoke(app, [*limited, "--time-limit", "0"])
    assert result.exit_code == 2 and "--time-limit takes a positive number of minutes" in result.output
    result = runner.invoke(app, [*limited, "--time-limit", "1e-9"])
    assert result.exit_code == 0 and "stopped by --time-limit at step 1 of 2" in result.output
    result = runner.invoke(app, [*limited, "--resume"])
    assert result.exit_code == 0 and "model written to" in result.output
    result = runner.invoke(app, ["export", str(tmp_path / "run"), "--out", str(tmp_path / "half.pt")])
    assert result.exit_code == 0, result.output
    model, card = load_checkpoint(tmp_path / "half.pt")
    assert card.arch == "tabpfn-star" and card.steps == 2 and card.prior["nan_prob"] == 0.5
    result = runner.invoke(app, ["export", str(tmp_path / "missing"), "--out", str(tmp_path / "x.pt")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_cli_recipe_options(tmp_path):
    runner = CliRunner()
    args = ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny", "--steps", "3", "--batch-size", "2",
            "--rows", "64", "--device", "cpu", "--no-bundled-validation", "--no-progress"]
    recipe = ["--pre-ln", "--qk-norm", "--schedule", "schedule-free", "--adam-beta2", "0.95", "--lr", "3e-3",
              "--rows-curriculum", "1:48,3:64", "--tree-fraction", "0.3", "--grad-clip", "0.5"]
    result = runner.invoke(app, [*args, *recipe])
    assert result.exit_code == 0, result.output
    model, card = load_checkpoint(tmp_path / "run" / "model.pt")
    assert model.config.norm_first and model.config.qk_norm and card.prior["tree_fraction"] == 0.3
    assert card.training["schedule"] == "schedule-free"
    assert [list(entry) for entry in card.training["rows_curriculum"]] == [[1, 48], [3, 64]]
    result = runner.invoke(app, [*args[:2], str(tmp_path / "bad"), *args[3:], "--rows-curriculum", "100-128"])
    assert result.exit_code == 2 and "--rows-curriculum takes 'STEP:ROWS,STEP:ROWS'" in result.output
    assert not (tmp_path / "bad").exists()


def test_the_card_names_the_hardware_of_every_step(tmp_path, monkeypatch):
    """A run resumed on other hardware keeps both in the card; a continued run (init_from) carries
    its source's."""
    import equibench.pretrain.run as run_module

    monkeypatch.setattr(run_module, "hardware_description", lambda device: "machine A")
    pretrain(tiny_config(), PRIOR, tmp_path / "run", progress=False, time_limit_s=0)  # stops at step 1
    monkeypatch.setattr(run_module, "hardware_description", lambda device: "machine B")
    pretrain(tiny_config(), PRIOR, tmp_path / "run", resume=True, progress=False, time_limit_s=0)  # step 2
    state = torch.load(tmp_path / "run" / "train_state.pt", weights_only=True)
    assert state["hardware_history"] == [
        {"hardware": "1 x machine A", "first_step": 1, "last_step": 1},
        {"hardware": "1 x machine B", "first_step": 2, "last_step": 2},
    ]
    card = load_checkpoint(tmp_path / "run" / "model.pt")[1]
    assert card.hardware_history == state["hardware_history"]
    assert card.hardware == "1 x machine A (steps 1); 1 x machine B (steps 2)"

    pretrain(tiny_config(), PRIOR, tmp_path / "run", resume=True, progress=False)
    second = pretrain(tiny_config(steps=2, init_from=str(tmp_path / "run" / "model.pt")), PRIOR,
                      tmp_path / "second", progress=False).model_path
    card = load_checkpoint(second)[1]
    assert card.steps == 8
    assert card.hardware == "1 x machine A (steps 1); 1 x machine B (steps 2-8)"


def test_cli_pretrain_without_options_is_a_quick_start_into_a_named_folder(tmp_path, monkeypatch):
    """`equibench pretrain` alone: the small-cpu recipe for 5 minutes into runs/pretrain-<arch>,
    then how to use the model; --out keeps the defaults shown; the folder again is refused."""
    from pathlib import Path

    import equibench.pretrain as library
    from equibench.pretrain.run import PretrainOutcome

    calls = []

    def recorded(config, prior, out_dir, **kwargs):
        calls.append((config, Path(out_dir), kwargs["time_limit_s"]))
        return PretrainOutcome(Path(out_dir) / "model.pt", 120, config.steps, "time limit")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(library, "pretrain", recorded)
    runner = CliRunner()
    result = runner.invoke(app, ["pretrain"])
    assert result.exit_code == 0, result.output
    config, out, time_limit_s = calls[-1]
    assert (out, config.recipe, config.arch, time_limit_s) == (Path("runs/pretrain-equitabpfn"), "small-cpu", "equitabpfn", 300)
    assert "quick start: the small-cpu recipe for 5 minutes into runs/pretrain-equitabpfn" in result.stderr
    assert 'EquiTabPFNClassifier(checkpoint="runs/pretrain-equitabpfn/model.pt")' in result.stdout
    assert "equibench score runs/pretrain-equitabpfn/model.pt" in result.stdout
    assert "a 5-minute model is a demo of the training loop" in " ".join(result.stdout.split())
    result = runner.invoke(app, ["pretrain", "--arch", "tabpfn", "--time-limit", "1"])
    assert result.exit_code == 0 and calls[-1][1:] == (Path("runs/pretrain-tabpfn-star"), 60)
    assert 'TabPFNStarClassifier(checkpoint="runs/pretrain-tabpfn-star/model.pt")' in result.stdout
    assert runner.invoke(app, ["pretrain", "--out", "mine"]).exit_code == 0  # the defaults shown, no time limit
    assert (calls[-1][0].recipe, calls[-1][0].schedule, calls[-1][1:]) == (None, "cosine", (Path("mine"), None))
    help_text = runner.invoke(app, ["pretrain", "--help"]).stdout
    assert "runs/pretrain-<arch>" in help_text and "small-cpu recipe for 5 minutes" in " ".join(help_text.split())

    monkeypatch.setattr(library, "pretrain", pretrain)  # now a real (tiny, 2-step) run
    tiny = ["pretrain", "--size", "tiny", "--steps", "2", "--batch-size", "2", "--rows", "64", "--prior-workers", "0",
            "--validation-batches", "1", "--no-bundled-validation", "--no-progress"]
    result = runner.invoke(app, tiny)
    assert result.exit_code == 0 and "model written to runs/pretrain-equitabpfn/model.pt" in result.stdout, result.output
    assert load_checkpoint(Path("runs/pretrain-equitabpfn/model.pt"))[1].training["recipe"] == "small-cpu"
    result = runner.invoke(app, tiny)
    assert result.exit_code == 2 and "'runs/pretrain-equitabpfn' already holds a training run" in result.output
    assert result.output == ("error: 'runs/pretrain-equitabpfn' already holds a training run; pass --resume to "
                             "continue it, --overwrite to replace it, or choose a new --out\n")


def test_a_slow_validation_is_left_out_of_the_steps_pace(tmp_path, monkeypatch):
    """The time limit projects the next step from the steps' own pace: a long validation at step
    0 does not make the run stop after one step (the quick start trained 1 step in 5 minutes)."""
    import time

    import equibench.pretrain.run as run_module

    def slow_validation(*args, **kwargs):
        time.sleep(2.0)
        return {"seconds": 2.0}

    monkeypatch.setattr(run_module, "validation_metrics", slow_validation)
    stopped = pretrain(tiny_config(steps=1000, validate_every=1000), PRIOR, tmp_path / "run", progress=False,
                       time_limit_s=5.0)
    assert not stopped.finished and stopped.step > 1  # steps of the tiny model take a few ms each
    _, validations = read_log(tmp_path / "run")  # the weights a stopped run ships are validated too
    assert list(validations["step"]) == [0, stopped.step]


def test_a_run_stopped_by_its_time_limit_prints_its_loss_drop(tmp_path):
    result = CliRunner().invoke(app, ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny", "--steps", "50",
                                      "--batch-size", "3", "--rows", "64", "--validation-batches", "0",
                                      "--no-bundled-validation", "--time-limit", "0.0001", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "stopped by --time-limit at step 1 of 50" in result.stdout
    assert "training loss " in result.stdout and " over steps 1..1 (means of the first and last 1 steps)" in result.stdout


def test_the_quick_start_validates_on_the_prior_only_and_prints_the_validation_loss_drop(tmp_path, monkeypatch):
    """No options: the small-cpu recipe for its time limit, validated in seconds (no bundled
    datasets), the weights it stops with validated, the drop of the fixed batches' loss printed."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["pretrain", "--time-limit", "0.0001", "--no-progress"])
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "pretrain-equitabpfn"
    _, validations = read_log(run)
    assert list(validations["step"]) == [0, 1]
    assert "prior_loss" in validations and "iris_accuracy" not in validations
    assert "validation loss (fixed prior batches) " in result.stdout and " at step 0 -> " in result.stdout
    assert "demo of the training loop" in result.stdout


def test_the_progress_bar_keeps_its_times_on_an_80_column_terminal(tmp_path):
    """A narrow terminal cuts the statistics at the end, never the elapsed and remaining times."""
    import io
    import re

    from rich.console import Console

    console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    pretrain(tiny_config(steps=3), PRIOR, tmp_path / "run", progress=True, console=console)
    lines = [line for line in console.file.getvalue().splitlines() if "3/3" in line]
    assert any(len(re.findall(r"\d+:\d\d:\d\d", line)) == 2 for line in lines), lines
    assert not any(re.search(r"\d…", line) for line in lines), lines  # no time cut short


def test_progress_of_a_time_limited_run_counts_down_to_its_limit(tmp_path, monkeypatch):
    """A run of a recipe's 65,316 steps with a time limit: the ETA is the limit's end (the
    quick start said "ETA 19 days"), marked so; no loss before the first step; the pace in
    datasets/s; the prior's share of the step named; the same on a terminal's bar."""
    import io
    import re

    from rich.console import Console

    monkeypatch.setenv("EQUIBENCH_PROGRESS_EVERY_S", "0")
    config = tiny_config(steps=65316, validate_every=10**6, checkpoint_every=10**6)
    console = Console(file=io.StringIO(), width=200, force_terminal=False)
    pretrain(config, PRIOR, tmp_path / "plain", progress=True, console=console, time_limit_s=1.5)
    lines = [line for line in console.file.getvalue().splitlines() if line.startswith("pretrain equitabpfn-tiny")]
    assert re.fullmatch(r"pretrain equitabpfn-tiny: 0/65316 done, lr 5\.0e-04, elapsed 0:00:0\d, "
                        r"ETA 0:00:0[01] \(time limit\)", lines[0]), lines[0]
    stepped = [line for line in lines if not line.startswith(("pretrain equitabpfn-tiny: 0/", "pretrain equitabpfn-tiny validating: 0/"))]
    assert stepped and all(re.fullmatch(r"pretrain equitabpfn-tiny( validating)?: \d+/65316 done, loss \d\.\d{4}, "
                                        r"lr \d\.\de-0\d, \d+\.\d datasets/s, prior wait \d+%, elapsed 0:00:0\d, "
                                        r"ETA 0:00:0[01] \(time limit\)", line) for line in stepped), stepped
    assert "nan" not in console.file.getvalue() and "prior_share" not in console.file.getvalue()

    terminal = Console(file=io.StringIO(), width=120, force_terminal=True, color_system=None)
    pretrain(config, PRIOR, tmp_path / "bar", progress=True, console=terminal, time_limit_s=1.0)
    assert re.search(r"/65316 0:00:0\d 0:00:0[01] \(limit\) loss \d\.\d{4}, lr ", terminal.file.getvalue())
