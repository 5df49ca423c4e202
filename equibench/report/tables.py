"""Tables of ``equibench report``: method entries, metrics relative to KNN, the aggregate,
runtime, ensemble and skipped/failed tables, and their display forms (strings; written by
``equibench.tables``).

The table functions take the ok cells of one suite (with ``time_s`` = fit + predict seconds)
and return a DataFrame; nothing here runs a model.
"""

from __future__ import annotations

import json

import pandas as pd

from ..baselines.registry import METHODS
from ..baselines.settings import ensemble_size

KNN = "knn"
EQUITABPFN = "equitabpfn"
TABPFN_STAR = "tabpfn-star"
METRICS = ("accuracy", "auc", "f1")
MIN_CD_ROWS = 5  # autorank needs at least five paired samples
CONTEXT_DIAGNOSTICS = ("context_rows", "context_classes", "context_groups")  # the PFN methods' means per context
_NO_REASON = "(no reason recorded)"


def method_label(method: str) -> str:
    """Display name of a method (its registry label; the name itself for unknown methods)."""
    spec = METHODS.get(method)
    return spec.label if spec else method


def variant_members(variant: str) -> int:
    """Ensemble members of a variant (its ensemble size); 1 for "default" and other names."""
    return ensemble_size(variant) or 1


def _variant_key(variant: str) -> tuple[int, str]:
    return variant_members(variant), variant


def with_entries(cells: pd.DataFrame) -> pd.DataFrame:
    """Add ``entry`` (display label, "EquiTabPFN (n4)" when a method has several variants in
    its suite), ``members`` and ``main`` (whether the variant is the method's smallest)."""
    rows = []
    for (suite, method), variants in cells.groupby(["suite", "method"], sort=True)["variant"]:
        ordered = sorted(variants.unique(), key=_variant_key)
        label = method_label(method)
        rows.extend(
            {"suite": suite, "method": method, "variant": variant, "members": variant_members(variant),
             "entry": label if len(ordered) == 1 else f"{label} ({variant})", "main": variant == ordered[0]}
            for variant in ordered
        )
    entries = pd.DataFrame(rows, columns=["suite", "method", "variant", "members", "entry", "main"])
    return cells.merge(entries, on=["suite", "method", "variant"], how="left")


def has_ensembles(cells: pd.DataFrame) -> bool:
    """Whether some method has at least two ensemble-size variants."""
    sizes = cells["variant"].map(ensemble_size)  # None (which nunique skips) for other variants
    return bool((sizes.groupby(cells["method"]).nunique() >= 2).any())


def relative_to_knn(cells: pd.DataFrame, metric: str) -> pd.Series:
    """Per (entry, task_id): 100 × (mean ``metric`` − KNN's) / KNN's, both means taken over the
    folds where both have a value (tasks without KNN, or with KNN at 0, are left out)."""
    knn = cells.loc[(cells["method"] == KNN) & cells["main"], ["task_id", "fold", metric]]
    paired = cells[["entry", "task_id", "fold", metric]].merge(knn, on=["task_id", "fold"], suffixes=("", "_knn"))
    means = paired.dropna().groupby(["entry", "task_id"])[[metric, f"{metric}_knn"]].mean()
    reference = means[f"{metric}_knn"].where(means[f"{metric}_knn"] > 0)
    return (100 * (means[metric] - reference) / reference).dropna().rename(f"{metric}_rel_pct")


def support(cells: pd.DataFrame) -> pd.DataFrame:
    """What each entry's numbers rest on: tasks, the fewest and most folds of a task, and the
    seeds the cells were run with."""
    folds = cells.groupby(["entry", "task_id"])["fold"].nunique().groupby(level="entry")
    seeds = cells.groupby("entry")["seed"].nunique() if "seed" in cells else pd.Series(dtype=float)
    return pd.DataFrame({
        "n_tasks": cells.groupby("entry")["task_id"].nunique(), "folds_per_task_min": folds.min(),
        "folds_per_task_max": folds.max(), "n_seeds": seeds,
    })


