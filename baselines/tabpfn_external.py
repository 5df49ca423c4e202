"""TabPFN v1 and v2 (Hollmann et al.) through the ``tabpfn`` package, with weights the user
supplies locally (``weights={"tabpfn-v2": DIR}``, ``evaluate --weights tabpfn-v2=DIR``, or for
both versions ``EQUIBENCH_TABPFN_WEIGHTS``): nothing is downloaded. Without weights, or with the
other major version of ``tabpfn`` installed, the cells are skipped with the reason. Both handle
at most ``MAX_CLASSES`` classes natively; beyond, ECOC wraps single-member sub-models (ensemble
size = ECOC redundancy, as for TabPFN*).

Weights looked up in DIR:
    v1: DIR/models_diff/prior_diff_real_checkpoint_n_0_epoch_42.cpkt  (``pip install "tabpfn<2"``)
    v2: DIR/tabpfn-v2-classifier*.ckpt or *.cpkt                       (``pip install "tabpfn>=2"``)
One folder may hold both. The ``tabpfn`` method takes one classifier checkpoint FILE of any
version the installed package reads (v2, v2.5, v2.6, v3, v3.5 for tabpfn 9.2; .ckpt or
.safetensors) and records the version its network is (``tabpfn_version``) in each cell.
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

from ..classifier.ecoc import ECOCClassifier, ecoc_beyond
from ..errors import MethodUnavailableError
from .base import Method, optional_import
from .settings import ExternalTabPFNSettings, TabPFNSettings, TabPFNv1Settings, TabPFNv2Settings

#: The classes TabPFN v1 and v2 output (the packages' own limit, not a checkpoint's); kept for the newer versions.
MAX_CLASSES = 10
V1_WEIGHTS = Path("models_diff") / "prior_diff_real_checkpoint_n_0_epoch_42.cpkt"


def _v2_weights(directory: Path) -> Path | None:
    found = sorted(p for pattern in ("tabpfn-v2-classifier*.ckpt", "tabpfn-v2-classifier*.cpkt") for p in directory.glob(pattern))
    return found[0] if found else None


class _ExternalTabPFN(Method):
    major: int = 0
    settings: ExternalTabPFNSettings

    def _weights(self) -> Path:
        directory = self.settings.tabpfn_weights
        if not directory:
            raise MethodUnavailableError(self.settings.no_weights(self.name))
        directory = Path(directory)
        path = directory / V1_WEIGHTS if self.major == 1 else _v2_weights(directory)
        if path is None or not path.is_file():
            raise MethodUnavailableError(f"no weights: {self.name} weights not found under {str(directory)!r} (see the docs)")
        return path

    def _package(self):
        with optional_import(self.name, self.settings.requires):
            import tabpfn
        installed = int(str(getattr(tabpfn, "__version__", "0")).split(".")[0] or 0)
        if (installed >= 2) != (self.major == 2):
            pip = self.settings.requires.pip
            raise MethodUnavailableError(
                f"{self.name} needs {pip!r} but tabpfn {tabpfn.__version__} is installed: pip install \"{pip}\""
            )
        return tabpfn

    @abstractmethod
    def _network(self, n_estimators: int):
        """The package's classifier with ``n_estimators`` members."""

    def provenance(self) -> dict:
        """The package version and the weights file this cell ran with."""
        return {"package": f"tabpfn {self._package().__version__}", "checkpoint": self._weights().name}

    def _fit(self, X, y, X_val, y_val, n_seen):
        self.model_ = ecoc_beyond(self._network, n_seen, MAX_CLASSES, self.settings.n_estimators, self.seed)
        self.model_.fit(X, y)


class TabPFNv1Method(_ExternalTabPFN):
    major = 1
    settings: TabPFNv1Settings

    def _network(self, n_estimators):
        weights = self._weights()
        return self._package().TabPFNClassifier(
            device=self.settings.device, base_path=str(weights.parent.parent),
            N_ensemble_configurations=n_estimators, seed=self.seed,
        )


class TabPFNv2Method(_ExternalTabPFN):
    major = 2
    settings: TabPFNv2Settings

    def _network(self, n_estimators):
        weights = self._weights()
        return self._package().TabPFNClassifier(
            model_path=str(weights), device=self.settings.device, n_estimators=n_estimators,
            random_state=self.seed, ignore_pretraining_limits=True,
        )


class TabPFNMethod(TabPFNv2Method):
    settings: TabPFNSettings

    def _weights(self) -> Path:
        return self._user_file(self.settings.tabpfn_weights, f"the {self.name} checkpoint")

    def provenance(self) -> dict:
        """Also the version of the checkpoint's network (of the first ECOC member beyond 10 classes),
        as tabpfn names it ("v2", "v2.5", ...): from its architecture's module
        (tabpfn.architectures.tabpfn_v2_5 -> "v2.5")."""
        network = self.model_.estimators_[0] if isinstance(self.model_, ECOCClassifier) else self.model_
        module = type(network.models_[0]).__module__.rsplit(".", 1)[-1]
        return {**super().provenance(), "tabpfn_version": module.removeprefix("tabpfn_").replace("_", ".")}
