"""Write tests/data/official-equitabpfn-fixture.npz: the authors' own EquiTabPFN network, built
at a small size from their public code, with every parameter random, and its outputs.

Run by hand, never by pytest (the tests only read the fixture it writes). It imports the
authors' code from two checkouts that you fetch yourself and never commit:

    git clone https://github.com/MichaelArbel/EquiTabPFN /tmp/official/equitabpfn_src   # read at e18b7de
    git clone https://github.com/microsoft/ticl /tmp/official/ticl_src
    git -C /tmp/official/ticl_src checkout 4cb7ac0fc04aa15256995dd85f379562ea6e994c
    .venv/bin/python tests/official/make_official_fixture.py \\
        --equitabpfn /tmp/official/equitabpfn_src --ticl /tmp/official/ticl_src

Nothing is installed: the two checkouts go on ``sys.path`` of this process only, and the
imports that the model path makes but never uses (``mlflow``, TabPFN v2's ``SeqEncStep``,
``huggingface_hub``, mothernet's package ``__init__`` files and its model builder) are
replaced by empty modules. The environment needs torch, numpy, scipy, scikit-learn, tqdm and
pyyaml, which equibench's own environment has.

Saved (float64; parameters rounded to float32 first, so a float32 checkpoint holds them
exactly): the run's ``config.yaml`` text, every parameter under its official name, and for each
case the sequence-first inputs and the official logits over all class slots:

- ``three_in_ten``: 3 classes in the checkpoint's 10 class slots (7 ghost classes);
- ``twelve``: 12 classes, the one-hot widened to 12 slots as the paper's evaluation does;
- ``nans``: 4 classes in 10 slots, NaNs in train and test rows (one column NaN only in test
  rows) and an all-NaN column;
- ``table``: a raw table through mothernet's ``transformer_predict`` with one member, the
  paper's TabZilla setting (train-row normalisation, constant columns dropped, outlier
  squashing, x 100/F, logits / 0.8): its class probabilities.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import torch
import yaml

OUT = Path(__file__).resolve().parents[1] / "data" / "official-equitabpfn-fixture.npz"
EMSIZE, HEADS, LAYERS, NHID_FACTOR, DECODER_WIDTH, FEATURES = 16, 2, 2, 2, 8, 100

#: The run's config.yaml as the authors' training writes it (``model`` and ``prior`` sections as
#: in equitabpfn/configs, at a small size; the other sections as in configs/train.yaml, abridged).
CONFIG = {
    "model": {
        "y_encoder": {"name": "equitabpfn.models.encoders.EquiOneHotAndLinear", "kwargs": {"num_classes": 10}},
        "bkbn": {
            "name": "equitabpfn.models.equitabpfn.EquiTabPFN",
            "kwargs": {
                "emsize": EMSIZE, "nlayers": LAYERS, "dropout": 0.0, "nhead": HEADS, "nhid_factor": NHID_FACTOR,
                "init_method": "xavier-uniform", "recompute_attn": True, "pre_norm": False,
                "efficient_eval_masking": True, "input_normalization": False, "tabpfn_zero_weights": False,
                "output_features": "all_features", "equivariant_encoder": False, "feature_mask_mode": "Bq2Bk",
                "compile_model": False,
                "decoder_kwarg": {
                    "name": "equitabpfn.models.decoders.KDEDecoder",
                    "kwargs": {"bw": 1.0, "kernel": "gaussian", "pointwise_mlp": {
                        "dim_feedforward": DECODER_WIDTH, "with_layer_norm": True, "layer_norm_eps": 1,
                        "activation": "gelu", "dropout": 0.0}},
                },
            },
        },
        "logits": True,
    },
    "prior": {
        "num_features": FEATURES, "n_samples": 1152, "prior_type": "prior_bag",
        "classification": {"max_num_classes": 10, "nan_prob_unknown_reason_reason_prior": 0.5,
                           "nan_prob_a_reason": 0.0, "nan_prob_no_reason": 0.0, "nan_prob_unknown_reason": 0.0,
                           "set_value_to_nan": 0.1},
    },
    "seed": 0,
    "max_features": FEATURES,
    "max_num_classes": 10,
    "dataloader": {"batch_size": 24, "num_steps": 384},
    "training": {"epochs": 1200, "train_mixed_precision": True},
    "optimizer": {"name": "torch.optim.AdamW", "kwargs": {"lr": 0.0001, "weight_decay": 0.0}},
}


def _empty_module(name: str, path: Path | None = None, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    if path is not None:
        module.__path__ = [str(path)]
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def import_official(equitabpfn: Path, ticl: Path):
    """The authors' model builder, classes and mothernet's ``transformer_predict``, imported
    from the checkouts with the unused imports stubbed."""
    sys.path[:0] = [str(equitabpfn), str(ticl)]
    _empty_module("mlflow")
    _empty_module("tabpfn", Path("/nonexistent"))
    _empty_module("tabpfn.model", Path("/nonexistent"))
    _empty_module("tabpfn.model.encoders", SeqEncStep=type("SeqEncStep", (torch.nn.Module,), {}))
    _empty_module("huggingface_hub", snapshot_download=None)
    _empty_module("mothernet", ticl / "mothernet")  # skips mothernet/__init__ (the whole training stack)
    _empty_module("mothernet.prediction", ticl / "mothernet" / "prediction")
    _empty_module("mothernet.model_builder", load_model=None)  # used only to load TabPFN files
    import typing

    import torch.nn.modules.transformer as transformer_module

    transformer_module.Optional = typing.Optional  # re-exported there by the torch the authors used

    from equitabpfn.model_builder import get_model, get_model_info
    from equitabpfn.utils import OneHot
    from mothernet.prediction import tabpfn as mothernet_tabpfn

    mothernet_tabpfn.checkpoint = lambda function, *args: function(*args)  # activation checkpointing: a plain call
    return get_model, get_model_info, OneHot, mothernet_tabpfn.transformer_predict


def randomise(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Every parameter random (biases and norms included), rounded to float32."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            noise = torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
            if name.endswith("weight") and ("norm" in name or "pointwise_mlp.1." in name):
                value = 1.0 + 0.3 * noise  # LayerNorm scales around 1
            else:
                fan_in = parameter.shape[-1] if parameter.dim() > 1 else 4
                value = noise / fan_in**0.5
            parameter.copy_(value.float().double())


def network_case(model, one_hot_class, n_classes: int, slots: int, n_train: int, n_test: int, generator,
                 nans: bool = False) -> dict:
    """Sequence-first inputs (2 datasets) and the official logits over all ``slots``."""
    rows, batch, n_features = n_train + n_test, 2, 7
    x = torch.randn(rows, batch, n_features, generator=generator, dtype=torch.float64)
    y = torch.cat([torch.arange(n_classes).repeat(n_train // n_classes + 1)[:n_train, None].expand(n_train, batch),
                   torch.zeros(n_test, batch, dtype=torch.int64)]).clone()
    for b in range(batch):
        y[:n_train, b] = y[:n_train, b][torch.randperm(n_train, generator=generator)]
    if nans:
        x[torch.rand(rows, batch, generator=generator) < 0.3, 1] = float("nan")
        x[n_train + 2 :, :, 4] = float("nan")  # NaN in some test rows only
        x[:, :, 5] = float("nan")  # all NaN
    model.y_encoder.one_hot = one_hot_class(slots)
    with torch.no_grad():
        logits = model((x, y.double()), single_eval_pos=n_train)  # (M, B, slots)
    return {"x": x.numpy(), "y": y.numpy().astype(np.float64), "n_train": n_train, "n_classes": n_classes,
            "slots": slots, "logits": logits.numpy()}


def table_case(model, one_hot_class, transformer_predict, generator) -> dict:
    """A raw table (scales, a train-constant column, outliers, NaNs) through the official
    one-member prediction; its class probabilities (M, K)."""
    n_train, n_test, n_classes = 60, 20, 5
    rows = n_train + n_test
    x = torch.randn(rows, 9, generator=generator, dtype=torch.float64)
    x[:, 0] = x[:, 0] * 1000 + 50
    x[:, 2] = torch.exp(2 * x[:, 2])  # heavy right tail
    x[:n_train, 3] = 7.0  # constant on the train rows (dropped)
    x[5, 4], x[n_train + 1, 4] = 40.0, -35.0  # outliers
    x[torch.rand(rows, generator=generator) < 0.2, 6] = float("nan")
    y = torch.arange(n_classes).repeat(rows // n_classes + 1)[:rows]
    y = y[torch.randperm(rows, generator=generator)]
    model.y_encoder.one_hot = one_hot_class(10)

    class DoubleLabels(torch.nn.Module):
        """The official model with labels in float64 (mothernet casts them to float32)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, src, single_eval_pos):
            return self.inner((src[0], src[1].double()), single_eval_pos=single_eval_pos)

    y_full = torch.cat([y[:n_train], torch.zeros(n_test, dtype=torch.int64)]).double()
    proba = transformer_predict(
        DoubleLabels(model), x.unsqueeze(1), y_full.unsqueeze(1), n_train, device="cpu", inference_mode=True,
        preprocess_transform="none", N_ensemble_configurations=1, multiclass_decoder="", feature_shift_decoder=False,
        seed=0, batch_size_inference=1, max_features=FEATURES,
    )  # (1, M, K)
    return {"X_train": x[:n_train].numpy(), "y_train": y[:n_train].numpy(), "X_test": x[n_train:].numpy(),
            "proba": proba[0].numpy()}


