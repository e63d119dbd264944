"""`effective_attention`: the exact effective attention of every token-mixing layer of a model that
is not softmax attention (Mamba-1, Mamba-2, gated DeltaNet, Kimi Delta Attention, lightning
attention, short convolutions, RG-LRU), from one forward pass. The kernel is
`mha_viz_models.effective`; the formulas: docs/effective-attention.md."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TypeVar

import numpy as np
import pandas as pd

from mha_viz.drawing.effective import EffectiveThumbnails, PoolRows, layer_row
from mha_viz.metrics.mixing_measures import MeasureSums, effective_measures, measures_frame
from mha_viz.metrics.row_measures import token_keys
from mha_viz.text.tokenize import tokenize
from mha_viz_models.effective import EffectiveLayer, NotExact, each_layer, mixing_layers, reconstruct
from mha_viz_models.effective.layer import feed, row_step
from mha_viz_models.loading import switch

__all__ = ["SOFTMAX", "EffectiveAttention", "EffectiveLayer", "Held", "NotExact", "each_reduced", "effective_attention",
           "held", "kind", "need_bytes", "pooled_layer", "summarised"]

T = TypeVar("T")
SOFTMAX = "softmax attention"  # the kind of a layer's softmax heads, beside the kinds of `EffectiveLayer.label`


def kind(layer: EffectiveLayer) -> str:
    """An effective layer's kind, as tables and the grid name it: its label up to its colon ("gated DeltaNet")."""
    return layer.label.split(":")[0]


@dataclass(frozen=True)
class EffectiveAttention:
    """One text's effective attention. layers: one `EffectiveLayer` per non-softmax token-mixing
    layer in the model's layer order (its `layer`, `kind`, `label`, `matrix` (groups, n, n) float32,
    `value_name`, `values` (n, groups, d) and `parts`)."""

    tokens: list[str]
    token_ids: list[int]
    layers: list[EffectiveLayer]
    # every token mixer's mean output norm, mean_t ‖out_t‖, by (the model's layer number, its kind): the softmax
    # attention's (after W_O; kind SOFTMAX) and these (their kind: their label up to its colon), each times what its
    # layer multiplies it by before the stream (Falcon-H1's μP multipliers); one layer holds two where it runs
    # attention and another mixer (Falcon-H1, Zamba2); empty when not measured (`mixing_shares`)
    output_norms: dict[tuple[int, str], float] = field(default_factory=dict)

    def mixing_shares(self) -> dict[tuple[int, str], float]:
        """Each token mixer's share of what all of them write (its mean output norm over their sum), by (layer
        number, kind) in the model's layer order, the softmax attention first in a layer: how much of the model's
        token mixing each layer, and so each kind, does on this text."""
        total = sum(self.output_norms.values())
        order = sorted(self.output_norms, key=lambda key: (key[0], key[1] != SOFTMAX))
        return {key: self.output_norms[key] / total for key in order} if total > 0 else {}

    @property
    def layer_ids(self) -> list[int]:
        return [la.layer for la in self.layers]

    def layer(self, number: int) -> EffectiveLayer:
        for la in self.layers:
            if la.layer == number:
                return la
        raise KeyError(f"Layer {number} is not among this run's layers {self.layer_ids}.")

    def measures(self):
        """Every head or channel group's measures on |A| (`metrics.effective_measures`): a DataFrame, one row a group,
        in the model's layer order."""
        return effective_measures(self)

    def output(self, number: int) -> np.ndarray:
        """The layer's output (n, hidden) rebuilt from its matrix, values and separate parts."""
        return reconstruct(self.layer(number)).numpy()


def effective_attention(model, text: str, *, layers=None, max_tokens: int | None = None) -> EffectiveAttention:
    """The effective attention of `model`'s (a loaded model's) non-softmax token-mixing layers on
    `text` (cut to `max_tokens` as every run is). `layers`: model layer numbers, default all such
    layers. Raises NotExact, naming the reason, for a layer that cannot be made exact."""
    run, found = each_reduced(model, text, lambda _run, la: la, layers=layers, max_tokens=max_tokens)
    return replace(run, layers=found)


