"""The public API is decided and written down: docs/API.md lists, per import path, exactly the
names of that package's ``__all__`` (and of equibench.errors, every error class), and the
lists here pin both. Changing the public API means changing all three on purpose."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

API_DOC = Path(__file__).resolve().parents[1] / "docs" / "API.md"

PUBLIC = {
    "equibench": [
        "ECOCClassifier", "EquiTabPFNClassifier", "EquibenchError", "FinetunedEquiTabPFNClassifier",
        "FinetunedTabPFNStarClassifier", "PretrainingLimitWarning", "TabPFNStarClassifier", "__version__",
        "classifier_for", "evaluate_frame",
    ],
    "equibench.classifier": ["EquiTabPFNClassifier", "FinetunedEquiTabPFNClassifier", "FinetunedTabPFNStarClassifier",
                             "PretrainingLimitWarning", "TabPFNStarClassifier", "classifier_for"],
    "equibench.evaluate": [
        "CellBackend", "DaskBackend", "EvaluateConfig", "EvaluateSummary", "LocalBackend", "evaluate", "evaluate_frame",
        "make_backend",
    ],
    "equibench.tasks": [
        "BUILTIN_SUITES", "DownloadOptions", "DownloadSummary", "Suite", "Task", "check_cache", "demo_task",
        "download_tasks", "load_suite", "load_task",
    ],
    "equibench.pretrain": [
        "PretrainOutcome", "Recipe", "TrainConfig", "load_recipe", "plot_training_curves", "pretrain", "recipe_names",
    ],
    "equibench.prior": ["PriorBatch", "PriorConfig", "preview_prior", "sample_batch"],
    "equibench.model": [
        "EquiTabPFN", "ModelCard", "ModelConfig", "SIZES", "TabPFNStar", "TabularPFN", "build_model", "default_checkpoint",
        "load_checkpoint", "packaged_checkpoints", "save_checkpoint", "size_config",
    ],
    "equibench.scoring": ["Criterion", "Scorecard", "score_checkpoint"],
    "equibench.equivariance": ["EquivarianceConfig", "measure_equivariance", "run_equivariance"],
    "equibench.official": ["convert_official"],
    "equibench.report": ["build_report"],
    "equibench.cli": ["app"],
    "equibench.baselines": [],
}

# equibench.errors is a module without __all__: its public names are its error classes, all of them.
ERRORS = [
    "BrokenFileError", "CheckpointError", "EquibenchError", "FitStateError", "FolderInUseError", "InvalidInputError",
    "MethodUnavailableError", "MissingDependencyError", "NonFiniteLossError", "TaskUnavailableError",
    "TooManyClassesError", "UnavailableError", "UnsupportedTaskError", "WorkerLostError",
]

PACKAGES = sorted(PUBLIC)


def documented() -> dict[str, list[str]]:
    """docs/API.md parsed: each ``## `import.path``` section's ``- `name``` bullets, in order."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in API_DOC.read_text(encoding="utf-8").splitlines():
        heading = re.fullmatch(r"## `([\w.]+)`", line)
        if heading:
            current = heading.group(1)
            assert current not in sections, f"docs/API.md has two sections for {current}"
            sections[current] = []
        elif line.startswith("- `") and current is not None:
            sections[current].append(re.match(r"- `(\w+)`", line).group(1))
    return sections


def test_the_doc_has_one_section_per_public_import_path():
    assert sorted(documented()) == sorted([*PUBLIC, "equibench.errors"])


@pytest.mark.parametrize("package", PACKAGES)
def test_each_package_all_is_its_documented_list(package):
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(PUBLIC[package]), f"{package}.__all__ differs from the public list"
    assert len(module.__all__) == len(set(module.__all__)), f"{package}.__all__ repeats a name"
    assert sorted(documented()[package]) == sorted(PUBLIC[package]), f"docs/API.md's {package} differs"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports(package):
    module = importlib.import_module(package)
    for name in PUBLIC[package]:
        assert getattr(module, name) is not None
    namespace: dict = {}
    exec(f"from {package} import *", namespace)  # noqa: S102 (the star import a user may write)
    assert set(PUBLIC[package]) <= set(namespace)


def test_the_errors_are_every_error_class_of_equibench_errors():
    from equibench import errors

    defined = [name for name, obj in vars(errors).items()
               if inspect.isclass(obj) and obj.__module__ == errors.__name__ and issubclass(obj, errors.EquibenchError)]
    assert sorted(defined) == sorted(ERRORS)
    assert sorted(documented()["equibench.errors"]) == sorted(ERRORS)


def test_the_top_level_names_are_the_subpackages_objects():
    import equibench
    from equibench.classifier.ecoc import ECOCClassifier

    for name in ("EquiTabPFNClassifier", "TabPFNStarClassifier", "FinetunedEquiTabPFNClassifier",
                 "FinetunedTabPFNStarClassifier", "PretrainingLimitWarning", "classifier_for"):
        assert getattr(equibench, name) is getattr(importlib.import_module("equibench.classifier"), name)
    assert equibench.ECOCClassifier is ECOCClassifier
    assert equibench.evaluate_frame is importlib.import_module("equibench.evaluate").evaluate_frame
    assert equibench.EquibenchError is importlib.import_module("equibench.errors").EquibenchError
