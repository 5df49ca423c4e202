"""The official weights onto equibench's EquiTabPFN, and the converted checkpoint file.

Weight names, official -> equibench (layer i; ``cf``/``cs`` the cross-feature/cross-sample
attention, equibench's ``components``/``datapoints`` blocks):

=========================================================  ==========================================
``encoder.layer.{weight,bias}``                            ``covariate_encoder.*``
``y_encoder.{weight,bias}``                                ``target_encoder.*``
``target_token`` (1, 1, 1, d)                              ``prediction_token`` (d,)
``transformer.layers.i.{cf,cs}.self_attn.in_proj_*``       rows 0:d ``query.*``, rows d:3d ``key_value.*``
``...self_attn.out_proj.*``                                ``layers.i.{components,datapoints}.out.*``
``...linear1.*`` / ``...linear2.*``                        ``...mlp.0.*`` / ``...mlp.2.*``
``...norm1.*`` / ``...norm2.*``                            ``...norm_attention.*`` / ``...norm_mlp.*``
``decoder.pointwise_mlp.{0,1,4}.*``                        ``decoder.residual.{0,1,3}.*``
=========================================================  ==========================================

``criterion.weight`` (the training loss's class weights), when present, is not a model weight.
"""

from __future__ import annotations

import io
from pathlib import Path

import torch

from .._version import __version__
from ..atomic_files import atomic_write
from ..classifier.checkpoints import checkpoint_sha256
from ..errors import CheckpointError, InvalidInputError
from ..model import EquiTabPFN, ModelCard
from ..model.checkpoint import checkpoint_payload
from .run_config import OfficialArchitecture, read_run_config
from .unpickle import read_official_state_dict

#: Where an official run folder (the ``equitabpfn/`` folder of the Hugging Face dataset
#: ``equitabpfn/checkpoints``) holds its configuration and its weights.
RUN_CONFIG = Path("metadata") / "config.yaml"
RUN_WEIGHTS = Path("artifacts") / "ckpt" / "last.pickle"
#: Official entries that are not model weights.
NOT_WEIGHTS = ("criterion.weight",)
_BLOCKS = (("cross_feature_attention", "components"), ("cross_sample_attention", "datapoints"))
_BLOCK_PARTS = (("self_attn.out_proj", "out"), ("linear1", "mlp.0"), ("linear2", "mlp.2"), ("norm1", "norm_attention"),
                ("norm2", "norm_mlp"))

LICENCE_NOTE = (
    "The weights are the EquiTabPFN authors' (Arbel, Salinas, Hutter; NeurIPS 2025), published in the Hugging Face "
    "dataset equitabpfn/checkpoints; their code repository (github.com/MichaelArbel/EquiTabPFN) states no licence. "
    "Checking the weights' licence before using or sharing this file is yours to do."
)


def _official_names(n_layers: int, d_model: int) -> dict[str, tuple[str, slice | None]]:
    """equibench name -> (official name, rows taken or None for the whole tensor)."""
    names = {
        "covariate_encoder.weight": ("encoder.layer.weight", None),
        "covariate_encoder.bias": ("encoder.layer.bias", None),
        "target_encoder.weight": ("y_encoder.weight", None),
        "target_encoder.bias": ("y_encoder.bias", None),
        "prediction_token": ("target_token", None),
    }
    for i in range(n_layers):
        for theirs, ours in _BLOCKS:
            source, target = f"transformer.layers.{i}.{theirs}.", f"layers.{i}.{ours}."
            for kind in ("weight", "bias"):
                packed = f"{source}self_attn.in_proj_{kind}"
                names[f"{target}query.{kind}"] = (packed, slice(0, d_model))
                names[f"{target}key_value.{kind}"] = (packed, slice(d_model, 3 * d_model))
                for part_theirs, part_ours in _BLOCK_PARTS:
                    names[f"{target}{part_ours}.{kind}"] = (f"{source}{part_theirs}.{kind}", None)
    for theirs, ours in (("0", "0"), ("1", "1"), ("4", "3")):
        for kind in ("weight", "bias"):
            names[f"decoder.residual.{ours}.{kind}"] = (f"decoder.pointwise_mlp.{theirs}.{kind}", None)
    return names


