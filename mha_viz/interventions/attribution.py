"""What heads do, not only where they look (`docs/attribution.md`).

- Value-weighted attention (Kobayashi et al. 2020): the contribution of key j to query i through
  head h is ‖A[h, i, j] f_h(x_j)‖ = A[h, i, j] · ‖f_h(x_j)‖, with f_h(x) = (x W_V + b_V) W_O[h]: the
  run's `value_norms` turn every pattern into contributions at the cost of one product.
- Direct logit attribution: what each head's write at one position adds to a token's logit (or
  to a logit difference) through the final norm with its scale frozen at the real residual's,
  and the tokens one head's write promotes and suppresses most (a logit lens of that write).
  Where the model soft-caps its logits (Gemma 2), both are linearised through the cap at this
  run's logits.
- Activation patching of heads (`mha_viz.interventions.patching`) and its first-order estimate, attribution
  patching (`mha_viz.interventions.estimate`), re-exported here: `attribution.patch_heads`,
  `attribution.estimate_heads`, `attribution.estimate_positions`.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial.distance import jensenshannon

from mha_viz.capture.contributions import weighed
from mha_viz.capture.run import AttentionRun
from mha_viz.interventions.estimate import Agreement, agreement, by_head, estimate_heads, estimate_positions
from mha_viz.interventions.patching import (
    Patching,
    logit_difference,
    patch_heads,
    patch_positions,
    patched_metric,
    require_decoder,
    token_id,
)
from mha_viz.metrics.row_blocks import aligned, block_rows
from mha_viz.text.tokenize import InputError, label_ids, tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.reading import readout, stream_scale

__all__ = [  # patching and its estimate live in their own modules; scripts reach them here too
    "Agreement", "DirectLogit", "Patching", "agreement", "as_contributions", "by_head", "direct_logit",
    "estimate_heads", "estimate_positions", "head_tokens", "label", "lens_divergence", "logit_difference",
    "patch_heads", "patch_positions", "patched_metric", "post_norms", "value_weighted",
]

LABEL = "value-weighted (‖α f(x)‖{})"
LINEARISED = "linearised through soft-capping"


def value_weighted(run: AttentionRun, normalise: bool = False) -> np.ndarray:
    """(layers, heads, n, n) contributions `A * value_norms[:, :, None, :]`; with `normalise`,
    each row divided by its sum (a row with nothing to divide stays 0). Made one layer at a time
    (no second full-size temporary). Raises InputError when the run has no value norms (a model
    whose value path mha-viz cannot read), ValueError when it already shows contributions."""
    if run.value_norms is None:
        raise InputError(f"The value path of {run.model_name} cannot be read, so its attention cannot be weighted "
                         "by what each token writes: the weights are shown.")
    if run.lens:
        raise ValueError(f"this run already shows {run.lens}: weighting it again would count the norms twice")
    out = np.zeros_like(run.attentions, dtype=np.float32)
    for layer in range(run.num_layers):
        if normalise:  # an empty row stays 0
            out[layer] = weighed(run.attentions[layer], run.value_norms[layer])
        else:
            out[layer] = run.attentions[layer] * run.value_norms[layer, :, None, :].astype(np.float32)
    return out


def label(normalise: bool) -> str:
    """How a view titles the contributions: "value-weighted (‖α f(x)‖, row-normalised)"."""
    return LABEL.format(", row-normalised" if normalise else "")


def as_contributions(run: AttentionRun) -> AttentionRun:
    """`run` with its attentions replaced by the row-normalised contributions (`value_weighted`),
    its `lens` saying so: what every view draws under *Show attention as: contributions*."""
    return dataclasses.replace(run, attentions=value_weighted(run, normalise=True), lens=label(True),
                               memory=None)  # rows of contributions: a compressed layer's entries are not among them


def lens_divergence(weights: AttentionRun, contributions: AttentionRun) -> np.ndarray:
    """(layers, heads): how much the lens changes each head's picture, the Jensen–Shannon
    divergence (base 2, in [0, 1]) between a query's weights and its normalised contributions,
    averaged over the queries whose rows are not empty in either. Both runs read side by side a block
    of query rows at a time (`row_blocks.aligned`): a long run's rows are recomputed, none held whole."""
    out = np.zeros((weights.num_layers, weights.num_heads), dtype=np.float32)
    n, heads = weights.n, weights.num_heads
    for layer in range(weights.num_layers):
        readers = [weights.source(layer, None, 0, n), contributions.source(layer, None, 0, n)]
        js_sum, counted = np.zeros(heads), np.zeros(heads)
        for _first, (p, q) in aligned(readers, 0, n, block_rows(2 * heads, n, 32 * 2**20)):
            p, q = p.astype(np.float64), q.astype(np.float64)
            rows = (p.sum(-1) > 0) & (q.sum(-1) > 0)  # (H, b)
            with np.errstate(invalid="ignore", divide="ignore"):
                js = jensenshannon(p, q, axis=-1, base=2) ** 2
            js_sum += np.where(rows, np.nan_to_num(js), 0.0).sum(-1)
            counted += rows.sum(-1)
        out[layer] = js_sum / np.maximum(counted, 1)
    return out


