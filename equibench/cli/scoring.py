"""``score``: a checkpoint measured against the pretraining quality bar."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..errors import InvalidInputError
from . import output
from .options import JsonOption, check_out_file, int_list

#: Exit status when the bar was measured and a criterion is not met (0: every measured
#: criterion met; 2: bad input; 1: another failure).
NOT_MET_EXIT_CODE = 3
#: What ``--out`` writes, by the file's suffix.
OUT_FORMATS = {".md": "Markdown", ".json": "JSON"}


def score(
    context: typer.Context,
    checkpoint: Annotated[str, typer.Argument(help="Checkpoint file written by `equibench pretrain` or `equibench export`, or a packaged checkpoint's name (equitabpfn-small, tabpfn-star-small; `equibench info` lists them). EquiTabPFN or TabPFN*: the file says which.", show_default=False)],
    openml_cache: Annotated[Optional[Path], typer.Option(help="OpenML cache folder in openml's layout (only read), e.g. one `equibench download` filled; without it only the bundled datasets are scored.")] = None,
    folds: Annotated[str, typer.Option(help="OpenML folds, e.g. 0-9 (the bar), 3 or 0,2 (a cheaper look).")] = "0-9",
    threads: Annotated[int, typer.Option(help="Torch and BLAS/OpenMP threads of every model; the scores depend on it (KNN breaks distance ties by its threads' work split).")] = 1,
    n_estimators: Annotated[Optional[int], typer.Option(help="Ensemble members of the checkpoint's classifier (default: the classifier's, 4).", show_default=False)] = None,
    device: Annotated[str, typer.Option(help="Device of the checkpoint's classifier: cpu, cuda or auto.")] = "auto",
    as_json: JsonOption = False,
    out: Annotated[Optional[list[Path]], typer.Option(metavar="FILE", help="Also write the scorecard to FILE.md (the tables and verdict) or FILE.json (all its data, with the command, date and machine: what `equibench info` reads beside a packaged checkpoint); repeat for both.", show_default=False)] = None,
    progress: Annotated[bool, typer.Option(help="Show the progress bar (on stderr).")] = True,
    overwrite: Annotated[bool, typer.Option(help="Replace an --out file that exists.")] = False,
) -> None:
    """Score a checkpoint against the pretraining quality bar: the bundled datasets (5-fold CV)
    against LogisticRegression, the OpenML cache's <=10-class median and mean against KNN
    and >10-class mean against LinearModel; the tables and the verdict per criterion.

    Exit status: 0 every measured criterion met, 3 measured but not met, 2 bad input
    (missing or broken checkpoint, a folder that is no OpenML cache), 1 another failure."""
    import json

    from ..atomic_files import atomic_write_text
    from ..scoring import score_checkpoint

    fold_list = int_list(folds, "--folds")
    for path in out or ():
        _check_out_file(path, overwrite)
    settings = {"device": device, **({} if n_estimators is None else {"n_estimators": n_estimators})}
    scorecard = score_checkpoint(checkpoint, openml_cache=openml_cache, folds=fold_list, threads=threads,
                                 progress=progress, console=output.errors, **settings)
    scorecard.command = _command_line(context)
    markdown = scorecard.to_markdown()
    for path in out or ():
        atomic_write_text(path, markdown if path.suffix == ".md" else json.dumps(scorecard.to_dict(), indent=1) + "\n")
    if as_json:
        output.print_json(scorecard.to_dict())
    else:
        typer.echo(markdown)
    if not scorecard.met:
        raise typer.Exit(code=NOT_MET_EXIT_CODE)


def _command_line(context: typer.Context) -> str:
    """This command as given on the command line (its options in their declared order), as the
    scorecard records it."""
    words = ["equibench", context.info_name]
    for param in context.command.params:
        if context.get_parameter_source(param.name).name != "COMMANDLINE":
            continue
        value = context.params[param.name]
        if param.param_type_name == "argument":
            words.append(str(value))
        elif getattr(param, "is_flag", False):
            words.append(param.opts[0] if value else param.secondary_opts[0])
        else:
            for item in value if getattr(param, "multiple", False) else [value]:
                words += [param.opts[0], str(item)]
    return shlex.join(words)


def _check_out_file(out: Path, overwrite: bool) -> None:
    """Refuse, before any scoring, an ``--out`` that cannot be written."""
    check_out_file(out, overwrite, "score.md")
    if out.suffix not in OUT_FORMATS:
        raise InvalidInputError(f"--out {str(out)!r}: the file name must end in .md (Markdown) or .json (JSON), "
                                f"e.g. {str(out.with_suffix('.md'))!r}")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise InvalidInputError(f"--out {str(out)!r}: the folder {str(folder)!r} does not exist; create it first")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InvalidInputError(f"--out {str(out)!r}: the folder {str(folder)!r} is not writable; choose another place")
