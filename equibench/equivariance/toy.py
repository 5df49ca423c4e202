"""The 9-point toy: 9 training points on a 3x3 grid, one class each, and the class each model
predicts on a dense mesh under several orderings of the classes (an equivariant model
predicts the same original class whatever the ordering)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import nn

from ..baselines.registry import method_spec
from ..baselines.settings import MethodOptions
from ..classifier import classifier_for
from ..errors import MethodUnavailableError
from ..evaluate.config import method_settings
from ..model import ARCHITECTURES, load_checkpoint
from .experiment import arch_label, checkpoint_labels

#: The class orderings: ordering[c] is the label given to original class c.
TOY_ORDERINGS = {
    "identity": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "reversed": (8, 7, 6, 5, 4, 3, 2, 1, 0),
    "shuffled": (4, 0, 7, 2, 8, 1, 6, 3, 5),
}
TOY_EXTENT = (-1.0, 3.0)  # the 3x3 training grid sits at coordinates 0, 1, 2


def toy_problem(grid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """9 training points on the 3x3 grid {0, 1, 2}^2 (class 3 * row + column) and a
    ``grid`` x ``grid`` mesh of test points over ``TOY_EXTENT``^2."""
    # -> x_train (9, 2), y_train (9,), mesh (grid * grid, 2) in row-major (y, x) order
    coordinates = np.arange(3, dtype=np.float64)
    gy, gx = np.meshgrid(coordinates, coordinates, indexing="ij")
    x_train = np.stack([gx.ravel(), gy.ravel()], axis=1)
    axis = np.linspace(*TOY_EXTENT, grid)
    my, mx = np.meshgrid(axis, axis, indexing="ij")
    return x_train, np.arange(9), np.stack([mx.ravel(), my.ravel()], axis=1)


def toy_predictions(model: nn.Module, grid: int, ordering: tuple[int, ...], device: str = "cpu",
                    seed: int = 0) -> np.ndarray:
    """Predicted ORIGINAL class on the mesh, (grid, grid), when original class c is given
    the label ``ordering[c]``; through the classifier (its preprocessing, 1 member)."""
    classifier = classifier_for(model, n_estimators=1, device=device, random_state=seed)
    x_train, y_train, mesh = toy_problem(grid)
    relabel = np.asarray(ordering)
    predicted = classifier.fit(x_train, relabel[y_train]).predict(mesh)  # labels 0..8 (classes_ sorted)
    return np.argsort(relabel)[predicted].reshape(grid, grid)


def method_toy(methods: tuple[str, ...], options: MethodOptions, grid: int = 150,
               seed: int = 0) -> tuple[dict[str, list[np.ndarray]], dict[str, str]]:
    """Per method of the registry that can run here (e.g. TabPFN v1/v2 with the user's weights,
    one member), by its label, its predictions under each of ``TOY_ORDERINGS`` (as
    :func:`toy_predictions`); and, by label, why each of the others cannot."""
    x_train, y_train, mesh = toy_problem(grid)
    predictions, skipped = {}, {}
    for name in methods:
        label = method_spec(name).label
        try:
            settings = method_settings(name, options).variants((1,))[0]
            implementation = method_spec(name).implementation()
            maps = []
            for relabel in map(np.asarray, TOY_ORDERINGS.values()):
                method = implementation(9, seed, settings).fit(x_train.astype(np.float32), relabel[y_train])
                predicted = method.predict_proba(mesh.astype(np.float32)).argmax(axis=1)  # labels 0..8
                maps.append(np.argsort(relabel)[predicted].reshape(grid, grid))
            predictions[label] = maps
        except MethodUnavailableError as error:
            skipped[label] = str(error)
    return predictions, skipped


def toy_models(checkpoints: tuple[Path, ...]) -> dict[str, nn.Module]:
    """The first checkpoint of each architecture, EquiTabPFN first, by display label."""
    chosen = {}
    for label, path in zip(checkpoint_labels(checkpoints), checkpoints):
        model = load_checkpoint(path)[0]
        chosen.setdefault(model.arch, (f"{arch_label(model.arch)} ({label})", model))
    return dict(chosen[arch] for arch in ARCHITECTURES if arch in chosen)


def nine_point_toy(models: dict[str, nn.Module], grid: int = 150, device: str = "cpu",
                   seed: int = 0) -> dict[str, list[np.ndarray]]:
    """Per model, its predictions (:func:`toy_predictions`) under each of ``TOY_ORDERINGS``."""
    return {label: [toy_predictions(model, grid, ordering, device, seed) for ordering in TOY_ORDERINGS.values()]
            for label, model in models.items()}


def differs_from_identity(predictions: dict[str, list[np.ndarray]]) -> dict[str, list[float]]:
    """Per model, the % of the mesh whose predicted class differs from the identity ordering's,
    one value per ordering."""
    return {label: [float(100 * np.mean(classes != maps[0])) for classes in maps]
            for label, maps in predictions.items()}
