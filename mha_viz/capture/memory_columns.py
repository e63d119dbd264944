"""A run's compressed memory entries (DeepSeek-V4: `mha_viz_models.attention.memory`): the columns of its compressed
layers beside the tokens. Each row of such a layer spreads its mass over the tokens (the run's `attentions`), over
the entries (`Memory`) and over the head's learned sink (what the row lacks); `shares` splits it.

The entries are kept with the tokens they were captured with: a run whose tokens change (hidden tokens, renormalised
over the kept keys) holds none, and `of` gives none for a run of another length.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz_models.attention.memory import MemoryLayout, entry_label, memory_layouts

PARTS = ("tokens", "compressed memory", "sink")


@dataclass(frozen=True, eq=False)
class Memory:
    """The entries of one text's compressed layers. layers: their model layer numbers; weights: float32 (H, n, C)
    each, the weight each query row gives each entry; spans: int64 (C, 2) each, the first token and one past the last
    that an entry compresses; layouts: each layer's `MemoryLayout`; n: the tokens they were captured with."""

    layers: tuple[int, ...]
    weights: tuple[np.ndarray, ...]
    spans: tuple[np.ndarray, ...]
    layouts: tuple[MemoryLayout, ...]
    n: int

    def at(self, number: int) -> int | None:
        """The position of model layer `number` among `layers`, or None."""
        return self.layers.index(number) if number in self.layers else None


@dataclass(frozen=True)
class LayerMemory:
    """One layer's entries in a run: weights (H, n, C), spans (C, 2), labels (C,) ("▤ 4–11"), its layout."""

    weights: np.ndarray
    spans: np.ndarray
    labels: list[str]
    layout: MemoryLayout


def captured(config, memory, chosen: list[int], numbers: list[int], n: int) -> Memory | None:
    """The entries of a capture (`Capture.memory`: per attention layer (1, H, n, C) or None) for the attention layers
    at positions `chosen`, model layer numbers `numbers`; None where none of them has entries."""
    if memory is None:
        return None
    layouts = memory_layouts(config)
    found = [(number, memory[at]) for at, number in zip(chosen, numbers)
             if memory[at] is not None and number in layouts]
    if not found:
        return None
    weights = tuple(np.ascontiguousarray(m[0].detach().float().cpu().numpy()) for _, m in found)
    spans = tuple(layouts[number].spans(n) for number, _ in found)
    for (number, _), w, s in zip(found, weights, spans):
        if w.shape[-1] != len(s):
            raise ValueError(f"layer {number} returned {w.shape[-1]} compressed entries; its windows make {len(s)}")
    return Memory(layers=tuple(number for number, _ in found), weights=weights, spans=spans,
                  layouts=tuple(layouts[number] for number, _ in found), n=n)


def of(run, layer: int) -> LayerMemory | None:
    """The entries of the run's layer `layer` (its row), or None: a run without, a layer without, or a run whose
    tokens are not those the entries were captured with."""
    memory = getattr(run, "memory", None)
    if memory is None or memory.n != run.n:
        return None
    at = memory.at(run.layer_ids[layer])
    if at is None:
        return None
    spans = memory.spans[at]
    return LayerMemory(memory.weights[at], spans, [entry_label(s) for s in spans], memory.layouts[at])


def mass(run, layer: int) -> np.ndarray:
    """float64 (H, n): what each row of the run's layer `layer` gives the compressed entries (0 for a layer
    without)."""
    found = of(run, layer)
    if found is None:
        return np.zeros((run.num_heads, run.n))
    return found.weights.sum(-1, dtype=np.float64)


def shares(run, layer: int) -> np.ndarray:
    """float64 (3, H, n): each row's mass on the tokens, on the compressed entries and on the sink (what the row
    lacks), the three summing to 1."""
    tokens = run.layer_rows(layer).sum(-1, dtype=np.float64)
    memory = mass(run, layer)
    return np.stack([tokens, memory, np.clip(1.0 - tokens - memory, 0.0, None)])


def has_memory(run) -> bool:
    """Whether the run holds compressed memory entries for its tokens."""
    memory = getattr(run, "memory", None)
    return memory is not None and memory.n == run.n