def each_reduced(model, text: str, reduce: Callable[[EffectiveAttention, EffectiveLayer], T], *, layers=None,
                 max_tokens: int | None = None, by_rows: bool = False) -> tuple[EffectiveAttention, list[T]]:
    """`effective_attention` with each layer handed to `reduce(run, layer)` as soon as its matrices are made (`run`:
    the tokens, no layers, no output norms yet), then let go: (the run without its layers (tokens, ids, output
    norms), what `reduce` returned for each layer in the model's order).
    A `reduce` that keeps no matrix (a thumbnail, measures) holds one layer's n × n matrices at a time
    (`held`), not every layer's; with `by_rows`, a layer whose kind can comes without its matrix, its rows
    made a block at a time as `reduce` reads `layer.blocks()` (`summarised`): what it holds grows as n, not n²
    (`Held`). The forward runs the softmax layers fused (SDPA): nothing here reads their probabilities."""
    toks = tokenize(model, text, max_tokens)
    norms: dict[tuple[int, bool], float] = {}

    def keep(key: tuple[int, bool]):
        def hook(_module, _args, out):
            out = out[0] if isinstance(out, tuple) else out  # (output, weights or state)
            norms[key] = float(out[0].float().norm(dim=-1).mean())
        return hook
    modules = [((number, True), m) for number, (m, _family) in zip(model.layer_ids, model.attention_modules)]
    modules += [((number, False), m) for number, _name, m, _kind in mixing_layers(model.hf_model)]
    with model.lock:
        hooks = [m.register_forward_hook(keep(key)) for key, m in modules]
        try:  # one forward: the effective layers' taps and every mixing layer's output norm
            with switch.fused(model):
                each = each_layer(model.hf_model, toks.ids, layers=layers, by_rows=by_rows)
        finally:
            for h in hooks:
                h.remove()
        bare = EffectiveAttention(tokens=list(toks.display), token_ids=list(toks.ids), layers=[])
        kinds, reduced = {}, []
        for la in each:
            kinds[la.layer] = kind(la)
            reduced.append(reduce(bare, la))
            del la  # before the next layer's matrices are made
    if not reduced:
        raise NotExact(f"{model.name} has no token-mixing layer besides softmax attention that mha-viz reads.")
    named = {}
    if layers is None:  # every mixer ran and every effective layer was read: each mixer's norm under its kind
        factor = _out_multipliers(model.hf_model, modules)
        named = {(number, SOFTMAX if softmax else kinds[number]): norm * factor[number, softmax]
                 for (number, softmax), norm in norms.items()}
    return replace(bare, output_norms=named), reduced


# what a layer multiplies its mixers' outputs by before they reach the stream, by the attribute that holds it on the
# decoder layer (Falcon-H1's μP multipliers), for the softmax attention (True) and the other mixer (False); the
# attention's is folded into its W_O at load (`mha_viz_models.families.multipliers`) unless accelerate offloaded it
OUT_MULTIPLIERS = {True: "attn_out_multiplier", False: "ssm_out_multiplier"}


def _out_multipliers(hf_model, modules) -> dict[tuple[int, bool], float]:
    """{(layer number, softmax): the factor the mixer's output is written into the stream with}: its decoder layer's
    OUT_MULTIPLIERS attribute where it has one, else 1."""
    by_name = dict(hf_model.named_modules())
    names = {id(m): name for name, m in by_name.items()}
    factors = {}
    for key, m in modules:
        parent = by_name.get(names.get(id(m), "").rpartition(".")[0])
        factors[key] = abs(float(getattr(parent, OUT_MULTIPLIERS[key[1]], 1.0)))
    return factors


PROBE_TOKENS = 8  # the short probe that counts a model's matrices (`held`)


