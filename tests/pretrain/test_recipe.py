"""Recipes: the shipped ones hold the committed runs' settings, a recipe file is checked key by
key, flags replace its values, and config.json records the recipe."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from equibench.cli import app
from equibench.errors import InvalidInputError
from equibench.model import load_checkpoint
from equibench.pretrain import STATE_FILE, load_recipe, recipe_names
from equibench.pretrain.recipe import Recipe

ROOT = Path(__file__).resolve().parents[2]
#: Settings of a run's config.json that a recipe does not fix.
NOT_IN_RECIPE = {"arch", "steps", "init_from", "max_file_mb", "recipe"}


def as_json(value):
    return json.loads(json.dumps(value))


def recipe_run(name: str, arch: str) -> dict:
    """The recipe as config.json writes a run's settings (without what a recipe does not fix)."""
    config, prior = load_recipe(name).configs(arch)
    train = {k: v for k, v in dataclasses.asdict(config).items() if k not in NOT_IN_RECIPE}
    return as_json({"train": train, "prior": prior.to_dict()})


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
@pytest.mark.parametrize("name, folder", [("small-cpu", "pretraining/{arch}"),
                                          ("deeper-6", "deeper-branches/{arch}/deeper-6")])
def test_the_shipped_recipes_are_the_committed_runs(arch, name, folder):
    committed = json.loads((ROOT / "results" / folder.format(arch=arch) / "config.json").read_text())
    committed["train"] = {k: v for k, v in committed["train"].items() if k not in NOT_IN_RECIPE}
    assert recipe_run(name, arch) == {"train": committed["train"], "prior": committed["prior"]}


@pytest.mark.parametrize("arch", ["equitabpfn", "tabpfn-star"])
def test_the_shipped_checkpoints_are_small_cpu_then_deeper_6(arch):
    small, _ = load_recipe("small-cpu").configs(arch)
    deeper, _ = load_recipe("deeper-6").configs(arch)
    card = load_checkpoint(ROOT / "model" / f"{arch}-small.pt")[1]
    assert card.steps == small.steps + deeper.steps and card.training["initialised_from"]["steps"] == small.steps
    assert card.training["model_overrides"] == deeper.model_overrides and card.training["lr"] == deeper.lr
    assert as_json(card.training["initialised_from"]["training"]["rows_curriculum"]) == as_json(small.rows_curriculum)


def test_a_recipe_file_is_checked_key_by_key(tmp_path):
    assert recipe_names() == ["deeper-6", "medium-gpu", "small-cpu"]
    path = tmp_path / "mine.toml"
    for text, message in [
        ("[train]\nstpes = 3\n", r"mine.toml': unknown key train.stpes$"),
        ("[train]\nnan_prob = 0.3\n", r"unknown key train.nan_prob \(it belongs in \[prior\]\)"),
        ("[train]\narch = 'equitabpfn'\n", "unknown key train.arch .*both architectures"),
        ("[optimizer]\nlr = 1e-3\n", "unknown key 'optimizer'; a recipe holds"),
        ("[train]\nsteps = 0\n", r"mine.toml': `steps` must be a positive integer"),
        ("[train]\nrows_curriculum = 5\n", "mine.toml': `rows_curriculum` must be .* pairs"),
        ("[model]\nsize = 'huge'\n", "mine.toml': `size` must be one of"),
        ("[train\n", "is not valid TOML"),
    ]:
        path.write_text(text)
        with pytest.raises(InvalidInputError, match=message):
            load_recipe(path)
    with pytest.raises(InvalidInputError, match="'nothing' is neither a shipped recipe .*small-cpu.* nor a file"):
        load_recipe("nothing")


def test_given_values_replace_the_recipes():
    config, prior = load_recipe("deeper-6").configs("tabpfn-star", {"steps": 3, "lr": 1e-3}, {"rows": 64},
                                                    {"size": "tiny", "qk_norm": True})
    assert (config.arch, config.steps, config.lr, config.seed, config.recipe) == ("tabpfn-star", 3, 1e-3, 1, "deeper-6")
    assert config.size == "tiny" and config.model_overrides == {"n_layers": 6, "norm_first": True, "qk_norm": True}
    assert (prior.rows, prior.nan_prob) == (64, 0.3)
    assert Recipe().configs("equitabpfn")[0].recipe is None  # no recipe: the defaults


TINY = """description = "a tiny test recipe"
[train]
steps = 2
batch_size = 2
lr = 3e-3
device = "cpu"
validation_batches = 1
bundled_validation = false
schedule = "schedule-free"
[prior]
rows = 48
tree_fraction = 0.5
[model]
size = "tiny"
norm_first = true
"""


def test_cli_pretrain_from_a_recipe_file_with_flags_replacing_its_values(tmp_path):
    (tmp_path / "tiny.toml").write_text(TINY)
    recipe = str(tmp_path / "tiny.toml")
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["pretrain", "--recipe", recipe, "--out", str(run), "--steps", "1",
                                      "--rows", "32", "--layers", "1", "--arch", "tabpfn", "--no-progress"])
    assert result.exit_code == 0, result.output
    saved = json.loads((run / "config.json").read_text())
    assert saved["train"]["recipe"] == recipe and saved["train"]["arch"] == "tabpfn-star"
    assert (saved["train"]["steps"], saved["train"]["lr"], saved["train"]["schedule"]) == (1, 3e-3, "schedule-free")
    assert (saved["prior"]["rows"], saved["prior"]["tree_fraction"]) == (32, 0.5)
    assert saved["model"]["n_layers"] == 1 and saved["model"]["norm_first"] and saved["model"]["d_model"] == 32
    assert load_checkpoint(run / "model.pt")[1].training["recipe"] == recipe
    (tmp_path / "bad.toml").write_text("[train]\nnan_prob = 0.3\n")
    result = CliRunner().invoke(app, ["pretrain", "--recipe", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "unknown key train.nan_prob (it belongs in [prior])" in result.output
    assert not (tmp_path / "b").exists()


def test_the_gpu_recipe_runs_at_a_tiny_scale_on_cpu(tmp_path):
    """medium-gpu's model and prior, its training state in parts within its 15 MB cap."""
    run = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "pretrain", "--recipe", "medium-gpu", "--arch", "tabpfn", "--out", str(run), "--steps", "2", "--rows", "32",
        "--batch-size", "1", "--device", "cpu", "--no-amp", "--prior-workers", "0", "--validation-batches", "1",
        "--no-bundled-validation", "--no-progress",
    ])
    assert result.exit_code == 0, result.output
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"]["d_model"] == 256 and saved["model"]["n_layers"] == 6 and saved["model"]["norm_first"]
    assert saved["train"]["max_file_mb"] == 15 and saved["train"]["recipe"] == "medium-gpu"
    parts = list(run.glob(f"{STATE_FILE}.*.part-*"))
    assert len(parts) > 1 and all(part.stat().st_size <= 15e6 for part in parts)
    model, card = load_checkpoint(run / "model.pt")
    assert card.steps == 2 and all(torch.isfinite(t).all() for t in model.state_dict().values())
