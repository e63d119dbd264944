"""Which layers of a model mix tokens without softmax, which kind each is, and one forward that
reads them all (`effective_layers`)."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from mha_viz_models.effective import delta, kda, lightning, mlstm, rglru, selective, short_conv, ssd, wkv
from mha_viz_models.effective.layer import EffectiveLayer, NotExact, Taps, layer_number

# the first kind whose `matches` accepts a module reads it
KINDS = (ssd, delta, kda, short_conv, selective, lightning, rglru, wkv, mlstm)
# token-mixing layers mha-viz knows but cannot make exact yet, by class name: the reason
REFUSED = {
    "ZambaMambaMixer": "Zamba's multi-head Mamba-1 (its x_proj and dt_proj as raw weights) is not computed exactly "
                       "by mha-viz yet",
}


def mixing_layers(model: torch.nn.Module) -> list[tuple[int, str, torch.nn.Module, object]]:
    """(layer number, module name, module, kind module) of every token-mixing layer read here, in layer order."""
    found = []
    for name, module in model.named_modules():
        kind = next((k for k in KINDS if k.matches(module)), None)
        if kind is not None:
            found.append((layer_number(name), name, module, kind))
        elif type(module).__name__ in REFUSED:
            found.append((layer_number(name), name, module, None))
    return sorted(found, key=lambda f: f[0])


def named_kinds(model: torch.nn.Module, others: dict[str, list[int]]) -> dict[str, list[int]]:
    """A hybrid's other layers by kind (`hybrid_layers`' second part, named from its config's layer types, which say
    "linear_attention" for Mamba and RG-LRU too), renamed by the kind of token mixer found in each layer (its
    kind's NAME: "Mamba-2 (SSD)"); a layer whose mixer is not found here keeps its config's name."""
    found = {number: kind.NAME for number, _name, _module, kind in mixing_layers(model) if kind is not None}
    named: dict[str, list[int]] = {}
    for config_kind, numbers in others.items():
        for number in numbers:
            named.setdefault(found.get(number, config_kind), []).append(number)
    return {kind: sorted(numbers) for kind, numbers in named.items()}


def effective_layers(model: torch.nn.Module, input_ids, layers=None) -> list[EffectiveLayer]:
    """Every (or the chosen `layers`') non-softmax token-mixing layer's effective attention, from one
    forward of `model` on `input_ids` (one sequence). Raises NotExact for a layer that cannot be made exact."""
    return list(each_layer(model, input_ids, layers))


def each_layer(model: torch.nn.Module, input_ids, layers=None, *, by_rows: bool = False,
               outputs: list | None = None, channel_means: bool = False) -> Iterator[EffectiveLayer]:
    """`effective_layers` one layer at a time: the forward runs (and every refusal is raised) at the call; each
    layer's matrices are computed from its taps (O(n · d) each) when the iterator reaches it, so that a caller that
    reduces each layer and drops it holds one layer's n × n matrices at a time, not every layer's. `by_rows`: a
    layer of a kind that can (its BY_ROWS) comes without its matrix, its rows made a block at a time
    (`EffectiveLayer.by_rows`): what it holds grows as n, not n². `outputs`: the forward's own output (with its
    hidden states) is appended to it, for a caller that reads the logits too (a model of these layers alone).
    `channel_means`: a kind whose matrix is per channel (Mamba-1, RWKV) gives the means over its blocks of channels
    alone, a block at a time (`selective.per_channel`): what a run's weights read, in an eighth of the memory."""
    found = mixing_layers(model)
    if layers is not None:
        wanted = {int(n) for n in layers}
        known = {f[0] for f in found}
        if not wanted <= known:
            raise NotExact(f"Layer {', '.join(map(str, sorted(wanted - known)))} is not a non-softmax token-mixing "
                           f"layer; those are: {', '.join(map(str, sorted(known))) or 'none'}.")
        found = [f for f in found if f[0] in wanted]
    for number, name, module, kind in found:
        if kind is None:
            raise NotExact(f"Layer {number} ({type(module).__name__}): {REFUSED[type(module).__name__]}; "
                           "choose other layers with `layers=`.")
    spec = {f"{name}|{tap}": where for _n, name, module, kind in found for tap, where in kind.taps(module).items()}
    ids = torch.as_tensor(input_ids).reshape(1, -1)
    with Taps(spec) as taps, torch.no_grad():
        out = model(input_ids=ids.to(_device(model)), use_cache=False, output_hidden_states=outputs is not None)
    if outputs is not None:
        outputs.append(out)
    return (kind.compute(module, _Prefixed(taps, name), number, name,
                         **({"by_rows": True} if by_rows and reads_by_rows(kind) else {}),
                         **({"channel_means": True} if channel_means and getattr(kind, "CHANNEL_MEANS", False) else {}))
            for number, name, module, kind in found)


def reads_by_rows(kind) -> bool:
    """Whether a kind's module can give its matrix's rows a block at a time (`compute(..., by_rows=True)`)."""
    return bool(getattr(kind, "BY_ROWS", False))


def reconstruct(layer: EffectiveLayer) -> torch.Tensor:
    """The layer's output (n, hidden) from its matrix, values and separate parts (its kind's formula)."""
    return next(k for k in KINDS if k.KIND == layer.kind).reconstruct(layer)


def _device(model) -> torch.device:
    return next(model.parameters()).device


class _Prefixed:
    """One layer's view of the taps: got['in_proj'] is that layer's 'name|in_proj'."""

    def __init__(self, taps: Taps, name: str):
        self.taps, self.name = taps, name

    def __getitem__(self, tap: str):
        return self.taps[f"{self.name}|{tap}"]
