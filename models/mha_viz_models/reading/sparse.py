"""Sparse attention read from inside the model (DeepSeek-V3.2's and GLM-5's `indexed_attention`): a layer's indexer
picks each query's top keys, and its softmax runs over those alone. One forward reads, for each such layer, the keys
the indexer picked (its output, or the picks a shared layer reuses from the layer before: GLM-5's `"shared"` layers)
and the dense probabilities the same layer would give with every key picked: the layer is called a second time on
its own inputs with its indexer's top-k at least the text's length (or the reused picks all keys), and that call's
output is dropped, so the model runs on as it does. Nothing else of the model changes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


@dataclass(frozen=True)
class SparseLayer:
    """One indexed layer of a one-text forward: picked (n, n) bool, the keys the indexer kept for each query that the
    query may see (causal); sparse (H, n, n) and dense (H, n, n) float32, its probabilities as it ran and with every
    key picked."""
    layer: int
    picked: torch.Tensor
    sparse: torch.Tensor
    dense: torch.Tensor


def indexed(module: nn.Module) -> bool:
    """Whether an attention module picks its keys by an indexer (its own, or a previous layer's picks it reuses)."""
    return hasattr(module, "indexer") and (module.indexer is None or hasattr(module.indexer, "index_topk"))


def read(hf_model: nn.Module, modules: list[nn.Module], input_ids: torch.Tensor,
         on_layer: Callable[[SparseLayer], object]) -> list:
    """Run `hf_model` once on `input_ids` (1, n) (eager attention) and hand each indexed layer of `modules` (the
    model's attention modules, in layer order) to `on_layer` as it runs, one layer's probabilities held at a time;
    returns what it returned, in layer order. The caller holds the model's lock."""
    n = input_ids.shape[1]
    seen: dict[int, dict] = {}  # layer -> its call's args, kwargs, the indexer's picks, while it runs
    found: list = []
    again = [False]  # the second (dense) call runs: its indexer's picks are not the layer's
    handles = []
    for layer, module in enumerate(modules):
        if not indexed(module):
            continue

        def before(mod, args, kwargs, layer=layer):
            seen[layer] = {"args": args, "kwargs": dict(kwargs)}

        def picks(mod, args, out, layer=layer):
            if not again[0]:
                seen[layer]["picks"] = out

        def after(mod, args, kwargs, out, layer=layer):
            if again[0]:
                return None
            call = seen[layer]
            again[0] = True
            try:
                dense = _dense_call(mod, call, n)
            finally:
                again[0] = False
            found.append(on_layer(_layer(layer, call, out[1], dense, n)))
            seen.pop(layer)  # its inputs and picks let go
            return None

        handles.append(module.register_forward_pre_hook(before, with_kwargs=True))
        handles.append(module.register_forward_hook(after, with_kwargs=True))
        if module.indexer is not None:
            handles.append(module.indexer.register_forward_hook(picks))
    _forward(hf_model, input_ids, handles)
    return found


def picks(hf_model: nn.Module, modules: list[nn.Module], input_ids: torch.Tensor) -> dict[int, torch.Tensor]:
    """{position of the layer in `modules`: its picks (n, k) int32, each query's picked keys (−1: none)} for every
    indexed layer, from one forward of `hf_model` on `input_ids` (1, n) that keeps nothing else (no probabilities
    returned: one layer's are held at a time, as the model computes them). A shared layer's are the picks it was
    handed. The caller holds the model's lock."""
    found: dict[int, torch.Tensor] = {}
    handles = []
    for layer, module in enumerate(modules):
        if not indexed(module):
            continue

        def handed(mod, args, kwargs, layer=layer):
            if mod.indexer is None and kwargs.get("prev_topk_indices") is not None:
                found[layer] = kwargs["prev_topk_indices"][0].to(torch.int32).cpu()

        def kept(mod, args, out, layer=layer):
            found[layer] = out[0].to(torch.int32).cpu()

        handles.append(module.register_forward_pre_hook(handed, with_kwargs=True))
        if module.indexer is not None:
            handles.append(module.indexer.register_forward_hook(kept))
    _forward(hf_model, input_ids, handles)
    return dict(sorted(found.items()))


def _forward(hf_model: nn.Module, input_ids: torch.Tensor, handles: list) -> None:
    """One forward of `input_ids` with the hooks `handles` in place, removed after it whatever happens."""
    try:
        with torch.inference_mode():
            hf_model(input_ids=input_ids, use_cache=False)
    finally:
        for h in handles:
            h.remove()


def _dense_call(module: nn.Module, call: dict, n: int) -> torch.Tensor:
    """The layer's probabilities (1, H, n, n) with every key picked: its own forward on the same inputs, hooks
    skipped, with its indexer's top-k raised to n (or the reused picks replaced by every key)."""
    kwargs = dict(call["kwargs"])
    if module.indexer is None:  # a shared layer: the picks it reuses, every key instead
        reused = kwargs["prev_topk_indices"]
        kwargs["prev_topk_indices"] = torch.arange(n, dtype=reused.dtype, device=reused.device).expand(1, n, n)
        return module.forward(*call["args"], **kwargs)[1]
    topk = module.indexer.index_topk
    module.indexer.index_topk = max(topk, n)
    try:
        return module.forward(*call["args"], **kwargs)[1]
    finally:
        module.indexer.index_topk = topk


def _layer(layer: int, call: dict, sparse: torch.Tensor, dense: torch.Tensor, n: int) -> SparseLayer:
    picks = call.get("picks")
    if picks is None:  # a shared layer: the picks it was handed
        picks = call["kwargs"].get("prev_topk_indices")
    chosen = torch.zeros((n, n), dtype=torch.bool)
    chosen.scatter_(-1, picks[0].long().cpu(), True)
    visible = torch.ones((n, n), dtype=torch.bool).tril()  # a decoder's query sees the keys up to itself
    return SparseLayer(layer, chosen & visible, sparse[0].float().cpu(), dense[0].float().cpu())