def aggregate_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The paper's table over the main entries, indexed by entry: median relative accuracy vs
    KNN, mean and s.e.m. over tasks of the per-task fold means, the fold-to-fold s.d. (all in
    %), mean time per fold and :func:`support`; sorted by median relative, then mean, accuracy."""
    main = cells[cells["main"]]
    table = main.groupby("entry").agg(
        method=("method", "first"), variant=("variant", "first"), time_s=("time_s", "mean"), n_folds=("fold", "size"),
    ).join(support(main))
    table["median_rel_accuracy_pct"] = relative_to_knn(main, "accuracy").groupby(level="entry").median()
    per_task = main.groupby(["entry", "task_id"])[list(METRICS)].mean().groupby(level="entry")
    for metric in METRICS:
        table[f"{metric}_mean_pct"] = 100 * per_task[metric].mean()
        table[f"{metric}_sem_pct"] = 100 * per_task[metric].sem()
    fold_sd = main.groupby(["entry", "task_id"])["accuracy"].std()  # NaN for a task with one fold
    table["accuracy_fold_sd_pct"] = 100 * fold_sd.groupby(level="entry").mean()
    columns = ["method", "variant", "median_rel_accuracy_pct",
               *(f"{metric}_{stat}_pct" for metric in METRICS for stat in ("mean", "sem")), "accuracy_fold_sd_pct",
               "time_s", "n_tasks", "n_folds", "folds_per_task_min", "folds_per_task_max", "n_seeds"]
    table = table[columns].reset_index()
    table = table.sort_values(["median_rel_accuracy_pct", "accuracy_mean_pct", "entry"],
                              ascending=[False, False, True], na_position="last")
    return table.set_index("entry")


def runtime_table(cells: pd.DataFrame) -> pd.DataFrame:
    """EquiTabPFN vs TabPFN* per common variant: mean time per fold over the (task, fold) cells
    both ran, and the speed-up TabPFN* / EquiTabPFN; empty unless both are present."""
    columns = ["variant", "task_id", "fold", "time_s"]
    equi = cells.loc[cells["method"] == EQUITABPFN, columns]
    star = cells.loc[cells["method"] == TABPFN_STAR, columns]
    paired = equi.merge(star, on=["variant", "task_id", "fold"], suffixes=("_equi", "_star"))
    table = paired.groupby("variant").agg(
        n_folds=("time_s_equi", "size"), equitabpfn_s=("time_s_equi", "mean"), tabpfn_star_s=("time_s_star", "mean"),
    )
    table["speedup"] = table["tabpfn_star_s"] / table["equitabpfn_s"].where(table["equitabpfn_s"] > 0)
    return table.loc[sorted(table.index, key=_variant_key)]


def pareto_front(time_s: pd.Series, score: pd.Series) -> pd.Series:
    """Whether each point is Pareto-optimal for (lower time, higher score)."""
    ordered = score[sorted(time_s.index, key=lambda key: (time_s[key], -score[key]))]
    return (ordered > ordered.cummax().shift(fill_value=float("-inf"))).reindex(time_s.index)


def ensemble_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Every entry (all variants), indexed by entry: mean time per fold, mean over tasks of the
    AUC improvement over KNN (%), ensemble members and whether it is on the Pareto front."""
    table = cells.groupby("entry").agg(
        method=("method", "first"), variant=("variant", "first"), members=("members", "first"),
        time_s=("time_s", "mean"),
    ).join(support(cells))
    table["auc_rel_pct"] = relative_to_knn(cells, "auc").groupby(level="entry").mean()
    table = table.dropna(subset=["time_s", "auc_rel_pct"])
    ensembled = cells.loc[cells["variant"].map(ensemble_size).notna(), "method"].unique()
    table["ensemble"] = table["method"].isin(ensembled)
    table["pareto"] = pareto_front(table["time_s"], table["auc_rel_pct"])
    return table.sort_values(["method", "members", "variant"])


