"""``score``: a checkpoint measured against the pretraining quality bar."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from . import output
from .options import JsonOption, int_list

#: Exit status when the bar was measured and a criterion is not met (0: every measured
#: criterion met; 2: bad input; 1: another failure).
NOT_MET_EXIT_CODE = 3


def score(
    checkpoint: Annotated[str, typer.Argument(help="Checkpoint file written by `equibench pretrain` or `equibench export`, or a packaged checkpoint's name (equitabpfn-small, tabpfn-star-small; `equibench info` lists them). EquiTabPFN or TabPFN*: the file says which.", show_default=False)],
    openml_cache: Annotated[Optional[Path], typer.Option(help="OpenML cache folder in openml's layout (only read), e.g. one `equibench download` filled; without it only the bundled datasets are scored.")] = None,
    folds: Annotated[str, typer.Option(help="OpenML folds, e.g. 0-9 (the bar), 3 or 0,2 (a cheaper look).")] = "0-9",
    threads: Annotated[int, typer.Option(help="Torch and BLAS/OpenMP threads of every model; the scores depend on it (KNN breaks distance ties by its threads' work split).")] = 1,
    n_estimators: Annotated[Optional[int], typer.Option(help="Ensemble members of the checkpoint's classifier (default: the classifier's, 4).", show_default=False)] = None,
    device: Annotated[str, typer.Option(help="Device of the checkpoint's classifier: cpu, cuda or auto.")] = "auto",
    as_json: JsonOption = False,
    out: Annotated[Optional[Path], typer.Option(help="Also write the Markdown tables and verdict to this file.")] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar (on stderr).")] = True,
) -> None:
    """Score a checkpoint against the pretraining quality bar: the bundled datasets (5-fold CV)
    against LogisticRegression, the OpenML cache's <=10-class median and mean against KNN
    and >10-class mean against LinearModel; the tables and the verdict per criterion.

    Exit status: 0 every measured criterion met, 3 measured but not met, 2 bad input
    (missing or broken checkpoint, a folder that is no OpenML cache), 1 another failure."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn

    from ..atomic_files import atomic_write_text
    from ..pretrain.scorecard import score_checkpoint
    from ..progress import Progress

    fold_list = int_list(folds, "--folds")
    if out is not None:
        _check_out_file(out)
    bar = Progress(TextColumn("[bold]score"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                   TimeElapsedColumn(), console=output.errors, disable=not progress, name="score")
    task = bar.add_task("", total=None)

    def advance(done: int, total: int, what: str) -> None:
        # the bar starts once the checkpoint and the cache loaded: a bad input stays a single error line
        if not bar.live.is_started:
            bar.start()
        bar.update(task, completed=done, total=total, description=what)

    settings = {"device": device, **({} if n_estimators is None else {"n_estimators": n_estimators})}
    try:
        scorecard = score_checkpoint(checkpoint, openml_cache=openml_cache, folds=fold_list, threads=threads,
                                     progress=advance, **settings)
    finally:
        if bar.live.is_started:
            bar.stop()
    markdown = scorecard.to_markdown()
    if out is not None:
        atomic_write_text(out, markdown)
    if as_json:
        output.print_json(scorecard.to_dict())
    else:
        typer.echo(markdown)
    if not scorecard.met:
        raise typer.Exit(code=NOT_MET_EXIT_CODE)


def _check_out_file(out: Path) -> None:
    """Refuse, before any scoring, an ``--out`` that cannot be written: a folder, or a file in a
    folder that is missing or not writable."""
    import os

    from ..errors import InvalidInputError

    if out.is_dir():
        raise InvalidInputError(f"--out {str(out)!r} is a folder; give a file path for the Markdown, e.g. "
                                f"{str(out / 'score.md')!r}")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInputError(f"--out {str(out)!r}: the folder {str(folder)!r} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidInputError(f"--out {str(out)!r}: the folder {str(folder)!r} is not writable; choose another place")
