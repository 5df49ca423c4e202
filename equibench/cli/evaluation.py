"""Commands of the evaluation workflow: ``evaluate``, ``download``, ``methods`` and ``suites``."""

from __future__ import annotations

import contextlib
import shlex
import signal
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from ..baselines.registry import FAST_METHODS, METHODS
from ..baselines.settings import MethodOptions
from ..errors import InvalidInputError
from . import output
from .completion import complete_contexts, complete_methods, complete_suite
from .options import JsonOption, WeightsOption, comma_list, int_list, weights_map


@contextlib.contextmanager
def stop_on_sigterm():
    """Turn SIGTERM into KeyboardInterrupt while the block runs, so a terminated run stops
    like a Ctrl-C one: stored work kept, workers stopped, a clear message."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _method_list(text: str) -> tuple[str, ...]:
    """``--methods``: names, ``all`` or ``fast``, comma-separated, in order without repeats."""
    names = []
    for part in comma_list(text):
        names.extend({"all": list(METHODS), "fast": FAST_METHODS}.get(part, [part]))
    return tuple(dict.fromkeys(names))


def evaluate(
    suite: Annotated[str, typer.Option(autocompletion=complete_suite, help="gt10, le10, demo, large, or a suite file (.toml/.yaml with a `tasks` list of OpenML task ids, demo-<name> and {file, target, folds} entries for your own CSV/parquet tables).")],
    out_dir: Annotated[Optional[Path], typer.Option("--out", help="Results directory (default runs/<suite>: the suite's name, or the suite file's name without its extension); rerun with the same one to resume.", show_default=False)] = None,
    methods: Annotated[str, typer.Option(autocompletion=complete_methods, help="Comma-separated methods; `all`, `fast` (PFNs + classical) or names (see `equibench methods`).")] = "all",
    folds: Annotated[Optional[str], typer.Option(help="Folds to run, e.g. 0,1,2 or 0-2 (default: all).")] = None,
    ensembles: Annotated[str, typer.Option(help="Ensemble sizes of the PFN methods, e.g. 1,4,16 (one variant each).")] = "1",
    contexts: Annotated[str, typer.Option(autocompletion=complete_contexts, help="Context strategies of the PFN methods, e.g. auto,subsample (one variant each): auto = local contexts above 3000 training rows, subsample = a stratified subsample of 3000 rows, local = local contexts always.")] = "auto",
    jobs: Annotated[Optional[int], typer.Option(help="Cells run in parallel worker processes on this machine (default: its cores / --threads-per-cell, or 1 with a --device other than cpu; 1 runs them in this process).", show_default=False)] = None,
    scheduler: Annotated[Optional[str], typer.Option(envvar="EQUIBENCH_SCHEDULER", help="Run the cells on a Dask cluster: its scheduler address (tcp://host:8786), a scheduler file (.json), or local:N for N worker processes here. See docs/DISTRIBUTED.md.")] = None,
    openml_cache: Annotated[Optional[Path], typer.Option(help="Your OpenML cache folder, in openml's layout (copied, never modified; fill one with `equibench download`); default $OPENML_CACHE_DIR, else openml's own cache.", show_default=False)] = None,
    weights: WeightsOption = None,
    seed: Annotated[int, typer.Option(help="Seed of every method and of the preprocessing.")] = 0,
    device: Annotated[str, typer.Option(help="Device of the PFN methods: cpu, cuda, auto.")] = "cpu",
    threads_per_cell: Annotated[int, typer.Option(help="Torch and BLAS threads of every cell, whatever --jobs or --scheduler: threads change the numbers, so this is a run setting like --seed.")] = 1,
    dry_run: Annotated[bool, typer.Option(help="List the cells (and which are already done) without running them.")] = False,
    rerun_changed: Annotated[bool, typer.Option(help="Replace stored cells of methods whose settings (checkpoint, weights) changed; all cells if --threads-per-cell changed.")] = False,
    allow_failures: Annotated[bool, typer.Option(help="Exit 0 even when cells of this run failed (they are stored as failed rows either way).")] = False,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Evaluate methods on every task and fold of a suite; rerun the same command to resume.

    Exit status: 0 every cell that could run is ok or skipped (tasks missing from the OpenML
    cache are named, with what fetches them), 1 cells of this run failed (rerun to retry them;
    see --allow-failures), 2 bad input, or no task of the cells to run could be loaded,
    130 interrupted (Ctrl-C or SIGTERM; rerun to resume)."""
    from ..evaluate import EvaluateConfig
    from ..evaluate import evaluate as run_evaluation
    from ..evaluate.backends import LocalBackend, check_backend_options, make_backend

    config = EvaluateConfig(
        suite=suite, methods=_method_list(methods), folds=None if folds is None else int_list(folds, "--folds"),
        ensembles=int_list(ensembles, "--ensembles"), contexts=comma_list(contexts), seed=seed,
        openml_cache=None if openml_cache is None else str(openml_cache),
        weights=weights_map(weights), device=device, threads_per_cell=threads_per_cell,
    )
    out_dir = out_dir or default_out(suite)
    check_backend_options(jobs, scheduler)
    if jobs is None and device != "cpu":
        jobs = 1  # one process owns the GPU rather than one CUDA context per core
    try:
        with stop_on_sigterm(), LocalBackend() if dry_run else make_backend(jobs, scheduler, threads_per_cell) as backend:
            summary = run_evaluation(
                config, out_dir, backend=backend, dry_run=dry_run, progress=progress, console=output.errors,
                rerun_changed=rerun_changed,
            )
    except KeyboardInterrupt:
        output.errors.print(f"[yellow]interrupted:[/yellow] every finished cell is stored in {escape(str(out_dir))}; "
                            "rerun the same command to resume", highlight=False)
        raise typer.Exit(code=130) from None
    _print_summary(summary, out_dir, dry_run)
    if summary.counts["failed"] and not dry_run and not allow_failures:
        raise typer.Exit(code=1)


