"""TabICL (Qu et al.) through the ``tabicl`` package, with a checkpoint file the user supplies
(``weights={"tabicl": FILE}``, ``evaluate --weights tabicl=FILE`` or ``EQUIBENCH_TABICL_CHECKPOINT``):
nothing is downloaded (``allow_auto_download=False``). Without a checkpoint the cells are
skipped with the reason. TabICL handles any number of classes itself: beyond its network's
``max_classes`` it predicts through a hierarchy of classifiers (``support_many_classes``).

The checkpoint is a ``torch.save`` file in the package's own format, a dict with the network's
``config`` (the ``TabICL`` constructor's keyword arguments) and its ``state_dict``, e.g.
``tabicl-classifier-v2-20260212.ckpt`` from the authors' release (``pip install tabicl``).
"""

from __future__ import annotations

import dataclasses
from importlib import metadata
from pathlib import Path

from ..classifier.checkpoints import checkpoint_sha256
from ..errors import CheckpointError
from .base import Method, optional_import
from .settings import TabICLSettings

#: The package's name for a checkpoint given by path (its loader checks the name before the path).
_CHECKPOINT_VERSION = "tabicl-classifier-v2-20260212.ckpt"


#: The top-level modules of a TabICL network: every key of a checkpoint's ``state_dict`` starts with one.
_NETWORK_PARTS = ("col_embedder.", "row_interactor.", "icl_predictor.")


def _check_format(path: Path) -> None:
    """Refuse, before any cell runs, a file that is not a TabICL checkpoint: what the package
    itself reads (``torch.load(weights_only=True)``), a dict with the network's ``config`` and
    a ``state_dict`` of a TabICL network (an equibench checkpoint has these keys too)."""
    import torch

    def refuse(finding: str, advice: str = "") -> CheckpointError:
        advice = advice or ("give the .ckpt file of the tabicl package's format (a torch file holding a dict with "
                            "`config`, the TabICL network's settings, and its `state_dict`, e.g. "
                            "tabicl-classifier-v2-20260212.ckpt), or leave the option out to skip TabICL")
        return CheckpointError(f"`weights={{'tabicl': {str(path)!r}}}` is not a TabICL checkpoint: it {finding}; {advice}")

    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - torch's loaders raise anything (KeyError, IndexError, ...) on a foreign file
        raise refuse(f"does not read as torch weights (a file of {path.stat().st_size:,} bytes in another format)") from None
    if not isinstance(checkpoint, dict) or not {"config", "state_dict"} <= set(checkpoint):
        found = sorted(map(str, checkpoint))[:5] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise refuse(f"holds {found}, not `config` and `state_dict`")
    if isinstance(checkpoint.get("arch"), str):
        arch = checkpoint["arch"]
        raise refuse(f"is an equibench {arch} checkpoint",
                     f"evaluate it as `weights={{{arch!r}: {str(path)!r}}}`, and give TabICL a file of the tabicl "
                     "package's format (e.g. tabicl-classifier-v2-20260212.ckpt)")
    state = checkpoint["state_dict"]
    if not isinstance(checkpoint["config"], dict) or not isinstance(state, dict) or not state or \
            not all(str(key).startswith(_NETWORK_PARTS) for key in state):
        raise refuse("holds another network (its `state_dict` is not a TabICL network's: col_embedder, "
                     "row_interactor, icl_predictor)")


class TabICLMethod(Method):
    settings: TabICLSettings

    @classmethod
    def prepare(cls, settings: TabICLSettings) -> TabICLSettings:
        """The checkpoint as an absolute path with its sha256, when it is a file; otherwise as
        given (its cells are skipped with the reason)."""
        if not settings.checkpoint or not Path(settings.checkpoint).is_file():
            return settings
        path = Path(settings.checkpoint).resolve()
        _check_format(path)
        return dataclasses.replace(settings, checkpoint=str(path), checkpoint_sha256=checkpoint_sha256(path))

    def provenance(self) -> dict:
        """The package version and the checkpoint (file name and sha256) this cell ran with."""
        # unavailable (a skipped cell) even when a one-class fold needed no fit
        path = self._user_file(self.settings.checkpoint, "the TabICL checkpoint")
        with optional_import(self.name, self.settings.requires):
            import tabicl  # noqa: F401
        return {"package": f"tabicl {metadata.version('tabicl')}",
                "checkpoint": f"{path.name} (sha256 {self.settings.checkpoint_sha256})"}

    def _fit(self, X, y, X_val, y_val, n_seen):
        path = self._user_file(self.settings.checkpoint, "the TabICL checkpoint")
        with optional_import(self.name, self.settings.requires):
            from tabicl import TabICLClassifier
        self.model_ = TabICLClassifier(
            n_estimators=self.settings.n_estimators, model_path=path, allow_auto_download=False,
            checkpoint_version=_CHECKPOINT_VERSION, support_many_classes=True, device=self.settings.device,
            use_amp=False, offload_mode=False, random_state=self.seed,  # n_jobs None: the cell sets the threads
        )
        self.model_.fit(X, y)