@dataclass
class DirectLogit:
    """Each head's direct effect on one logit (or logit difference) at one position. Where the model
    soft-caps its logits (`softcap` is c), each token's part is linearised through the cap at this
    run's logit x of that token: multiplied by the cap's derivative there, 1 − tanh²(x / c)
    (`slopes`), so that `per_head.sum() + rest` is the tangent's total, not `logit`."""

    per_head: np.ndarray  # (layers, heads)
    target: int  # token id (default: what the model predicts there)
    wrong: int | None  # the other token of a logit difference, or None
    logit: float  # the model's own logit (difference), capped where the model caps
    rest: float  # every non-head write: embeddings, MLPs, biases (+ per_head.sum(): logit; capped: its tangent)
    position: int
    tokens: list[str]  # the text's tokens
    softcap: float | None = None  # the model's logit cap c (Gemma 2's final_logit_softcapping), None: none
    slopes: tuple[float, ...] = (1.0,)  # the cap's derivative at the target's (and the wrong token's) logit

    @property
    def linearised(self) -> bool:
        """Whether the attribution is the linear term through the model's logit soft-capping."""
        return self.softcap is not None

    @property
    def caveat(self) -> str:
        """What the label adds where the attribution is linearised: " (linearised through soft-capping)"; else empty."""
        return f" ({LINEARISED})" if self.linearised else ""

    @property
    def label(self) -> str:
        """How a page titles it: "Direct logit attribution", with the caveat where it applies."""
        return "Direct logit attribution" + self.caveat


_POST_NORMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> each layer's post-attention norm


def post_norms(model: LoadedModel) -> list[readout.Norm | None]:
    """Each layer's norm between its attention output and the residual stream (None: none), found
    on a probe once per model (under its lock, as the read-out)."""
    with model.lock:
        if model.hf_model not in _POST_NORMS:
            try:
                found = readout.post_norms(model.hf_model, [m for m, _ in model.attention_modules],
                                           torch.tensor([[0, 1, 2, 3]], device=model.device))
            except ValueError as exc:
                found = exc
            _POST_NORMS[model.hf_model] = found
        found = _POST_NORMS[model.hf_model]
    if isinstance(found, readout.SeveralStreams):
        raise InputError(f"No direct attribution for {model.name}: {found}.")
    if isinstance(found, ValueError):
        raise InputError(f"The heads' writes of {model.name} pass through a norm mha-viz cannot read ({found}): "
                         "no direct attribution.")
    return found


def stream_factors(model: LoadedModel) -> list[float]:
    """What each layer's writes are multiplied by on their way to the last layer's stream (`stream_scale`): 1.0
    everywhere but where layers scale the stream (Gemma 4), read at each call (a scalar changed is seen)."""
    try:
        return stream_scale.later_factors(model.hf_model, [m for m, _ in model.attention_modules])
    except UnsupportedArchitecture:  # no numbered list of layers: none that scales the stream (Gemma 4's are)
        return [1.0] * len(model.attention_modules)


def _readout(model: LoadedModel) -> readout.Readout:
    """The model's read-out, found on a probe once per model (under its lock: the probe's hooks
    must see no other session's forward)."""
    require_decoder(model, "direct logit attribution")
    ro = readout.of(model, through_cap=True)  # a logit cap is linearised at the run's logits
    if ro is None:
        raise InputError(f"The read-out of {model.name} cannot be reconstructed linearly (its final norm, or what "
                         "follows its LM head): no direct attribution.")
    return ro