#: At most this many distinct reasons of failed cells are printed (all are in results.csv).
FAILURE_REASONS_SHOWN = 5


def default_out(suite: str) -> Path:
    """Where ``evaluate`` writes without ``--out``: ``runs/<suite name>`` (a suite file: its
    name without the extension), never the committed results."""
    return Path("runs") / Path(suite).stem


def _print_summary(summary, out: Path, dry_run: bool) -> None:
    """What ``evaluate`` did (or, dry, would do): on stderr what went wrong or is missing, once
    per cause; on stdout the results and the next command."""
    if summary.damaged:
        output.errors.print(f"[yellow]{len(summary.damaged)} stored cells were damaged and "
                            f"{'will be' if dry_run else 'were'} recomputed[/yellow], e.g. "
                            f"{escape(next(iter(summary.damaged.values())))}", highlight=False)
    for task_id, message in summary.task_errors.items():
        output.errors.print(f"[red]task {task_id} cannot be loaded:[/red] {escape(message)}", highlight=False)
    n_missing = len(summary.missing_cells)
    not_run = f"{n_missing} cells {'will not be' if dry_run else 'were not'} run"
    for line in summary.missing_groups:
        ending = f"; {not_run}" if len(summary.missing_groups) == 1 else ""
        output.errors.print(f"[yellow]missing:[/yellow] {escape(line)}{ending}", highlight=False)
    if len(summary.missing_groups) > 1:
        output.errors.print(f"[yellow]missing:[/yellow] in all, {not_run}", highlight=False)
    if summary.next_step:
        output.errors.print(f"[yellow]to run them:[/yellow] {escape(summary.next_step)}", highlight=False)
    if dry_run:
        done = {cell.key for cell in summary.cells} - {cell.key for cell in summary.pending}
        table = output.table("task", "fold", "method", "variant", "state",
                             title=f"{len(summary.cells)} cells, {len(summary.pending) - n_missing} to run"
                                   + (f", {n_missing} missing" if n_missing else ""))
        for cell in summary.cells:
            state = "done" if cell.key in done else "missing" if cell.task_id in summary.missing else "pending"
            table.add_row(cell.task_id, str(cell.fold), cell.method, cell.variant, state)
        output.console.print(table)
        return
    _print_methods(summary)
    output.console.print(f"results in {escape(str(out))}/results.csv", highlight=False)
    failed = summary.counts["failed"]
    if failed:
        named = set(summary.task_errors.values())  # a task that cannot load is named above, once
        groups = [group for group in summary.reasons("failed") if group[2] not in named]
        for methods, n_cells, reason in groups[:FAILURE_REASONS_SHOWN]:
            output.errors.print(f"[red]{escape(', '.join(methods))}: {n_cells} cells failed:[/red] {escape(reason)}",
                                highlight=False)
        if len(groups) > FAILURE_REASONS_SHOWN:
            output.errors.print(f"... and {len(groups) - FAILURE_REASONS_SHOWN} other reasons", highlight=False)
        tracebacks = out / "tracebacks"
        where = f"the reason column of {out}/results.csv"
        if tracebacks.is_dir() and any(tracebacks.iterdir()):
            where += f" and {tracebacks}/"
        output.errors.print(f"[red]{failed} cells of this run failed[/red]: see {escape(where)}; rerun the command "
                            "to retry them", highlight=False)
    if any(row["status"] == "ok" for row in summary.rows.values()):
        output.console.print(f"next: equibench report --results {escape(shlex.quote(str(out)))} --out "
                             f"{escape(shlex.quote(str(out / 'report')))}", highlight=False)


