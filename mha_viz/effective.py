"""`effective_attention`: the exact effective attention of every token-mixing layer of a model that
is not softmax attention (Mamba-1, Mamba-2, gated DeltaNet, Kimi Delta Attention, lightning
attention, short convolutions, RG-LRU), from one forward pass. The kernel is
`mha_viz_models.effective`; the formulas: docs/effective-attention.md."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mha_viz.metrics.mixing_measures import effective_measures
from mha_viz.text.tokenize import tokenize
from mha_viz_models.effective import EffectiveLayer, NotExact, effective_layers, mixing_layers, reconstruct

__all__ = ["EffectiveAttention", "EffectiveLayer", "NotExact", "effective_attention", "matrices", "need_bytes",
           "tokens_that_fit"]


@dataclass(frozen=True)
class EffectiveAttention:
    """One text's effective attention. layers: one `EffectiveLayer` per non-softmax token-mixing
    layer in the model's layer order (its `layer`, `kind`, `label`, `matrix` (groups, n, n) float32,
    `value_name`, `values` (n, groups, d) and `parts`)."""

    tokens: list[str]
    token_ids: list[int]
    layers: list[EffectiveLayer]
    # every token-mixing layer's mean output norm, mean_t ‖out_t‖, by the model's layer number: the softmax
    # attention layers (after W_O) and these; empty when not measured (`mixing_shares`)
    output_norms: dict[int, float] = field(default_factory=dict)

    def mixing_shares(self) -> dict[int, float]:
        """Each token-mixing layer's share of what all of them write (its mean output norm over their sum):
        how much of the model's token mixing each layer, and so each kind, does on this text."""
        total = sum(self.output_norms.values())
        return {number: norm / total for number, norm in sorted(self.output_norms.items())} if total > 0 else {}

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
    toks = tokenize(model, text, max_tokens)
    norms: dict[int, float] = {}

    def keep(number: int):
        def hook(_module, _args, out):
            out = out[0] if isinstance(out, tuple) else out  # (output, weights or state)
            norms[number] = float(out[0].float().norm(dim=-1).mean())
        return hook
    modules = [(number, m) for number, (m, _family) in zip(model.layer_ids, model.attention_modules)]
    modules += [(number, m) for number, _name, m, _kind in mixing_layers(model.hf_model)]
    with model.lock:
        hooks = [m.register_forward_hook(keep(number)) for number, m in modules]
        try:  # one forward: the effective layers' taps and every mixing layer's output norm
            found = effective_layers(model.hf_model, toks.ids, layers=layers)
        finally:
            for h in hooks:
                h.remove()
    if not found:
        raise NotExact(f"{model.name} has no token-mixing layer besides softmax attention that mha-viz reads.")
    return EffectiveAttention(tokens=list(toks.display), token_ids=list(toks.ids), layers=found,
                              output_norms=norms if layers is None else {})


PROBE_TOKENS = 8  # the short probe that counts a model's matrices (`matrices`)


def matrices(model) -> int:
    """How many n × n float32 matrices `model`'s (a loaded model's) effective attention holds at once: every
    mixing layer's groups, and a per-channel layer's channels beside the groups it is aggregated into (Mamba-1),
    counted on a probe of PROBE_TOKENS tokens. Raises NotExact as `effective_attention` does."""
    with model.lock:
        probe = effective_layers(model.hf_model, list(range(1, PROBE_TOKENS + 1)))
    return sum(la.matrix.shape[0] + (0 if la.aggregated is None else la.aggregated.shape[0]) for la in probe)


def need_bytes(count: int, n: int) -> int:
    """The bytes of `count` matrices (`matrices`) over n tokens: what `effective_attention` holds."""
    return 4 * count * n * n


def tokens_that_fit(count: int, budget: int) -> int:
    """The most tokens whose `count` matrices fit in `budget` bytes."""
    return int((budget / (4 * max(count, 1))) ** 0.5)
