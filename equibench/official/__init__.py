"""The authors' released EquiTabPFN checkpoint in equibench: read it safely, check its
configuration, map its weights onto :class:`~equibench.model.EquiTabPFN` with the released
network's settings (``missing_indicator="standardised"``, ``decoder_norm_eps=1.0``) and write an
ordinary equibench checkpoint (``equibench convert-official``).

- :mod:`.unpickle`: the checkpoint file, read without running code from it;
- :mod:`.run_config`: the run's ``config.yaml``, checked to be an architecture this maps exactly;
- :mod:`.conversion`: the weight names, the conversion and the model card.

See docs/OFFICIAL_CHECKPOINT.md.
"""

from .conversion import convert_official

__all__ = ["convert_official"]  # public (docs/API.md); the other names imported above are internal
