"""benchmarks/suffix_average.py: two schedule-free averages give the average of the steps between."""

from __future__ import annotations

import schedulefree
import torch


def _x(model: torch.nn.Module, optimizer) -> dict:
    """The optimiser's evaluation weights x, leaving it in train mode."""
    optimizer.eval()
    x = {name: tensor.detach().double().clone() for name, tensor in model.state_dict().items()}
    optimizer.train()
    return x


def test_suffix_average_is_the_mean_of_the_later_iterates(benchmark_module):
    suffix = benchmark_module("suffix_average")
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    optimizer = schedulefree.AdamWScheduleFree(model.parameters(), lr=1e-2, warmup_steps=3)
    optimizer.train()
    iterates, weight_sums, averages = [], [], []
    for _ in range(12):
        optimizer.zero_grad()
        model(torch.randn(8, 3)).square().mean().backward()
        optimizer.step()
        iterates.append({name: optimizer.state[p]["z"].double().clone() for name, p in model.named_parameters()})
        weight_sums.append(optimizer.param_groups[0]["weight_sum"])
        averages.append(_x(model, optimizer))

    s, t = 5, 12  # steps: the suffix is steps 6..12 (warm-up over, so equal weights)
    w_s, w_t = weight_sums[s - 1], weight_sums[t - 1]
    combined = suffix.extrapolated(averages[s - 1], averages[t - 1], w_s / (w_t - w_s))
    for name in combined:
        expected = torch.stack([iterate[name] for iterate in iterates[s:t]]).mean(dim=0)
        torch.testing.assert_close(combined[name], expected, rtol=0, atol=1e-6)
        assert not torch.allclose(averages[t - 1][name], expected, atol=1e-4)  # the suffix is not x_t


def test_extrapolated_steps_along_the_path_and_keeps_integer_tensors(benchmark_module):
    suffix = benchmark_module("suffix_average")
    start = {"w": torch.tensor([1.0, 2.0]), "count": torch.tensor(3)}
    end = {"w": torch.tensor([2.0, 2.5]), "count": torch.tensor(7)}
    moved = suffix.extrapolated(start, end, 0.5)
    torch.testing.assert_close(moved["w"], torch.tensor([2.5, 2.75]))
    assert moved["w"].dtype == torch.float32
    assert moved["count"].item() == 7
