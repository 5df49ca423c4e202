"""The summary of benchmarks/categorical_encodings.py: per-task means and differences to ordinal."""

from __future__ import annotations

import pandas as pd
import pytest


def test_summary_gives_each_variant_and_its_difference_to_ordinal(benchmark_module):
    study = benchmark_module("categorical_encodings")
    rows = []
    for task, accuracies in ((14967, (0.4, 0.9, 0.8)), (4, (0.9, 0.8, 0.95))):
        for fold in (0, 1):
            for variant, accuracy in zip(study.VARIANTS, accuracies):
                rows.append({"task": task, "dataset": f"t{task}", "classes": 2, "categorical": 1, "fold": fold,
                             "variant": variant, "accuracy": accuracy})
    wide = study.summary(pd.DataFrame(rows)).set_index("task")
    assert list(wide["set"]) == ["selection", "held out"]  # 14967 chose the default; 4 was held out
    assert wide.loc[14967, "onehot - ordinal"] == pytest.approx(50.0)
    assert wide.loc[4, "default (both) - ordinal"] == pytest.approx(5.0)