def _print_methods(summary) -> None:
    """Per method: ok, skipped, failed (and missing) cells and the mean accuracy of the ok
    ones; then one line per distinct reason of the skipped cells."""
    stats = summary.methods()
    written = ", ".join(f"{n} {status}" for status, n in sorted(summary.counts.items())) or "nothing new"
    output.console.print(f"{escape(summary.suite)}: {len(summary.cells)} cells "
                         f"({len(summary.cells) - len(summary.pending)} already done); this run: {written}",
                         highlight=False)
    shown = [key for key in ("missing", "pending") if any(entry[key] for entry in stats.values())]
    columns = ["method", "ok", "skipped", "failed", *shown, "mean accuracy"]
    table = output.table(*columns)
    for column in table.columns[1:]:
        column.justify = "right"
    for name, entry in stats.items():
        accuracy = "" if entry["accuracy"] is None else f"{entry['accuracy']:.3f}"
        table.add_row(name, *(str(entry[column]) for column in columns[1:-1]), accuracy)
    output.console.print(table)
    for methods, n_cells, reason in summary.reasons("skipped"):
        output.console.print(f"{escape(', '.join(methods))}: {n_cells} cells skipped: {escape(reason)}", highlight=False)


def download(
    suite: Annotated[Optional[str], typer.Option(autocompletion=complete_suite, help="gt10, le10 or a suite file (.toml/.yaml); its OpenML tasks are fetched (demo tasks need none).")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="The OpenML cache to fill (created if missing); give it to `evaluate --openml-cache` later.")] = None,
    tasks: Annotated[Optional[str], typer.Option(help="Only these OpenML task ids, e.g. 5,7,41 (of the suite, if one is given).")] = None,
    verify: Annotated[Optional[Path], typer.Option(help="Check this cache offline instead (files parse, 10 folds cover every row once, classes); the tasks of --suite/--tasks, default all it holds.")] = None,
    server: Annotated[str, typer.Option(help="OpenML REST API to fetch from (a mirror or a local server).")] = "https://www.openml.org/api/v1/xml",
    retries: Annotated[int, typer.Option(help="Further attempts at a task after a transient error (connection, timeout, 5xx), with doubling waits.")] = 4,
    timeout_s: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the server to connect or send data.")] = 60.0,
    progress: Annotated[bool, typer.Option(help="Show the progress bar.")] = True,
) -> None:
    """Fetch a suite's OpenML tasks into a portable cache (resumable), or --verify a cache offline."""
    from ..tasks.cache_check import cached_task_ids, check_cache
    from ..tasks.download import DownloadOptions, download_tasks, select_tasks, tasks_table

    task_list = None if tasks is None else [str(task_id) for task_id in int_list(tasks, "--tasks")]
    if verify is not None:
        if cache is not None:
            raise InvalidInputError("--verify names the cache to check; leave out --cache")
        if not (verify / "org").is_dir():
            raise InvalidInputError(f"{str(verify)!r} is not an OpenML cache (no org/ folder inside); pass the folder given to --cache")
        task_ids = select_tasks(suite, task_list) if suite or task_list else cached_task_ids(verify)
        checks = check_cache(verify, [task_id for task_id in task_ids if not task_id.startswith("demo-")])
        output.console.print(tasks_table([(check, check.status) for check in checks], f"{len(checks)} tasks in {verify}"))
        bad = [check for check in checks if not check.ok]
        for check in bad:
            output.console.print(f"[red]task {check.task_id}[/red]: {escape(check.describe())}", highlight=False)
        if bad:
            output.console.print(f"fix: equibench download --cache {escape(shlex.quote(str(verify)))} --tasks {','.join(check.task_id for check in bad)}", highlight=False, soft_wrap=True)
            raise typer.Exit(code=1)
        output.console.print(f"all {len(checks)} tasks complete; evaluate offline with --openml-cache {escape(str(verify))}")
        return
    if cache is None:
        raise InvalidInputError("--cache DIR is required: the folder to download into (or pass --verify DIR)")
    options = DownloadOptions(server=server, retries=retries, timeout_s=timeout_s)
    summary = download_tasks(select_tasks(suite, task_list), cache, options, progress=progress, console=output.errors)
    output.console.print(tasks_table([(result.check, result.status) for result in summary.results], f"{cache}"))
    for result in summary.results:
        if result.error:
            output.console.print(f"[red]task {result.check.task_id}[/red]: {escape(result.error)}", highlight=False)
    if summary.failed:
        output.console.print(f"[red]missing tasks[/red]: {', '.join(summary.failed)}; rerun the same command to retry them "
                             "(what is complete is kept)", highlight=False)
        raise typer.Exit(code=1)
    output.console.print(f"cache complete; check it with `equibench download --verify {escape(str(cache))}`, "
                         f"use it with `equibench evaluate --openml-cache {escape(str(cache))}`", highlight=False)