def summarised(run: EffectiveAttention, layer: EffectiveLayer) -> tuple[EffectiveThumbnails, pd.DataFrame]:
    """A layer's row of thumbnails and its measures' table (`effective_measures`), from one pass over its blocks of
    rows (`EffectiveLayer.blocks`): a reducer for `each_reduced`, which with `by_rows` holds a block, not the layer."""
    pool, sums = PoolRows(layer.shown_groups, layer.n), MeasureSums(layer.shown_groups, token_keys(run.token_ids,
                                                                                                  run.tokens))
    feed(layer, pool, sums)
    return layer_row(layer, *pool.finish()), measures_frame(layer.layer, layer.label, sums.finish())


def pooled_layer(model, text: str, number: int, *, side: int,
                 max_tokens: int | None = None) -> tuple[np.ndarray, EffectiveLayer, list[str]]:
    """One other layer's every group as at most `side` × `side` cells (`PoolRows`: every cell where n ≤ side, else
    each cell a block's value of largest |A|, its sign kept), read by rows where its kind can, as the summary is:
    ((G, s, s) float32, the layer (its matrix let go), the tokens)."""
    def pool(_run, la):
        pooled = PoolRows(la.shown_groups, la.n, side)
        feed(la, pooled)
        return pooled.finish()[0], replace(la, matrix=None, aggregated=None, by_rows=None)
    run, [(pooled, layer)] = each_reduced(model, text, pool, layers=[number], max_tokens=max_tokens, by_rows=True)
    return pooled, layer, run.tokens


@dataclass(frozen=True)
class Held:
    """What the effective layers of a model hold, one layer at a time (`held`): in n × n float32 matrices, `whole` for
    the largest layer `each_reduced(by_rows=True)` still makes whole (its groups, and a per-channel layer's channels
    beside its groups); in groups, `rows` for the largest layer read by rows."""

    whole: int
    rows: int

    def summary_bytes(self, n: int) -> int:
        """What `each_reduced(by_rows=True)` with `summarised` holds at n tokens: the larger of a whole layer's
        matrices with one group's copy (pooled), and a layer read by rows' blocks (`row_bytes`)."""
        return max(need_bytes(self.whole + 1, n) if self.whole else 0, row_bytes(self.rows, n))

    def summary_fit(self, budget: int) -> int:
        """The most tokens whose summary fits in `budget` bytes (at least 1)."""
        lo, hi = 1, 1 << 24
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if self.summary_bytes(mid) <= budget else (lo, mid - 1)
        return lo


def held(model) -> Held:
    """`Held` for `model` (a loaded model), counted on a probe of PROBE_TOKENS tokens read by rows. Raises NotExact as
    `effective_attention` does."""
    with model.lock:
        probe = list(each_layer(model.hf_model, list(range(1, PROBE_TOKENS + 1)), by_rows=True))
    whole = [la.values.shape[1] + (0 if la.aggregated is None else la.aggregated.shape[0]) for la in probe
             if la.matrix is not None]
    return Held(whole=max(whole, default=0), rows=max((la.values.shape[1] for la in probe if la.matrix is None),
                                                      default=0))


# what a layer read by rows holds, in rows of n float32 per group: its block (`row_step` rows), the block's
# thumbnail and measure pieces (about as much again), and the delta rule's state (d_k rows; 256 covers the kinds read)
ROW_STATE = 256


def row_bytes(groups: int, n: int) -> int:
    """The bytes a layer of `groups` groups read by rows holds at n tokens (ROW_STATE)."""
    if not groups:
        return 0
    block = groups * min(n, row_step(groups, n)) * n
    return 4 * (2 * block + ROW_STATE * groups * n)


def need_bytes(count: int, n: int) -> int:
    """The bytes of `count` n × n float32 matrices over n tokens (`Held.whole`'s: what `each_reduced` holds)."""
    return 4 * count * n * n
