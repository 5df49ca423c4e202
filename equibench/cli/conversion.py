"""``convert-official``: the authors' released EquiTabPFN checkpoint as an equibench checkpoint."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from . import output


def convert_official(
    sources: Annotated[list[Path], typer.Argument(metavar="RUN_DIR_OR_FILES...", help="The official run folder (holding metadata/config.yaml and artifacts/ckpt/last.pickle: the equitabpfn/ folder of the Hugging Face dataset equitabpfn/checkpoints), or its config.yaml and checkpoint file.", show_default=False)],
    out: Annotated[Path, typer.Option(help="The equibench checkpoint file to write (e.g. equitabpfn-official.pt).", show_default=False)],
    class_slots: Annotated[Optional[int], typer.Option(help="Class slots of the converted network (classes below are padded with ghost classes); default the run's one-hot width, 10, as in the paper's evaluation (the authors' scikit-learn wrapper uses 20).", show_default=False)] = None,
    overwrite: Annotated[bool, typer.Option(help="Replace --out if it exists.")] = False,
) -> None:
    """Convert the authors' released EquiTabPFN checkpoint into an equibench checkpoint.

    The file is read without running code from it, its config.yaml must describe the
    published architecture exactly (anything else is refused), and every weight is mapped by
    name. The same inputs always give the same bytes. See docs/OFFICIAL_CHECKPOINT.md."""
    import hashlib

    from ..model import count_parameters, load_checkpoint
    from ..official import convert_official as convert

    path = convert(sources, out, class_slots=class_slots, overwrite=overwrite)
    network, card = load_checkpoint(path)
    config = network.config
    output.console.print(
        f"wrote {escape(str(path))}: official EquiTabPFN, d_model {config.d_model}, {config.n_heads} heads, "
        f"{config.n_layers} layers, {count_parameters(network) / 1e6:.2f}M parameters, {config.min_class_slots} class "
        f"slots (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()[:16]})",
        highlight=False)
    output.console.print("the weights are the EquiTabPFN authors': check their licence before using or sharing this "
                         "file (docs/OFFICIAL_CHECKPOINT.md)", highlight=False)
    output.console.print(f"next: equibench evaluate --suite gt10 --methods equitabpfn-official --weights "
                         f"{escape(shlex.quote(f'equitabpfn-official={path}'))}", highlight=False)