def ratio_speedup_table(cells: pd.DataFrame) -> pd.DataFrame:
    """The right panel of the paper's bubble figure, indexed by entry: every variant of the
    ensembled methods other than EquiTabPFN, with the mean over tasks of its AUC ratio to KNN
    and the speed-up of EquiTabPFN's smallest variant (the entry's mean time per fold over
    EquiTabPFN's, on the (task, fold) cells both ran); empty without EquiTabPFN and KNN."""
    columns = ["method", "variant", "members", "auc_ratio", "speedup", "equitabpfn_auc_ratio", "n_folds"]
    equi = cells[(cells["method"] == EQUITABPFN) & cells["main"]]
    ensembled = cells[cells["variant"].map(ensemble_size).notna() & (cells["method"] != EQUITABPFN)]
    if equi.empty or ensembled.empty:
        return pd.DataFrame(columns=columns)
    ratio = 1 + relative_to_knn(cells, "auc").groupby(level="entry").mean() / 100
    keys = ["task_id", "fold"]
    paired = ensembled[["entry", *keys, "time_s"]].merge(equi[[*keys, "time_s"]], on=keys, suffixes=("", "_equi"))
    times = paired.groupby("entry")[["time_s", "time_s_equi"]].mean()
    table = ensembled.groupby("entry").agg(method=("method", "first"), variant=("variant", "first"),
                                           members=("members", "first"))
    table["auc_ratio"] = ratio.reindex(table.index)
    table["speedup"] = times["time_s"] / times["time_s_equi"].where(times["time_s_equi"] > 0)
    table["equitabpfn_auc_ratio"] = ratio.get(equi["entry"].iloc[0], float("nan"))
    table["n_folds"] = paired.groupby("entry").size().reindex(table.index).fillna(0).astype(int)
    return table.sort_values(["method", "members", "variant"])[columns].dropna(subset=["auc_ratio", "speedup"])


def failures_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (suite, method): skipped and failed row counts and the most common reason."""
    bad = rows[rows["status"] != "ok"].assign(reason=lambda frame: frame["reason"].fillna(_NO_REASON))
    records = []
    for (suite, method), group in bad.groupby(["suite", "method"], sort=True):
        reasons = group["reason"].value_counts()
        reason = min(reasons.index, key=lambda text: (-reasons[text], text))
        records.append({"suite": suite, "method": method, "skipped": int((group["status"] == "skipped").sum()),
                        "failed": int((group["status"] == "failed").sum()), "most_common_reason": reason,
                        "reason_count": int(reasons[reason])})
    return pd.DataFrame(records, columns=["suite", "method", "skipped", "failed", "most_common_reason", "reason_count"])


def _number(value: float, digits: int = 1, missing: str = "n/a") -> str:
    return missing if pd.isna(value) else f"{value:.{digits}f}"


def _seconds(value: float) -> str:
    return "n/a" if pd.isna(value) else f"{value:.3g}"


def _mean_sem(mean: float, sem: float) -> str:
    return _number(mean) if pd.isna(sem) or pd.isna(mean) else f"{mean:.1f} ± {sem:.1f}"


def _count(value: float) -> str:
    return "n/a" if pd.isna(value) else str(int(value))


def _support_display(table: pd.DataFrame) -> dict[str, list[str]]:
    """The columns of :func:`support`: tasks, folds per task ("10", or "3-10" when tasks have
    different numbers of folds) and seeds."""
    return {"tasks": table["n_tasks"].astype(str).to_list(),
            "folds per task": [_count(low) if low == high or pd.isna(low) else f"{int(low)}-{int(high)}"
                               for low, high in zip(table["folds_per_task_min"], table["folds_per_task_max"])],
            "seeds": table["n_seeds"].map(_count).to_list()}


def aggregate_display(table: pd.DataFrame) -> pd.DataFrame:
    """The aggregate table formatted like the paper's (strings)."""
    display = pd.DataFrame({"method": table.index})
    display["median rel. acc. vs KNN (%)"] = table["median_rel_accuracy_pct"].map(_number).to_numpy()
    for metric, name in (("accuracy", "accuracy (%)"), ("auc", "AUC (%)"), ("f1", "F1 (%)")):
        display[name] = [_mean_sem(m, s) for m, s in zip(table[f"{metric}_mean_pct"], table[f"{metric}_sem_pct"])]
    display["fold-to-fold s.d. of accuracy (%)"] = table["accuracy_fold_sd_pct"].map(_number).to_numpy()
    display["time per fold (s)"] = table["time_s"].map(_seconds).to_numpy()
    return display.assign(**_support_display(table))


def relative_speed(speedup: float) -> str:
    """A speed-up (the other's time over EquiTabPFN's) in words: "1.50× faster" or, below 1,
    "4.20× slower" (its inverse), never "0.24× speed-up"."""
    if pd.isna(speedup) or speedup <= 0:
        return "n/a"
    if round(speedup, 2) == 1 or round(1 / speedup, 2) == 1:
        return "as fast (1.00×)"
    return f"{speedup:.2f}× faster" if speedup > 1 else f"{1 / speedup:.2f}× slower"


