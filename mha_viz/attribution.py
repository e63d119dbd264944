"""What heads do, not only where they look (`../shared/docs/attribution.md`).

- Value-weighted attention (Kobayashi et al. 2020): the contribution of key j to query i through
  head h is ‖A[h, i, j] f_h(x_j)‖ = A[h, i, j] · ‖f_h(x_j)‖, with f_h(x) = (x W_V + b_V) W_O[h]: the
  run's `value_norms` turn every pattern into contributions at the cost of one product.
- Direct logit attribution: what each head's write at one position adds to a token's logit (or
  to a logit difference) through the final norm with its scale frozen at the real residual's,
  and the tokens one head's write promotes and suppresses most (a logit lens of that write).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import torch

from models import LoadedModel, readout

from .capture import AttentionRun
from .tokenize import InputError, label_ids, tokenize

LABEL = "value-weighted (‖α f(x)‖{})"


def value_weighted(run: AttentionRun, normalise: bool = False) -> np.ndarray:
    """(layers, heads, n, n) contributions `A * value_norms[:, :, None, :]`; with `normalise`,
    each row divided by its sum (a row with nothing to divide stays 0). Raises InputError when
    the run has no value norms (a model whose value path mha-viz cannot read)."""
    if run.value_norms is None:
        raise InputError(f"The value path of {run.model_name} cannot be read, so its attention cannot be weighted "
                         "by what each token writes: the weights are shown.")
    c = run.attentions * run.value_norms[:, :, None, :].astype(np.float32)
    if normalise:
        sums = c.sum(-1, keepdims=True)
        c = np.divide(c, sums, out=np.zeros_like(c), where=sums > 0)
    return c


def label(normalise: bool) -> str:
    """How a view titles the contributions: "value-weighted (‖α f(x)‖, row-normalised)"."""
    return LABEL.format(", row-normalised" if normalise else "")


@dataclass
class DirectLogit:
    """Each head's direct effect on one logit (or logit difference) at one position."""

    per_head: np.ndarray  # (layers, heads)
    target: int  # token id (default: what the model predicts there)
    wrong: int | None  # the other token of a logit difference, or None
    logit: float  # the model's own logit (difference)
    rest: float  # everything that is not a head: embeddings, MLPs, biases (per_head.sum() + rest = logit)
    position: int
    tokens: list[str]  # the text's tokens


def _readout(model: LoadedModel) -> readout.Readout:
    if not model.is_causal or model.is_encoder_decoder:
        raise InputError(f"{model.name} is not a decoder: direct logit attribution needs a language-model head "
                         "that reads the residual stream linearly (an encoder's masked-LM head does not).")
    probe = torch.tensor([[0, 1]], device=model.device)
    with model.lock:
        ro = readout.find(model.hf_model, probe)
    if ro is None or not model.has_head_outputs:
        raise InputError(f"The read-out of {model.name} cannot be reconstructed linearly (its final norm, its "
                         "logit soft-capping, or heads whose outputs mha-viz cannot read): no direct attribution.")
    return ro


def _token(model: LoadedModel, token) -> int:
    """A token id from an id or a string that is exactly one token (" Mary")."""
    if isinstance(token, (int, np.integer)):
        return int(token)
    ids = model.tokenizer(token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise InputError(f"{token!r} is {len(ids)} tokens for {model.name}: give a single token.")
    return int(ids[0])


def _writes(model: LoadedModel, text: str, position: int, max_tokens: int | None):
    """(per-head writes at the position (L, H, d), the final residual there (d,), logits there
    (vocab,), the position, the tokens) from one forward."""
    ro = _readout(model)
    toks = tokenize(model, text, max_tokens)
    n = toks.n
    if not -n <= position < n:
        raise InputError(f"Position {position} is outside the text's {n} tokens.")
    p = position % n
    me, seen = threading.get_ident(), []
    hook = ro.norm.register_forward_hook(  # this thread's forward only: the model is shared
        lambda _m, args, _out: seen.append(args[0].detach()) if threading.get_ident() == me else None)
    try:
        cap = model.capture(torch.tensor([toks.ids]))
    finally:
        hook.remove()
    w_o = model.head_weights()["W_O"]  # (L, H, d_v, d)
    z = torch.stack([cap.head_outputs[l][0, :, p, :].float().cpu() for l in range(model.num_layers)])  # (L, H, d_v)
    writes = torch.einsum("lhd,lhdm->lhm", z, w_o)  # (L, H, d)
    return ro, writes, seen[-1][0, p].float().cpu(), cap.output.logits[0, p].float().cpu(), p, toks.display


def direct_logit(model: LoadedModel, text: str, target=None, wrong=None, position: int = -1, *,
                 max_tokens: int | None = None) -> DirectLogit:
    """Each head's write at `position` (default: the last) through the final norm, its scale frozen
    at the real residual's, onto the unembedding of `target` (default: the token the model
    predicts there), minus that of `wrong` when given. `per_head.sum() + rest == logit` within
    1e-4 relative (`rest` is computed from the residual, independently)."""
    ro, writes, r, logits, p, tokens = _writes(model, text, position, max_tokens)
    t = int(logits.argmax()) if target is None else _token(model, target)
    b = None if wrong is None else _token(model, wrong)
    u = ro.unembed[t] - (ro.unembed[b] if b is not None else 0)  # (d,)
    sigma = ro.sigma(r)
    per_head = ro.frozen(writes, sigma) @ u  # (L, H)
    others = r - writes.sum((0, 1))  # embeddings, MLPs, W_O biases: every other write into the residual
    rest = ro.frozen(others, sigma) @ u + (0 if ro.bias is None else ro.bias @ u)
    if ro.unembed_bias is not None:
        rest = rest + ro.unembed_bias[t] - (ro.unembed_bias[b] if b is not None else 0)
    logit = logits[t] - (logits[b] if b is not None else 0)
    return DirectLogit(per_head.numpy(), t, b, float(logit), float(rest), p, list(tokens))


def head_tokens(model: LoadedModel, text: str, layer: int, head: int, k: int = 10, position: int = -1, *,
                max_tokens: int | None = None) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The k tokens head (layer, head)'s write at `position` promotes most and suppresses most:
    the top and bottom of its frozen-norm write on the unembedding (a logit lens of one head)."""
    ro, writes, r, _logits, _p, _tokens = _writes(model, text, position, max_tokens)
    scores = ro.frozen(writes[layer, head], ro.sigma(r)) @ ro.unembed.T  # (vocab,)
    top, bottom = scores.topk(k), (-scores).topk(k)

    def named(values, ids, sign):
        return list(zip(label_ids(model, [int(i) for i in ids]).display, (sign * values).tolist()))
    return named(top.values, top.indices, 1), named(bottom.values, bottom.indices, -1)