def methods_data() -> list[dict]:
    """What `equibench methods` reports, as plain data."""
    rows = []
    for spec in METHODS.values():
        missing = spec.requires is not None and not spec.requires.installed()
        # a method that runs only with the user's weights is ready when its environment variable gives them
        weights_given = spec.needs_weights and spec.given_weights(MethodOptions()) is not None
        rows.append({
            "method": spec.name, "label": spec.label, "variants": "ensemble sizes" if spec.ensembles else "default",
            "ready": not missing and (not spec.needs_weights or weights_given),
            "install": f"pip install \"{spec.requires.pip}\"" if missing else None,
            "needs_weights": spec.needs_weights, "weights_given": weights_given,
            "weights_option": f"--weights {spec.name}={spec.weights.metavar}" if spec.weights else None,
            "weights_env": spec.weights.env if spec.weights else None,
        })
    return rows


def _method_status(row: dict) -> str:
    """A method's line in `equibench methods`: ready, or what it still needs (its cells are
    skipped until then); for a method run on the user's weights, where those come from."""
    needs = [escape(row["install"])] if row["install"] else []
    if row["needs_weights"] and not row["weights_given"]:
        env = f" (or ${row['weights_env']})" if row["weights_env"] else ""
        needs.append(f"{row['weights_option']}{env}")
    if needs:
        return f"[yellow]needs {' and '.join(needs)}[/yellow]: its cells are skipped"
    given = f", weights from ${row['weights_env']}" if row["needs_weights"] else ""
    return f"[green]ready[/green]{given}"


def methods(as_json: JsonOption = False) -> None:
    """The methods `equibench evaluate` can run, and whether each can run here."""
    rows = methods_data()
    if as_json:
        output.print_json(rows)
        return
    table = output.table("method", "label", "variants", "status")
    for row in rows:
        table.add_row(row["method"], row["label"], row["variants"], _method_status(row))
    output.console.print(table)


def suites(as_json: JsonOption = False) -> None:
    """The built-in task suites, with all their task ids."""
    from ..tasks.suites import BUILTIN_SUITES

    if as_json:  # an OpenML task's id as the integer it is, a demo task's as its name
        output.print_json([{"suite": s.name, "tasks": len(s.task_ids),
                            "task_ids": [int(t) if t.isdecimal() else t for t in s.task_ids]}
                           for s in BUILTIN_SUITES.values()])
        return
    table = output.table("suite", "tasks", "task ids")
    for suite in BUILTIN_SUITES.values():
        table.add_row(suite.name, str(len(suite.task_ids)), ", ".join(suite.task_ids))
    output.console.print(table)
