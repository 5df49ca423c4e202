"""The official run's ``config.yaml``: read it and accept only the architecture that
:class:`~equibench.model.EquiTabPFN` computes exactly with the released network's settings
(:data:`~equibench.model.config.RELEASED_NETWORK`).

Every key of the model's sections is either mapped (the sizes), required to hold the one
value that is mapped (the feature and output masks, the decoder, the encoders), or known to
change nothing at inference (initialisation, dropout in eval mode, activation
checkpointing); anything else is refused, naming the key. The head count cannot be read
from the weights (queries, keys and values are packed in one matrix), so it comes from here.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import CheckpointError, first_line
from ..model.config import RELEASED_NETWORK, ModelConfig

BACKBONE = "equitabpfn.models.equitabpfn.EquiTabPFN"
TARGET_ENCODER = "equitabpfn.models.encoders.EquiOneHotAndLinear"
DECODER = "equitabpfn.models.decoders.KDEDecoder"
#: The forward pads features to exactly this many columns (hard-coded in the official code).
N_FEATURES = 100

_SIZES = ("emsize", "nlayers", "nhead", "nhid_factor")
#: Backbone keys that must hold exactly this value (their defaults in the official code).
_EXACT = {"equivariant_encoder": False, "feature_mask_mode": "Bq2Bk", "output_features": "all_features",
          "input_normalization": False, "activation": "gelu"}
#: Backbone keys that change nothing at inference: weight initialisation, training-time
#: options, and ``pre_norm``, which the official blocks never receive (they are post-LN).
_INERT = ("dropout", "init_method", "recompute_attn", "pre_norm", "efficient_eval_masking", "tabpfn_zero_weights",
          "all_layers_same_init", "compile_model")
_DECODER_MLP_EXACT = {"with_layer_norm": True, "layer_norm_eps": 1, "activation": "gelu"}
#: Names a configuration may give a head count under (the backbone's is ``nhead``).
_HEAD_KEYS = ("nhead", "n_heads", "num_heads", "nheads")


@dataclass(frozen=True)
class OfficialArchitecture:
    """The sizes of an official EquiTabPFN v1 run."""

    d_model: int
    n_heads: int
    n_layers: int
    mlp_hidden: int
    decoder_hidden: int
    class_slots: int  # the one-hot width: classes below it are padded with ghost classes

    def model_config(self, class_slots: int | None = None) -> ModelConfig:
        """The equibench configuration that computes this network (``class_slots`` overrides the run's)."""
        return ModelConfig(d_model=self.d_model, n_heads=self.n_heads, n_layers=self.n_layers,
                           mlp_hidden=self.mlp_hidden, decoder_hidden=self.decoder_hidden, f_max=N_FEATURES,
                           min_class_slots=class_slots or self.class_slots, **RELEASED_NETWORK)


def _section(data, path: str, where: str, known=None) -> dict:
    """``data[a][b]...`` for ``path`` "a.b...", required to be a mapping (of ``known`` keys only, when given)."""
    for key in path.split("."):
        if not isinstance(data, dict) or key not in data:
            raise CheckpointError(f"{where}: no `{path}` section; pass the config.yaml of an official EquiTabPFN run")
        data = data[key]
    if not isinstance(data, dict):
        raise CheckpointError(f"{where}: `{path}` is not a mapping")
    unknown = [] if known is None else sorted(str(key) for key in data if key not in known)
    if unknown:
        raise CheckpointError(f"{where}: `{path}` has keys this conversion does not map: {', '.join(unknown)}; "
                              "equibench converts the published EquiTabPFN v1 architecture only")
    return data


def _same(value, expected) -> bool:
    """Equal and of the same kind (True is not 1; 1 and 1.0 are the same number)."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return value is expected
    if isinstance(expected, numbers.Number):
        return isinstance(value, numbers.Number) and value == expected
    return value == expected


def _require(section: dict, expected: dict, path: str, where: str, defaults: bool = True) -> None:
    for key, value in expected.items():
        if key not in section and defaults:
            continue  # the official default, which is this value
        if key not in section or not _same(section[key], value):
            raise CheckpointError(f"{where}: `{path}.{key}` is {section.get(key)!r}; this conversion maps only "
                                  f"{value!r} (the published EquiTabPFN v1)")


def _positive_int(section: dict, key: str, path: str, where: str) -> int:
    value = section.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise CheckpointError(f"{where}: `{path}.{key}` must be a positive integer, got {value!r}")
    return value


def _head_counts(data, path: str = "") -> list[tuple[str, object]]:
    """Every (dotted path, value) of a head-count key anywhere in the parsed YAML ``data``."""
    found = []
    if isinstance(data, dict):
        for key, value in data.items():
            where = f"{path}.{key}" if path else str(key)
            if key in _HEAD_KEYS and not isinstance(value, (dict, list)):
                found.append((where, value))
            found += _head_counts(value, where)
    elif isinstance(data, list):
        for index, value in enumerate(data):
            found += _head_counts(value, f"{path}[{index}]")
    return found


def check_run_config(config: dict, where: str = "config.yaml") -> OfficialArchitecture:
    """The architecture of an official run's parsed ``config.yaml``, refused with a
    :class:`CheckpointError` naming the key unless every model setting is mapped exactly."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{where} is not a YAML mapping; pass the config.yaml of an official EquiTabPFN run")
    model = _section(config, "model", where, ("bkbn", "y_encoder", "logits"))
    if not _same(model.get("logits"), True):
        raise CheckpointError(f"{where}: `model.logits` is {model.get('logits')!r}; only a network trained on logits "
                              "(true) is mapped")
    backbone = _section(config, "model.bkbn", where)
    if backbone.get("name") != BACKBONE:
        raise CheckpointError(f"{where}: `model.bkbn.name` is {backbone.get('name')!r}; equibench converts {BACKBONE} "
                              "(EquiTabPFN v1, the published checkpoint) only")
    kwargs = _section(config, "model.bkbn.kwargs", where, (*_SIZES, *_EXACT, *_INERT, "decoder_kwarg"))
    _require(kwargs, _EXACT, "model.bkbn.kwargs", where)
    emsize, nlayers, nhead, nhid_factor = (_positive_int(kwargs, key, "model.bkbn.kwargs", where) for key in _SIZES)
    # The weights cannot give the head count: where the file states it more than once (e.g. a
    # copy of the model section), every statement must agree.
    counts = _head_counts(config)
    if len({repr(value) for _, value in counts}) > 1:
        stated = ", ".join(f"`{path}` = {value!r}" for path, value in counts)
        raise CheckpointError(f"{where} states the head count more than once and the values differ ({stated}); "
                              "the weights cannot tell which is right: pass the config.yaml the run was trained with")
    if emsize % nhead:
        raise CheckpointError(f"{where}: `model.bkbn.kwargs.emsize` ({emsize}) is not divisible by `nhead` ({nhead})")

    decoder = _section(config, "model.bkbn.kwargs.decoder_kwarg", where, ("name", "kwargs"))
    if decoder.get("name") != DECODER:
        raise CheckpointError(f"{where}: `model.bkbn.kwargs.decoder_kwarg.name` is {decoder.get('name')!r}; only "
                              f"{DECODER} (the attention decoder) is mapped")
    _section(config, "model.bkbn.kwargs.decoder_kwarg.kwargs", where,
             ("bw", "kernel", "kernel_type", "pointwise_mlp"))  # bw, kernel: unused
    mlp_path = "model.bkbn.kwargs.decoder_kwarg.kwargs.pointwise_mlp"
    mlp = _section(config, mlp_path, where,
                   ("dim_feedforward", "with_layer_norm", "layer_norm_eps", "activation", "dropout"))
    _require(mlp, _DECODER_MLP_EXACT, mlp_path, where, defaults=False)
    decoder_width = _positive_int(mlp, "dim_feedforward", mlp_path, where)

    target = _section(config, "model.y_encoder", where, ("name", "kwargs"))
    if target.get("name") != TARGET_ENCODER:
        raise CheckpointError(f"{where}: `model.y_encoder.name` is {target.get('name')!r}; only {TARGET_ENCODER} "
                              "(the class-equivariant target encoder) is mapped")
    target_kwargs = _section(config, "model.y_encoder.kwargs", where, ("num_classes",))
    class_slots = _positive_int(target_kwargs, "num_classes", "model.y_encoder.kwargs", where)

    prior = _section(config, "prior", where)
    if not _same(prior.get("num_features"), N_FEATURES):
        raise CheckpointError(f"{where}: `prior.num_features` is {prior.get('num_features')!r}; the official network "
                              f"pads features to exactly {N_FEATURES}, so only {N_FEATURES} is mapped")
    return OfficialArchitecture(d_model=emsize, n_heads=nhead, n_layers=nlayers, mlp_hidden=emsize * nhid_factor,
                                decoder_hidden=decoder_width, class_slots=class_slots)


def read_run_config(path: str | Path) -> OfficialArchitecture:
    """The architecture in an official run's ``config.yaml`` file (see :func:`check_run_config`)."""
    path = Path(path)
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"official run config {str(path)!r} does not exist; pass the run's "
                              "metadata/config.yaml") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise CheckpointError(f"{str(path)!r} is not a readable YAML file ({first_line(error)})") from None
    return check_run_config(config, str(path))
