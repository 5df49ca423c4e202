"""Recipes: the settings of a run as a TOML file, shipped in ``recipes/`` (chosen by name) or
anywhere (chosen by path).

A recipe holds a ``description`` and up to three tables: ``[train]``, fields of
:class:`TrainConfig` (not ``arch``: every recipe serves both architectures); ``[prior]``,
fields of :class:`PriorConfig`; ``[model]``, ``size`` and the fields of ``ModelConfig`` that
change it. What a recipe leaves out keeps its default. The shipped recipes:

* ``small-cpu``: the 4-layer run of the shipped checkpoints (their first 65316 steps);
* ``deeper-6``: their growth step to 6 layers (6000 steps from the first's weights, ``init_from``);
* ``medium-gpu``: a larger model for one GPU.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import InvalidInputError
from ..model.config import ModelConfig
from ..prior import PriorConfig
from .config import TrainConfig

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

RECIPES_DIR = Path(__file__).resolve().parent / "recipes"
#: The keys each table of a recipe may hold.
KEYS = {
    "train": {f.name for f in dataclasses.fields(TrainConfig)} - {"arch", "size", "model_overrides", "recipe"},
    "prior": {f.name for f in dataclasses.fields(PriorConfig)},
    "model": {"size"} | {f.name for f in dataclasses.fields(ModelConfig)},
}


@dataclass(frozen=True)
class Recipe:
    """A recipe's tables (see the module); ``name`` is a shipped recipe's name or the file as given."""

    name: str | None = None
    description: str = "the defaults of TrainConfig and PriorConfig"
    train: dict = dataclasses.field(default_factory=dict)
    prior: dict = dataclasses.field(default_factory=dict)
    model: dict = dataclasses.field(default_factory=dict)

    def configs(self, arch: str, train: dict | None = None, prior: dict | None = None,
                model: dict | None = None) -> tuple[TrainConfig, PriorConfig]:
        """The run's settings for ``arch``: the recipe's, each replaced where ``train``, ``prior``
        or ``model`` (e.g. command-line flags) give one."""
        model = {**self.model, **(model or {})}
        size = model.pop("size", TrainConfig.size)
        config = TrainConfig(arch=arch, size=size, model_overrides=model, recipe=self.name,
                             **{**self.train, **(train or {})})
        return config, PriorConfig(**{**self.prior, **(prior or {})})


def recipe_names() -> list[str]:
    """The names of the shipped recipes."""
    return sorted(path.stem for path in RECIPES_DIR.glob("*.toml"))


def load_recipe(name_or_path: str | os.PathLike) -> Recipe:
    """The shipped recipe of that name, or the recipe in that file; its keys and values are checked."""
    name = str(name_or_path)
    path = RECIPES_DIR / f"{name}.toml" if name in recipe_names() else Path(name)
    if not path.is_file():
        raise InvalidInputError(f"`recipe` {name!r} is neither a shipped recipe ({', '.join(recipe_names())}) "
                                "nor a file")
    try:
        tables = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise InvalidInputError(f"recipe file {str(path)!r} is not valid TOML: {error}") from None
    description = tables.pop("description", "")
    for table, values in tables.items():
        if table not in KEYS or not isinstance(values, dict):
            raise InvalidInputError(f"recipe file {str(path)!r}: unknown key {table!r}; a recipe holds a description "
                                    "and the tables [train], [prior] and [model]")
        unknown = sorted(set(values) - KEYS[table])
        if unknown:
            raise InvalidInputError(f"recipe file {str(path)!r}: unknown key {table}.{unknown[0]}{_hint(unknown[0])}")
    recipe = Recipe(name, str(description), tables.get("train", {}), tables.get("prior", {}), tables.get("model", {}))
    try:
        recipe.configs("equitabpfn")
    except (InvalidInputError, TypeError) as error:
        raise InvalidInputError(f"recipe file {str(path)!r}: {error}") from None
    return recipe


def _hint(key: str) -> str:
    """A hint for an unknown key of a recipe table: the table it belongs in, if any."""
    if key == "arch":
        return " (a recipe serves both architectures; arch is chosen per run)"
    homes = [table for table, keys in KEYS.items() if key in keys]
    return f" (it belongs in [{homes[0]}])" if homes else ""
