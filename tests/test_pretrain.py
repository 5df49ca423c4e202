"""Pretraining: schedule, learning on a fixed batch, exact resume, checkpoint round trip, DDP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from equibench.model import build_model, load_checkpoint, size_config
from typer.testing import CliRunner

import equibench.pretrain as pretrain_module
from equibench import EquiTabPFNClassifier, TabPFNStarClassifier
from equibench.cli import app
from equibench.optim import build_optimizer, decay_start, evaluation_weights, lr_factor, wsd_factor
from equibench.pretrain import TrainConfig, pretrain
from equibench.prior import PriorConfig, sample_batch
from equibench.training_curves import read_lineage
from equibench.validation import forward_batch, masked_test_loss

PRIOR = PriorConfig(rows=96)


def _config(**changes):
    settings = dict(
        arch="equitabpfn", size="tiny", steps=6, batch_size=3, lr=1e-3, warmup_steps=2,
        checkpoint_every=3, validate_every=3, validation_batches=1, bundled_validation=False, device="cpu",
    )
    return TrainConfig(**{**settings, **changes})


def _step_losses(out_dir):
    records = [json.loads(line) for line in (out_dir / "log.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "step"]


def test_learning_rate_schedule():
    factors = [lr_factor(step, 10, 110) for step in range(110)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert factors[10] == pytest.approx(1.0) and factors[60] == pytest.approx(0.5)
    assert all(a >= b for a, b in zip(factors[10:], factors[11:])) and factors[-1] < 0.01


def test_warmup_stable_decay_schedule():
    factors = [wsd_factor(step, 10, 110, 0.2) for step in range(110)]
    assert factors[0] == pytest.approx(0.1) and factors[9] == pytest.approx(1.0)
    assert decay_start(110, 0.2) == 88 and set(factors[10:88]) == {1.0}
    assert all(a > b for a, b in zip(factors[88:], factors[89:])) and factors[-1] == 0.0
    assert factors[88] == pytest.approx(1 - np.sqrt(1 / 22))  # the 1 - sqrt cool-down


def test_schedule_free_evaluation_weights_restore_the_training_weights_exactly():
    torch.manual_seed(0)
    model = build_model("equitabpfn", size_config("tiny"))
    optimizer, _ = build_optimizer(model, _config(schedule="schedule-free", lr=1e-2), torch.device("cpu"))
    batch = sample_batch(PRIOR, 8, torch.Generator().manual_seed(3))
    for _ in range(3):
        optimizer.zero_grad()
        masked_test_loss(forward_batch(model, batch), batch.y[:, batch.n_train:], batch.loss_mask).backward()
        optimizer.step()
    training = [p.detach().clone() for p in model.parameters()]
    with evaluation_weights(model, optimizer):
        averaged = [p.detach().clone() for p in model.parameters()]
    assert any(not torch.equal(a, t) for a, t in zip(averaged, training))  # the average differs
    assert all(torch.equal(p, t) for p, t in zip(model.parameters(), training))  # restored bit for bit


@pytest.mark.parametrize("schedule, first_steps, extended, allowed", [
    ("schedule-free", 4, 8, True),  # no horizon: extendable at any step
    ("wsd", 10, 20, True),  # 4 steps done, before the cool-down at step 5 (of 10) and 10 (of 20)
    ("cosine", 4, 8, False),  # the cosine horizon moved: refused
])
def test_extending_a_run(tmp_path, schedule, first_steps, extended, allowed):
    changes = {"schedule": schedule, "decay_fraction": 0.5, "checkpoint_every": 2, "validate_every": 100}
    straight = tmp_path / "straight"
    pretrain(_config(steps=extended, **changes), PRIOR, straight, progress=False)
    pretrain(_config(steps=first_steps, **changes), PRIOR, tmp_path / "run", progress=False, time_limit_s=0)
    for _ in range(3):  # one step per invocation, as --time-limit slices do
        pretrain(_config(steps=first_steps, **changes), PRIOR, tmp_path / "run", resume=True, progress=False,
                 time_limit_s=0)
    if not allowed:
        with pytest.raises(ValueError, match=r"train\.steps"):
            pretrain(_config(steps=extended, **changes), PRIOR, tmp_path / "run", resume=True, progress=False)
        return
    pretrain(_config(steps=extended, **changes), PRIOR, tmp_path / "run", resume=True, progress=False)
    assert _step_losses(tmp_path / "run") == _step_losses(straight)


def test_rows_curriculum_changes_the_rows_at_the_given_steps(tmp_path):
    pretrain(_config(rows_curriculum=((3, 48), (5, 64))), PRIOR, tmp_path / "run", progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [r["rows"] for r in records if r["kind"] == "step"] == [96, 96, 48, 48, 64, 64]


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
def test_training_lowers_the_loss_on_a_fixed_batch(arch):
    torch.manual_seed(0)
    model = build_model(arch, size_config("tiny"))
    batch = sample_batch(PRIOR, 8, torch.Generator().manual_seed(3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        optimizer.zero_grad()
        loss = masked_test_loss(forward_batch(model, batch), batch.y[:, batch.n_train:], batch.loss_mask)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def test_masked_datasets_do_not_count():
    logits = torch.zeros(2, 3, 4)
    logits[1] = 100 * torch.nn.functional.one_hot(torch.tensor([1, 1, 1]), 4)
    y = torch.tensor([[0, 0, 0], [1, 1, 1]])
    assert masked_test_loss(logits, y, torch.tensor([False, True])).item() == pytest.approx(0.0, abs=1e-6)
    assert masked_test_loss(logits, y, torch.tensor([True, False])).item() == pytest.approx(np.log(4))


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
        return _config(**changes, **more)

    pretrain(config(), prior, tmp_path / "straight", progress=False)

    real_sample = pretrain_module.sample_batch
    calls = {"n": 0}

    def dies_during_step_5(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt("simulated kill")
        return real_sample(*args, **kwargs)

    monkeypatch.setattr(pretrain_module, "sample_batch", dies_during_step_5)
    with pytest.raises(KeyboardInterrupt):
        pretrain(config(), prior, tmp_path / "resumed", progress=False)
    assert [s for s, _ in _step_losses(tmp_path / "resumed")] == [1, 2, 3, 4]  # step 4 is past the checkpoint
    validations = [json.loads(line) for line in (tmp_path / "straight" / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in validations if r["kind"] == "validation"] == [0, 3, 6]
    monkeypatch.setattr(pretrain_module, "sample_batch", real_sample)
    pretrain(config(), prior, tmp_path / "resumed", resume=True, progress=False)

    assert _step_losses(tmp_path / "resumed") == _step_losses(tmp_path / "straight")
    straight, _ = load_checkpoint(tmp_path / "straight" / "model.pt")
    resumed, card = load_checkpoint(tmp_path / "resumed" / "model.pt")
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    assert card.steps == 6 and card.datasets_seen == 18


def test_time_limit_stops_checkpointed_and_resume_continues_exactly(tmp_path):
    straight = pretrain(_config(), PRIOR, tmp_path / "straight", progress=False)
    assert straight.finished and straight.step == 6
    # a zero limit stops after the first step, which is not a checkpoint step (every 3)
    stopped = pretrain(_config(), PRIOR, tmp_path / "limited", progress=False, time_limit_s=0)
    assert (stopped.step, stopped.steps, stopped.finished) == (1, 6, False)
    assert torch.load(tmp_path / "limited" / "train_state.pt", weights_only=True)["step"] == 1
    assert load_checkpoint(stopped.model_path)[1].steps == 1
    resumed = pretrain(_config(), PRIOR, tmp_path / "limited", resume=True, progress=False, time_limit_s=3600)
    assert resumed.finished
    assert _step_losses(tmp_path / "limited") == _step_losses(tmp_path / "straight")
    with pytest.raises(ValueError, match="time limit must be a non-negative number"):
        pretrain(_config(), PRIOR, tmp_path / "bad", progress=False, time_limit_s=-1)
    assert not (tmp_path / "bad").exists()


def test_run_directory_guards(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        pretrain(_config(), PRIOR, tmp_path / "run", resume=True, progress=False)
    pretrain(_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)
    with pytest.raises(FileExistsError, match="--resume"):
        pretrain(_config(steps=1, checkpoint_every=1), PRIOR, tmp_path / "run", progress=False)
    with pytest.raises(ValueError, match=r"train\.lr"):
        pretrain(_config(steps=1, checkpoint_every=1, lr=5e-4), PRIOR, tmp_path / "run", resume=True, progress=False)
    with pytest.raises(ValueError, match=r"prior\.rows"):
        pretrain(_config(steps=1, checkpoint_every=1), PriorConfig(rows=128), tmp_path / "run", resume=True, progress=False)
    # bookkeeping settings (checkpoint and validation cadence, device) may change on resume
    pretrain(_config(steps=1, checkpoint_every=5, validate_every=7), PRIOR, tmp_path / "run", resume=True, progress=False)


@pytest.mark.parametrize(
    "changes, message",
    [({"arch": "gpt"}, "arch"), ({"size": "huge"}, "size"), ({"steps": 0}, "steps"), ({"lr": 0.0}, "lr"),
     ({"model_overrides": {"d_model": 33}}, "divisible"), ({"schedule": "linear"}, "schedule must be one of"),
     ({"adam_beta2": 1.0}, "adam_beta2"), ({"decay_fraction": 0.0}, "decay_fraction"),
     ({"rows_curriculum": ((5, 64), (3, 96))}, "increasing steps"), ({"rows_curriculum": ((0, 64),)}, "positive")],
)
def test_train_config_validation(changes, message):
    with pytest.raises(ValueError, match=message):
        _config(**changes)


@pytest.mark.parametrize("arch, classifier", [("equitabpfn", EquiTabPFNClassifier), ("tabpfn-star", TabPFNStarClassifier)])
def test_checkpoint_to_classifier_round_trip(tmp_path, arch, classifier):
    path = pretrain(_config(arch=arch, steps=2, bundled_validation=True), PRIOR, tmp_path, progress=False).model_path
    _, card = load_checkpoint(path)
    assert card.arch == arch and card.steps == 2 and card.datasets_seen == 6
    assert card.prior["rows"] == 96 and card.training["lr"] == 1e-3 and card.wall_time_s > 0
    assert 0 <= card.metrics["iris_accuracy"] <= 1 and "prior_loss" in card.metrics
    rng = np.random.RandomState(0)
    X, y = rng.normal(size=(40, 3)), np.arange(40) % 3
    probabilities = classifier(checkpoint=path, device="cpu").fit(X, y).predict_proba(X)
    assert probabilities.shape == (40, 3) and np.isfinite(probabilities).all()


def test_same_data_stream_for_both_architectures(tmp_path):
    """The controlled comparison: both models see identical prior batches."""
    for arch in ("equitabpfn", "tabpfn-star"):
        pretrain(_config(arch=arch, steps=3), PRIOR, tmp_path / arch, progress=False)
    classes = [
        [json.loads(line).get("n_classes") for line in (tmp_path / arch / "log.jsonl").read_text().splitlines()]
        for arch in ("equitabpfn", "tabpfn-star")
    ]
    assert classes[0] == classes[1]


def test_cli_pretrain_and_export(tmp_path):
    runner = CliRunner()
    args = ["pretrain", "--out", str(tmp_path / "run"), "--size", "tiny", "--steps", "2", "--batch-size", "2",
            "--rows", "64", "--device", "cpu", "--no-bundled-validation", "--no-progress", "--arch", "tabpfn",
            "--nan-prob", "0.5"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, args)  # the same directory again without --resume
    assert result.exit_code == 2 and "--resume" in result.output
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
    result = runner.invoke(app, ["curves", str(tmp_path / "run"), "--out", str(tmp_path / "curves.png")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    result = runner.invoke(app, ["curves", str(tmp_path / "missing"), "--out", str(tmp_path / "c.png")])
    assert result.exit_code == 2 and "pretraining output directory" in result.output


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


@pytest.mark.slow
def test_two_process_data_parallel_training(tmp_path):
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable))
    command = [torchrun, "--standalone", "--nproc-per-node", "2", "--no-python", "equibench", "pretrain",
               "--out", str(tmp_path), "--size", "tiny", "--steps", "3", "--batch-size", "2", "--rows", "64",
               "--device", "cpu", "--no-bundled-validation", "--no-progress", "--checkpoint-every", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # both processes agree to stop at the time limit (after step 1), then resume
    stopped = subprocess.run([*command, "--time-limit", "1e-9"], check=True, timeout=300, env=env, cwd=tmp_path,
                             capture_output=True, text=True)
    assert "stopped by --time-limit at step 1 of 3" in stopped.stdout
    subprocess.run([*command, "--resume"], check=True, timeout=300, env=env, cwd=tmp_path)
    _, card = load_checkpoint(tmp_path / "model.pt")
    assert card.training["world_size"] == 2 and card.datasets_seen == 3 * 2 * 2
    steps = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in steps if r["kind"] == "step"] == [1, 2, 3]  # only rank 0 logs


def test_init_from_continues_from_a_checkpoint(tmp_path):
    first = pretrain(_config(steps=3), PRIOR, tmp_path / "first", progress=False).model_path
    source, source_card = load_checkpoint(first)
    second = pretrain(_config(steps=3, init_from=str(first), seed=1), PRIOR, tmp_path / "second", progress=False).model_path
    _, card = load_checkpoint(second)
    assert card.steps == 6 and card.datasets_seen == 2 * source_card.datasets_seen
    assert card.training["initialised_from"]["checkpoint"] == str(first)
    assert card.training["initialised_from"]["steps"] == 3
    # step 0 of the continued run validates the source weights, not a fresh init
    log = [json.loads(line) for line in (tmp_path / "second" / "log.jsonl").read_text().splitlines()]
    first_log = [json.loads(line) for line in (tmp_path / "first" / "log.jsonl").read_text().splitlines()]
    start = next(r for r in log if r["kind"] == "validation" and r["step"] == 0)
    end_of_first = next(r for r in first_log if r["kind"] == "validation" and r["step"] == 3)
    assert start["prior_loss"] == pytest.approx(end_of_first["prior_loss"], abs=1e-6)
    # the training curves of the continued run start with the first run's
    steps, validations, starts = read_lineage(tmp_path / "second")
    assert list(steps["step"]) == [1, 2, 3, 4, 5, 6] and starts == [3]
    assert list(validations["step"]) == [0, 3, 3, 6]


def test_init_from_refuses_a_different_model(tmp_path):
    first = pretrain(_config(steps=1), PRIOR, tmp_path / "first", progress=False).model_path
    with pytest.raises(ValueError, match="--init-from .* pass the same --arch"):
        pretrain(_config(steps=1, arch="tabpfn-star", init_from=str(first)), PRIOR, tmp_path / "b", progress=False)
    assert not (tmp_path / "b" / "log.jsonl").exists()