def official_network(state: dict[str, torch.Tensor], architecture: OfficialArchitecture,
                     class_slots: int | None = None) -> EquiTabPFN:
    """An equibench EquiTabPFN (the released network's settings, float32, eval mode) holding the official
    weights ``state`` (official names, prefixes stripped): every official weight used, every
    equibench weight set, shapes checked, else a :class:`CheckpointError`."""
    network = EquiTabPFN(architecture.model_config(class_slots))
    expected = network.state_dict()
    names = _official_names(architecture.n_layers, architecture.d_model)
    missing = sorted({official for official, _ in names.values() if official not in state})
    unused = sorted(set(state) - {official for official, _ in names.values()} - set(NOT_WEIGHTS))
    if missing or unused:
        raise CheckpointError(
            f"the official weights do not match an EquiTabPFN v1 of {architecture.n_layers} layers: missing "
            f"{missing[:4]}{' ...' if len(missing) > 4 else ''}, not mapped {unused[:4]}{' ...' if len(unused) > 4 else ''}"
            "; check that config.yaml and the checkpoint come from the same run"
        )
    mapped = {}
    for ours, (official, rows) in names.items():
        tensor = state[official]
        if official == "target_token":
            tensor = tensor.reshape(-1) if tensor.dim() == 4 and tensor.shape[:3] == (1, 1, 1) else tensor
        elif rows is not None:
            tensor = tensor[rows] if tensor.shape[0] == 3 * architecture.d_model else tensor
        if tuple(tensor.shape) != tuple(expected[ours].shape):
            raise CheckpointError(
                f"official weight {official!r} has shape {tuple(state[official].shape)}, which does not fit the "
                f"architecture in config.yaml (d_model {architecture.d_model}, MLP {architecture.mlp_hidden}, decoder "
                f"MLP {architecture.decoder_hidden}, 100 features); check that both come from the same run"
            )
        if not tensor.is_floating_point() or not torch.isfinite(tensor).all():
            raise CheckpointError(f"official weight {official!r} is not finite floating point; the file is damaged")
        mapped[ours] = tensor.to(torch.float32)
    network.load_state_dict(mapped, strict=True)
    return network.eval()


def run_files(sources: list[str | Path]) -> tuple[Path, Path]:
    """``(config.yaml, checkpoint)`` from a run folder, or from the two files in any order."""
    sources = [Path(source) for source in sources]
    if len(sources) == 1 and sources[0].is_dir():
        config, weights = sources[0] / RUN_CONFIG, sources[0] / RUN_WEIGHTS
        if not config.is_file() or not weights.is_file():
            raise CheckpointError(
                f"{str(sources[0])!r} does not hold {RUN_CONFIG} and {RUN_WEIGHTS}; pass the run folder (the "
                "equitabpfn/ folder of the Hugging Face dataset equitabpfn/checkpoints) or its two files"
            )
        return config, weights
    if len(sources) == 2:
        configs = [source for source in sources if source.suffix in (".yaml", ".yml")]
        if len(configs) == 1:
            return configs[0], next(source for source in sources if source is not configs[0])
    raise InvalidInputError(
        "pass an official run folder (holding metadata/config.yaml and artifacts/ckpt/last.pickle), or its config.yaml "
        f"and its checkpoint file; got {[str(source) for source in sources]}"
    )


def convert_official(sources: list[str | Path], out: str | Path, class_slots: int | None = None,
                     overwrite: bool = False) -> Path:
    """Convert an official EquiTabPFN run (folder, or config.yaml + checkpoint) to the
    equibench checkpoint ``out``. The same inputs always give the same bytes.

    ``class_slots`` replaces the run's one-hot width (``model.y_encoder.kwargs.num_classes``,
    10; the authors' scikit-learn wrapper uses 20). An existing ``out`` is refused unless
    ``overwrite``."""
    if class_slots is not None and (not isinstance(class_slots, int) or isinstance(class_slots, bool) or class_slots < 1):
        raise InvalidInputError(f"`class_slots` must be a positive integer, got {class_slots!r}")
    config_path, weights_path = run_files(list(sources))
    out = Path(out)
    if out.exists() and not overwrite:
        raise InvalidInputError(f"{str(out)!r} already exists; write to another `out`, or pass `overwrite=True` to replace it")
    architecture = read_run_config(config_path)
    network = official_network(read_official_state_dict(weights_path), architecture, class_slots)
    config = network.config
    card = ModelCard(
        arch=network.arch, size=f"official-d{config.d_model}-L{config.n_layers}",
        training={"source": "EquiTabPFN authors' released checkpoint", "config_sha256": checkpoint_sha256(config_path),
                  "checkpoint_sha256": checkpoint_sha256(weights_path), "class_slots": config.min_class_slots},
        command="equibench convert-official", equibench_version=__version__,
        notes=("Converted by equibench convert-official from the official EquiTabPFN v1 run (files named by "
               "their sha256 above): same weights, float32, mapped name by name; ModelConfig's missing_indicator "
               "'standardised' and decoder_norm_eps 1.0 make the network compute what the official code computes. "
               + LICENCE_NOTE),
    )
    buffer = io.BytesIO()  # a file name would enter the archive's record names
    torch.save(checkpoint_payload(network, card), buffer)
    return atomic_write(out, lambda tmp: tmp.write_bytes(buffer.getvalue()))
