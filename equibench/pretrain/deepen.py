"""Continue a trained model with more layers: the new layers start as exact identities.

In a pre-LN block, ``tokens + out(attention(norm(tokens)))`` then ``tokens + mlp(norm(tokens))``,
zeroing the attention's output projection and the MLP's last linear map makes the block
return its input unchanged. A deeper model whose extra layers are such blocks computes
exactly what the trained model computes, and training then grows them from there. The new
layers are spread evenly between the trained ones (4 -> 6 layers: after the second and the
fourth).
"""

from __future__ import annotations

import copy
import dataclasses

import torch
from torch import nn

from ..model.layers import ComponentAttentionBlock, DatapointAttentionBlock

# the module list holding each architecture's stack of blocks, in layer order
_STACKS = {"equitabpfn": "layers", "tabpfn-star": "blocks"}


def can_deepen(source: nn.Module, target: nn.Module) -> bool:
    """Whether ``target`` is ``source``'s architecture and configuration with more layers, pre-LN."""
    return (
        source.arch == target.arch
        and source.config.norm_first
        and target.config.n_layers > source.config.n_layers
        and dataclasses.replace(target.config, n_layers=source.config.n_layers) == source.config
    )


def layer_plan(old_layers: int, new_layers: int) -> list[int | None]:
    """For each layer of the deeper model, the trained layer it copies, or None for a new one.
    The ``new_layers - old_layers`` new ones follow every ``old_layers / extra`` trained ones."""
    extra = new_layers - old_layers
    after = [-(-k * old_layers // extra) for k in range(1, extra + 1)]  # trained layers before each new one
    plan: list[int | None] = [None] * after.count(0)
    for layer in range(old_layers):
        plan += [layer] + [None] * after.count(layer + 1)
    return plan


@torch.no_grad()
def deepened_state(source: nn.Module, target: nn.Module) -> dict[str, torch.Tensor]:
    """A state dict for ``target`` (freshly initialised, see :func:`can_deepen`; left unchanged)
    that computes exactly what ``source`` computes: its weights, plus new layers that are identities."""
    target = copy.deepcopy(target)
    stack_name = _STACKS[source.arch]
    source_stack, target_stack = getattr(source, stack_name), getattr(target, stack_name)
    per_layer = len(source_stack) // source.config.n_layers  # blocks per layer: 1 (EquiTabPFN), 2 (TabPFN*)
    for block in target_stack.modules():
        if isinstance(block, (ComponentAttentionBlock, DatapointAttentionBlock)):
            for residual_output in (block.out, block.mlp[-1]):
                residual_output.weight.zero_()
                residual_output.bias.zero_()
    for new_layer, old_layer in enumerate(layer_plan(source.config.n_layers, target.config.n_layers)):
        if old_layer is None:
            continue
        for offset in range(per_layer):
            new_block = target_stack[new_layer * per_layer + offset]
            new_block.load_state_dict(source_stack[old_layer * per_layer + offset].state_dict())
    state = target.state_dict()
    for name, tensor in source.state_dict().items():
        if not name.startswith(f"{stack_name}."):
            state[name] = tensor.clone()
    return state