def _writes(model: LoadedModel, text: str, position: int, max_tokens: int | None):
    """(per-head writes at the position (L, H, d), the final residual there (d,), logits there
    (vocab,), the position, the tokens) from one forward."""
    ro = _readout(model)
    toks = tokenize(model, text, max_tokens)
    n = toks.n
    if not -n <= position < n:
        raise InputError(f"Position {position} is outside the text's {n} tokens.")
    p = position % n
    posts = post_norms(model)
    seen = []  # the final norm's input: the residual stream (this run's only: registered under the model's lock)
    outs: list[torch.Tensor] = []  # each attention layer's output, where a post-attention norm reads it
    watch = [(ro.norm, lambda _m, args, _out: seen.append(args[0].detach()))]
    if any(posts):
        watch += [(m, lambda _m, _a, out: outs.append((out[0] if isinstance(out, tuple) else out).detach()))
                  for m in {id(m): m for m, _ in model.attention_modules}.values()]
    cap = model.capture(torch.tensor([toks.ids]), watch=watch)
    w_o = model.head_weights()["W_O"][model.layer_ids]  # (L, H, d_v, d): a hybrid's softmax layers
    z = torch.stack([cap.head_outputs[layer][0, :, p, :].float().cpu()
                     for layer in range(model.num_layers)])  # (L, H, d_v)
    writes = torch.einsum("lhd,lhdm->lhm", z, w_o)  # (L, H, d)
    for layer, post in enumerate(posts):  # through the layer's post-attention norm, its σ frozen at this
        if post is not None:              # run's (what the whole attention output gave it)
            o = outs[layer][0, p].float().cpu()  # (d,)
            writes[layer] = post.frozen(writes[layer], post.sigma(o))
    writes *= torch.tensor(stream_factors(model))[:, None, None]  # Gemma 4: each later layer scales the stream
    return ro, writes, seen[-1][0, p].float().cpu(), cap.output.logits[0, p].float().cpu(), p, toks.display


def direct_logit(model: LoadedModel, text: str, target=None, wrong=None, position: int = -1, *,
                 max_tokens: int | None = None) -> DirectLogit:
    """Each head's write at `position` (default: the last) through the final norm, its scale frozen
    at the real residual's, onto the unembedding of `target` (default: the token the model
    predicts there), minus that of `wrong` when given. `per_head.sum() + rest == logit` within
    1e-4 relative where nothing caps (`rest` is computed from the residual, independently). Where the
    model soft-caps its logits, each token's part is multiplied by the cap's derivative at its logit in this run
    (`DirectLogit.linearised`)."""
    ro, writes, r, logits, p, tokens = _writes(model, text, position, max_tokens)
    t = int(logits.argmax()) if target is None else token_id(model, target)
    b = None if wrong is None else token_id(model, wrong)
    rows = torch.tensor([t] if b is None else [t, b])
    slopes = ro.slope(ro.uncapped(r, rows))  # (1 or 2,): 1 where nothing caps
    weights = slopes * torch.tensor([1.0, -1.0][:len(rows)])  # target minus wrong, each through the cap
    u = weights @ ro.unembed[rows]  # (d,)
    sigma = ro.sigma(r)
    per_head = ro.frozen(writes, sigma) @ u  # (L, H)
    others = r - writes.sum((0, 1))  # embeddings, MLPs, W_O biases: every other write into the residual
    rest = ro.frozen(others, sigma) @ u + (0 if ro.bias is None else ro.bias @ u)
    if ro.unembed_bias is not None:
        rest = rest + weights @ ro.unembed_bias[rows]
    logit = logits[t] - (logits[b] if b is not None else 0)
    return DirectLogit(per_head.numpy(), t, b, float(logit), float(rest), p, list(tokens), ro.softcap,
                       tuple(float(s) for s in slopes))


def head_tokens(model: LoadedModel, text: str, layer: int, head: int, k: int = 10, position: int = -1, *,
                max_tokens: int | None = None) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """The k tokens head (layer, head)'s write at `position` promotes most and suppresses most:
    the top and bottom of its frozen-norm write on the unembedding (a logit lens of one head), each
    token's linearised through the model's logit cap at its logit in this run where there is one."""
    ro, writes, r, _logits, _p, _tokens = _writes(model, text, position, max_tokens)
    scores = ro.frozen(writes[layer, head], ro.sigma(r)) @ ro.unembed.T  # (vocab,)
    if ro.softcap is not None:
        scores = scores * ro.slope(ro.uncapped(r))
    top, bottom = scores.topk(k), (-scores).topk(k)

    def named(values, ids, sign):
        return list(zip(label_ids(model, [int(i) for i in ids]).display, (sign * values).tolist()))
    return named(top.values, top.indices, 1), named(bottom.values, bottom.indices, -1)


