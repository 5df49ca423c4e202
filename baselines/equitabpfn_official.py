"""The authors' released EquiTabPFN weights, converted by ``equibench convert-official``
(``weights={"equitabpfn-official": FILE}``, ``evaluate --weights equitabpfn-official=FILE`` or
``EQUIBENCH_OFFICIAL_CHECKPOINT``): nothing is downloaded. Without the file the cells are
skipped with the reason. One member with the official preprocessing, as in the paper's
tables (``preprocessing="official"``, see docs/OFFICIAL_CHECKPOINT.md); other ensemble sizes
are skipped, the official multi-member preprocessing not being reproduced.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..classifier import EquiTabPFNClassifier
from ..classifier.checkpoints import checkpoint_sha256, resolve_checkpoint, shared_network
from ..errors import CheckpointError, MethodUnavailableError
from ..model import EquiTabPFN
from .pfn import PFNMethod
from .settings import OfficialEquiTabPFNSettings


class OfficialEquiTabPFNMethod(PFNMethod):
    arch = EquiTabPFN.arch
    settings: OfficialEquiTabPFNSettings

    @classmethod
    def prepare(cls, settings: OfficialEquiTabPFNSettings) -> OfficialEquiTabPFNSettings:
        """The file as an absolute path with its sha256, checked to hold a converted official
        network, when it exists; otherwise as given (its cells are skipped with the reason)."""
        if not settings.checkpoint or not Path(settings.checkpoint).is_file():
            return settings
        path = resolve_checkpoint(settings.checkpoint, cls.arch)
        if not shared_network(path, cls.arch).config.computes_released_network:
            raise CheckpointError(
                f"`weights={{{cls.name!r}: {str(path)!r}}}` holds an EquiTabPFN trained by equibench, not the authors' "
                "converted one; write that with `convert_official`, or evaluate this file as "
                f"`weights={{'equitabpfn': {str(path)!r}}}`"
            )
        return dataclasses.replace(settings, checkpoint=str(path), checkpoint_sha256=checkpoint_sha256(path))

    def provenance(self) -> dict:
        return {"checkpoint": f"{Path(self.settings.checkpoint).name} (sha256 {self.settings.checkpoint_sha256})"}

    def _model(self, n_seen: int, n_rows: int):
        path = self._user_file(self.settings.checkpoint, "the converted official checkpoint")
        if self.settings.n_estimators != 1:
            raise MethodUnavailableError("the official checkpoint runs with one member (the paper's setting): its "
                                         "multi-member preprocessing is not reproduced")
        return EquiTabPFNClassifier(
            checkpoint=shared_network(path, self.arch), n_estimators=1, preprocessing="official",
            device=self.settings.device, max_train_rows=self.settings.max_train_rows, context="subsample",
            random_state=self.seed,
        )  # the paper's protocol: a subsample above the cap
