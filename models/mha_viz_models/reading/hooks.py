"""Hooks on the layers of a model whose layers may share one module (ALBERT runs its single
attention module once per layer): one hook per distinct module, told which layer each call is."""

from __future__ import annotations

from typing import Callable

from torch import nn


def distinct(modules: list[nn.Module]) -> list[nn.Module]:
    """The modules without repeats, in first-seen order: a hook on each fires once per call, so
    a shared module's hook still records every layer, in the order the model runs them."""
    return list({id(m): m for m in modules}.values())


def layer_pre_hooks(modules: list[nn.Module], hook_for: Callable[[int], Callable]) -> list:
    """A forward pre-hook on each distinct module of `modules` (one a layer, in the order the
    model runs them) that hands each call to `hook_for(layer)`'s hook: the k-th call of a module
    shared by layers [a, b, c] is layer [a, b, c][k mod 3]. Returns the handles."""
    layers_of: dict[int, tuple[nn.Module, list[int]]] = {}
    for layer, module in enumerate(modules):
        layers_of.setdefault(id(module), (module, []))[1].append(layer)
    handles = []
    for module, layers in layers_of.values():
        hooks, calls = [hook_for(layer) for layer in layers], [0]

        def hook(mod, args, hooks=hooks, calls=calls):
            h = hooks[calls[0] % len(hooks)]
            calls[0] += 1
            return h(mod, args)
        handles.append(module.register_forward_pre_hook(hook))
    return handles
