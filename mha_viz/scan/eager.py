"""A long text's probabilities for a family our MHA cannot compute (DeBERTa, MLA, an encoder–decoder's encoder…):
taken from the model's own (eager) attention one layer at a time as it runs (`eager_layers`), each layer's dropped
from the output once handed on, and refused (`check_eager`) when one layer's would not fit the capture budget."""

from __future__ import annotations

from typing import Callable

import torch

from mha_viz.budget import capture_budget
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.families.builtin import found_attention


def encoder_net(model: LoadedModel):
    """What runs the text: an encoder–decoder's encoder (its self-attention is what a scan reads), else
    the base model without its head (a decoder's logits alone would be n × vocabulary floats)."""
    if model.is_encoder_decoder:
        return model.hf_model.get_encoder()
    return getattr(model.hf_model, "base_model", None) or model.hf_model


def attention_layers(model: LoadedModel) -> list:
    """The modules whose outputs hold each attention layer's probabilities, in the order the layers run:
    the model's attention layers, or an encoder–decoder's encoder self-attention (ours, or the innermost
    modules named *Attention of its encoder)."""
    if not model.is_encoder_decoder:
        return [m for m, _ in model.attention_modules] or found_attention(model.hf_model)
    ours = [a for a in model.adapters if getattr(a, "role", "") == "encoder"]
    if ours:
        return ours

    def named(m) -> bool:
        return type(m).__name__.endswith("Attention")
    return [m for m in encoder_net(model).modules() if named(m) and not any(named(c) for c in m.children())]


def _probabilities_in(out, n: int) -> int | None:
    """Where an attention module's output tuple holds its probabilities (B, H, n, n): the last 4-D
    tensor of that shape (Hugging Face's modules put them second, ours last), or of n rows over more keys (a
    compressed layer's tokens, then its memory entries: DeepSeek-V4; the scan reads the tokens')."""
    found = None
    for i, item in enumerate(out if isinstance(out, tuple) else ()):
        if isinstance(item, torch.Tensor) and item.dim() == 4 and item.shape[-2] == n and item.shape[-1] >= n:
            found = i
    return found


def check_eager(model: LoadedModel, n: int) -> None:
    """Refuse a scan through the model's own attention when one layer's probabilities would not fit the
    capture budget, naming the length that does."""
    need = model.attention_bytes(n, layers=1)
    if not capture_budget.fits(need):
        fits = int((capture_budget.capture_budget() / (4 * model.num_heads)) ** 0.5)
        capture_budget.check(need, f"Our MHA cannot compute '{model.name}' ({model.stand_in or model.unread}), so "
                                   f"a scan of {n} tokens takes its own attention one layer at a time, which",
                             f"scan at most {fits} tokens of this model (max_tokens), or raise the limit.")


def eager_layers(model: LoadedModel, token_ids: list[int], on_layer: Callable[[int, torch.Tensor], None],
                 *, only: int | None = None) -> None:
    """Run the model once with its own (eager) attention, calling `on_layer(layer, probabilities (H, n,
    n))` inside each attention layer as it runs (or only layer `only`) and dropping the probabilities
    from its output, so that no more than one layer's are ever held."""
    modules = attention_layers(model)
    if not modules:
        raise InputError(f"A scan reads each attention layer as it runs; those of '{model.name}' cannot be "
                         f"read: {model.unread}")
    ids = torch.tensor([token_ids], device=model.device)
    n = ids.shape[1]
    order: dict[int, int] = {}
    for i, m in enumerate(modules):  # a module shared by layers (ALBERT) is their first, then called in turn
        order.setdefault(id(m), i)
    calls: dict[int, int] = {}

    def hook(module, _args, out):
        at = _probabilities_in(out, n)
        if at is None:
            return None
        layer = order[id(module)] + calls.get(id(module), 0)  # a module shared by layers (ALBERT): in turn
        calls[id(module)] = calls.get(id(module), 0) + 1
        if only is None or layer == only:
            on_layer(layer, out[at][0, :, :, :n].float())
        return out[:at] + (None,) + out[at + 1:]

    with model.lock, torch.inference_mode():
        hooks = [m.register_forward_hook(hook) for m in {id(m): m for m in modules}.values()]
        try:  # output_attentions: a module that computes its probabilities only when asked (DeBERTa) hands
            # them to the hook, which takes them out of what the model collects
            net, mask = encoder_net(model), torch.ones_like(ids)
            try:  # a decoder's cache would hold every layer's keys and values: none
                net(input_ids=ids, attention_mask=mask, output_attentions=True, use_cache=False)
            except TypeError:  # an encoder, which takes no cache argument
                net(input_ids=ids, attention_mask=mask, output_attentions=True)
        finally:
            for h in hooks:
                h.remove()
