"""The authors' released EquiTabPFN checkpoint in equibench: read it safely, check its
configuration, map its weights onto :class:`~equibench.model.EquiTabPFN` with the released
network's settings (``missing_indicator="standardised"``, ``decoder_norm_eps=1.0``) and write an
ordinary equibench checkpoint (``equibench convert-official``). See docs/OFFICIAL_CHECKPOINT.md.
"""

from .conversion import convert_official

__all__ = ["convert_official"]  # public (docs/API.md); the other names imported above are internal
