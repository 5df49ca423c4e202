"""The quality bar script (benchmarks/quality.py): every model runs on --threads threads."""

from __future__ import annotations

import sys

import pytest
import torch
from threadpoolctl import threadpool_info


class _Measured(Exception):
    pass


@pytest.mark.parametrize("threads", [1, 2])
def test_models_run_on_the_given_threads(benchmark_module, monkeypatch, threads):
    quality = benchmark_module("quality")
    seen = {}

    def bundled_scores(pfns):
        seen["torch"] = torch.get_num_threads()
        seen["openmp"] = {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "openmp"}
        raise _Measured

    monkeypatch.setattr(quality, "bundled_scores", bundled_scores)
    monkeypatch.setattr(sys, "argv", ["quality.py", "--threads", str(threads)])
    outside = torch.get_num_threads()
    with pytest.raises(_Measured):
        quality.main()
    assert seen["torch"] == threads and seen["openmp"] <= {threads}
    assert torch.get_num_threads() == outside


def test_threads_must_be_positive(benchmark_module, monkeypatch, capsys):
    quality = benchmark_module("quality")
    monkeypatch.setattr(sys, "argv", ["quality.py", "--threads", "0"])
    with pytest.raises(SystemExit) as exit_info:
        quality.main()
    assert exit_info.value.code == 2
    assert "--threads takes a positive number, got 0" in capsys.readouterr().err