def commit(checkout: Path) -> str:
    try:
        return subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--equitabpfn", type=Path, required=True, help="checkout of MichaelArbel/EquiTabPFN")
    parser.add_argument("--ticl", type=Path, required=True, help="checkout of microsoft/ticl at 4cb7ac0")
    parser.add_argument("--source", default="", help="how the checkouts were obtained, recorded in the fixture")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    get_model, get_model_info, one_hot_class, transformer_predict = import_official(args.equitabpfn, args.ticl)

    torch.set_default_dtype(torch.float64)  # the official zero pad and one-hot are made in the default dtype
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = get_model(CONFIG["model"], get_model_info(CONFIG["prior"])).eval()
    randomise(model, generator)

    arrays = {"config_yaml": np.array(yaml.safe_dump(CONFIG, sort_keys=False)),
              "source": np.array(args.source or f"EquiTabPFN {commit(args.equitabpfn)}, ticl {commit(args.ticl)}")}
    arrays.update({f"param/{name}": tensor.numpy() for name, tensor in model.state_dict().items()})
    cases = {
        "three_in_ten": network_case(model, one_hot_class, 3, 10, 30, 10, generator),
        "twelve": network_case(model, one_hot_class, 12, 12, 40, 10, generator),
        "nans": network_case(model, one_hot_class, 4, 10, 30, 10, generator, nans=True),
        "table": table_case(model, one_hot_class, transformer_predict, generator),
    }
    for case, values in cases.items():
        arrays.update({f"{case}/{key}": np.asarray(value) for key, value in values.items()})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1024:.0f} KB, {sum(p.numel() for p in model.parameters())} "
          "parameters)")


if __name__ == "__main__":
    main()