def runtime_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "variant": table.index,
        "folds": table["n_folds"].astype(str).to_numpy(),
        f"{method_label(EQUITABPFN)} (s)": table["equitabpfn_s"].map(_seconds).to_numpy(),
        "TabPFN* (s)": table["tabpfn_star_s"].map(_seconds).to_numpy(),
        f"{method_label(EQUITABPFN)} vs TabPFN*": table["speedup"].map(relative_speed).to_numpy(),
    })


def ensemble_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "method": table.index,
        "members": table["members"].astype(str).to_numpy(),
        "time per fold (s)": table["time_s"].map(_seconds).to_numpy(),
        "AUC improvement over KNN (%)": table["auc_rel_pct"].map(_number).to_numpy(),
        "Pareto front": ["yes" if value else "" for value in table["pareto"]],
        **_support_display(table),
    })


def ratio_speedup_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "method": table.index,
        "members": table["members"].astype(str).to_numpy(),
        "AUC ratio to KNN": table["auc_ratio"].map(lambda value: _number(value, 3)).to_numpy(),
        f"{method_label(EQUITABPFN)}'s AUC ratio": table["equitabpfn_auc_ratio"].map(lambda value: _number(value, 3)).to_numpy(),
        f"{method_label(EQUITABPFN)} vs it": table["speedup"].map(relative_speed).to_numpy(),
        "paired folds": table["n_folds"].astype(str).to_numpy(),
    })


def failures_display(table: pd.DataFrame) -> pd.DataFrame:
    reasons = [text if len(text) <= 120 else text[:119] + "…" for text in table["most_common_reason"]]
    return pd.DataFrame({
        "suite": table["suite"], "method": table["method"], "skipped": table["skipped"].astype(str),
        "failed": table["failed"].astype(str),
        "most common reason (count)": [f"{text} ({count})" for text, count in zip(reasons, table["reason_count"])],
    })


def diagnostics(cells: pd.DataFrame, keys) -> pd.DataFrame:
    """The ``keys`` of each cell's diagnostics (the JSON text of its ``diagnostics`` column, as
    results.csv holds it; missing: NaN), one column each."""
    found = [json.loads(text) if isinstance(text, str) else {} for text in cells.get("diagnostics", [None] * len(cells))]
    return pd.DataFrame([[row.get(key, float("nan")) for key in keys] for row in found], index=cells.index,
                        columns=list(keys))


def context_table(cells: pd.DataFrame) -> pd.DataFrame:
    """Per entry (every variant), sorted by accuracy: mean accuracy (%) over tasks of each task's
    mean over folds, mean fit + predict and predict-only seconds per 1,000 test rows over all
    cells, and the PFN entries' means of :data:`CONTEXT_DIAGNOSTICS`."""
    cells = cells.assign(fit_predict_s_per_1k=1000 * (cells["time_fit_s"] + cells["time_predict_s"]) / cells["n_test"],
                         predict_s_per_1k=1000 * cells["time_predict_s"] / cells["n_test"],
                         **diagnostics(cells, CONTEXT_DIAGNOSTICS))
    per_task = cells.groupby(["entry", "task_id"])["accuracy"].mean()
    table = pd.DataFrame({
        "accuracy": 100 * per_task.groupby(level="entry").mean(),
        "fit_predict_s_per_1k": cells.groupby("entry")["fit_predict_s_per_1k"].mean(),
        "predict_s_per_1k": cells.groupby("entry")["predict_s_per_1k"].mean(),
        "tasks": per_task.groupby(level="entry").size(),
    })
    for column in CONTEXT_DIAGNOSTICS:
        table[column] = cells.groupby("entry")[column].mean()
    return table.sort_values("accuracy", ascending=False)


def context_display(table: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "method": table.index, "accuracy (%)": [f"{v:.2f}" for v in table["accuracy"]],
        "fit + predict s / 1,000 rows": [f"{v:.3g}" for v in table["fit_predict_s_per_1k"]],
        "predict s / 1,000 rows": [f"{v:.3g}" for v in table["predict_s_per_1k"]],
        "rows / context": [_number(v, 0, "") for v in table["context_rows"]],
        "classes / context": [_number(v, 1, "") for v in table["context_classes"]],
        "groups": [_number(v, 1, "") for v in table["context_groups"]], "tasks": table["tasks"].astype(int),
    })
