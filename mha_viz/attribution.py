"""What heads do, not only where they look (`../shared/docs/attribution.md`).

- Value-weighted attention (Kobayashi et al. 2020): the contribution of key j to query i through
  head h is ‖A[h, i, j] f_h(x_j)‖ = A[h, i, j] · ‖f_h(x_j)‖, with f_h(x) = (x W_V + b_V) W_O[h]: the
  run's `value_norms` turn every pattern into contributions at the cost of one product.
- Direct logit attribution: what each head's write at one position adds to a token's logit (or
  to a logit difference) through the final norm with its scale frozen at the real residual's,
  and the tokens one head's write promotes and suppresses most (a logit lens of that write).
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import numpy as np
import torch
from scipy.spatial.distance import jensenshannon

from mha_viz_models import LoadedModel, readout
from mha_viz_models.families import output_projection
from mha_viz_models.hooks import layer_pre_hooks

from .capture import AttentionRun
from .tokenize import InputError, count_text, label_ids, tokenize

LABEL = "value-weighted (‖α f(x)‖{})"


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
        c = run.attentions[layer] * run.value_norms[layer, :, None, :].astype(np.float32)
        if normalise:
            sums = c.sum(-1, keepdims=True)
            np.divide(c, sums, out=out[layer], where=sums > 0)  # an empty row stays 0
        else:
            out[layer] = c
    return out


def label(normalise: bool) -> str:
    """How a view titles the contributions: "value-weighted (‖α f(x)‖, row-normalised)"."""
    return LABEL.format(", row-normalised" if normalise else "")


def as_contributions(run: AttentionRun) -> AttentionRun:
    """`run` with its attentions replaced by the row-normalised contributions (`value_weighted`),
    its `lens` saying so: what every view draws under *Show attention as: contributions*."""
    return dataclasses.replace(run, attentions=value_weighted(run, normalise=True), lens=label(True))


def lens_divergence(weights: AttentionRun, contributions: AttentionRun) -> np.ndarray:
    """(layers, heads): how much the lens changes each head's picture, the Jensen–Shannon
    divergence (base 2, in [0, 1]) between a query's weights and its normalised contributions,
    averaged over the queries whose rows are not empty in either."""
    out = np.zeros((weights.num_layers, weights.num_heads), dtype=np.float32)
    for layer in range(weights.num_layers):
        p, q = weights.attentions[layer].astype(np.float64), contributions.attentions[layer].astype(np.float64)
        rows = (p.sum(-1) > 0) & (q.sum(-1) > 0)  # (H, n)
        with np.errstate(invalid="ignore", divide="ignore"):
            js = jensenshannon(p, q, axis=-1, base=2) ** 2
        js = np.where(rows, np.nan_to_num(js), 0.0)
        out[layer] = js.sum(-1) / np.maximum(rows.sum(-1), 1)
    return out


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


def _decoder(model: LoadedModel, what: str) -> None:
    """InputError unless `model` is a decoder whose heads' outputs mha-viz reads."""
    if not model.is_causal or model.is_encoder_decoder:
        raise InputError(f"{model.name} is not a decoder: {what} needs a language-model head that predicts the "
                         "next token (an encoder's masked-LM head does not read the residual stream linearly).")
    if not model.has_head_outputs:
        raise InputError(f"The heads' outputs of {model.name} cannot be read by mha-viz: no {what}.")


_READOUTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> its read-out (or None)
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
    if isinstance(found, ValueError):
        raise InputError(f"The heads' writes of {model.name} pass through a norm mha-viz cannot read ({found}): "
                         "no direct attribution.")
    return found


def _readout(model: LoadedModel) -> readout.Readout:
    """The model's read-out, found on a probe once per model (under its lock: the probe's hooks
    must see no other session's forward)."""
    _decoder(model, "direct logit attribution")
    with model.lock:
        if model.hf_model not in _READOUTS:
            _READOUTS[model.hf_model] = readout.find(model.hf_model, torch.tensor([[0, 1]], device=model.device))
        ro = _READOUTS[model.hf_model]
    if ro is None:
        raise InputError(f"The read-out of {model.name} cannot be reconstructed linearly (its final norm, or its "
                         "logit soft-capping): no direct attribution.")
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
    posts = post_norms(model)
    seen = []  # the final norm's input: the residual stream (this run's only: registered under the model's lock)
    outs: list[torch.Tensor] = []  # each attention layer's output, where a post-attention norm reads it
    watch = [(ro.norm, lambda _m, args, _out: seen.append(args[0].detach()))]
    if any(posts):
        watch += [(m, lambda _m, _a, out: outs.append((out[0] if isinstance(out, tuple) else out).detach()))
                  for m in {id(m): m for m, _ in model.attention_modules}.values()]
    cap = model.capture(torch.tensor([toks.ids]), watch=watch)
    w_o = model.head_weights()["W_O"][model.layer_ids]  # (L, H, d_v, d): a hybrid's softmax layers
    z = torch.stack([cap.head_outputs[l][0, :, p, :].float().cpu() for l in range(model.num_layers)])  # (L, H, d_v)
    writes = torch.einsum("lhd,lhdm->lhm", z, w_o)  # (L, H, d)
    for layer, post in enumerate(posts):  # through the layer's post-attention norm, its σ frozen at this
        if post is not None:              # run's (what the whole attention output gave it)
            o = outs[layer][0, p].float().cpu()  # (d,)
            writes[layer] = post.frozen(writes[layer], post.sigma(o))
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


@dataclass
class Patching:
    """Per head, how much patching its output z moves the metric m = logit(answer) − logit(wrong)
    at the last position: denoising (`restored`: the corrupted run with the head's clean z, as a
    fraction of the gap) or noising (`damage`: the clean run with its corrupted z)."""

    mode: str  # "denoise" | "noise"
    values: np.ndarray  # (layers, heads): restored or damage; (n,) by position for `patch_positions`
    m_clean: float
    m_corrupted: float
    answer: int
    wrong: int
    position: int | None  # the patched position, or None: every position

    @property
    def restored(self) -> np.ndarray:
        if self.mode != "denoise":
            raise AttributeError("a noising run has .damage, not .restored")
        return self.values

    @property
    def damage(self) -> np.ndarray:
        if self.mode != "noise":
            raise AttributeError("a denoising run has .restored, not .damage")
        return self.values


def logit_difference(logits: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """m = logit(a) − logit(b) at the last position, for each sequence of a batch (B,)."""
    return logits[:, -1, a] - logits[:, -1, b]


def patched_metric(model: LoadedModel, ids: torch.Tensor, layer: int, heads: list[int], source: torch.Tensor,
                   a: int, b: int, position: int | None | list) -> torch.Tensor:
    """One forward of len(heads) copies of `ids`: copy k gets head heads[k]'s slice of layer
    `layer`'s W_O input replaced by that head's z in `source` (H, n, d_v) at `position` (None:
    every position; a list: copy k at position[k]). The m of each copy, (len(heads),)."""
    H = model.num_heads
    where = position if isinstance(position, list) else [position] * len(heads)
    where = [slice(None) if p is None else slice(p, p + 1) for p in where]

    def hook_for(row: int):
        def swap(_module, args):
            if row != layer:
                return None
            x = args[0]  # (B, n, H · d_v)
            z = x.reshape(*x.shape[:-1], H, -1).clone()  # (B, n, H, d_v)
            for k, h in enumerate(heads):
                z[k, where[k], h] = source[h, where[k]].to(z.dtype)
            return (z.reshape(x.shape), *args[1:])
        return swap
    batch = ids.repeat(len(heads), 1)
    with model.lock, torch.inference_mode():
        hooks = layer_pre_hooks([output_projection(m, fam) for m, fam in model.attention_modules], hook_for)
        try:
            logits = model.hf_model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False).logits
        finally:
            for h in hooks:
                h.remove()
    return logit_difference(logits.float(), a, b)


@dataclass
class _Pair:
    """A clean and a corrupted text ready to patch: ids, captures, answer and wrong ids, metrics."""

    ids_c: torch.Tensor
    ids_x: torch.Tensor
    cap_c: object
    cap_x: object
    a: int
    b: int
    m_clean: float
    m_corr: float


def _pair(model: LoadedModel, clean: str, corrupted: str, answer, wrong, position, max_tokens) -> _Pair:
    """Both texts run once, after every refusal (section 3's list) has been checked."""
    _decoder(model, "patching")
    c, x = tokenize(model, clean, max_tokens), tokenize(model, corrupted, max_tokens)
    for name, t in (("clean", c), ("corrupted", x)):
        if t.truncated:  # patched at the cut, the metric would not be the text's next token
            raise InputError(f"The {name} text has {count_text(t.total, t.total_is_estimate)} tokens, more than the {t.n} allowed here: shorten it "
                             "(or raise the token limit in the sidebar).")
    if c.n != x.n:
        raise InputError(f"The clean text has {c.n} tokens and the corrupted one {x.n}: patching compares the same "
                         "positions, so both must have the same number of tokens.")
    if position is not None and not -c.n <= position < c.n:
        raise InputError(f"Position {position} is outside the texts' {c.n} tokens.")
    a = None if answer is None else _token(model, answer)
    b = None if wrong is None else _token(model, wrong)
    ids_c, ids_x = torch.tensor([c.ids], device=model.device), torch.tensor([x.ids], device=model.device)
    cap_c, cap_x = model.capture(ids_c), model.capture(ids_x)
    a = int(cap_c.output.logits[0, -1].argmax()) if a is None else a
    if b is None:  # the corrupted run's prediction; the runner-up when both runs predict the answer
        top2 = cap_x.output.logits[0, -1].topk(2).indices.tolist()
        b = top2[1] if top2[0] == a else top2[0]
    if a == b:
        name = label_ids(model, [a]).display[0]
        raise InputError(f"The answer and the wrong token are both {name!r}: give a different wrong token.")
    m_clean = float(logit_difference(cap_c.output.logits.float(), a, b)[0])
    m_corr = float(logit_difference(cap_x.output.logits.float(), a, b)[0])
    if abs(m_clean - m_corr) < 1e-6:
        raise InputError(f"The two texts give the same logit difference ({m_clean:.4g}) between the answer and the "
                         "wrong token: there is nothing for a head to restore.")
    return _Pair(ids_c, ids_x, cap_c, cap_x, a, b, m_clean, m_corr)


def patch_heads(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, mode: str = "denoise",
                position: int | None = None, *, max_tokens: int | None = None, progress=None) -> Patching:
    """Activation patching of every head's output (`../shared/docs/attribution.md`, section 3).
    The heads of one layer are patched in one batched forward (one sequence per head), so a
    model costs L forwards of H sequences, not L·H forwards. Raises InputError (nothing run) for
    texts of different token counts, an answer or wrong token that is not one token, equal
    metrics on both texts, and encoders. answer and wrong default to each text's prediction (wrong:
    the corrupted text's runner-up when it predicts the answer too). progress(done, total): after
    each layer (a callback that raises stops the work)."""
    if mode not in ("denoise", "noise"):
        raise ValueError(f"mode must be 'denoise' or 'noise', not {mode!r}")
    p = _pair(model, clean, corrupted, answer, wrong, position, max_tokens)
    pos = None if position is None else position % p.ids_c.shape[1]
    base, run_ids = (p.cap_c, p.ids_x) if mode == "denoise" else (p.cap_x, p.ids_c)
    heads = list(range(model.num_heads))
    out = np.zeros((model.num_layers, model.num_heads), dtype=np.float32)
    for layer in range(model.num_layers):
        source = base.head_outputs[layer][0]  # (H, n, d_v): every head's z in the other run
        m = patched_metric(model, run_ids, layer, heads, source, p.a, p.b, pos)  # (H,)
        out[layer] = _moved(m, p, mode).cpu().numpy()
        if progress is not None:
            progress(layer + 1, model.num_layers)
    return Patching(mode, out, p.m_clean, p.m_corr, p.a, p.b, pos)


def _moved(m: torch.Tensor, p: _Pair, mode: str) -> torch.Tensor:
    """The restored fraction (denoise) or the damage (noise) of patched metrics m."""
    return ((m - p.m_corr) if mode == "denoise" else (p.m_clean - m)) / (p.m_clean - p.m_corr)


def patch_positions(model: LoadedModel, clean: str, corrupted: str, layer: int, head: int, answer=None, wrong=None,
                    mode: str = "denoise", *, max_tokens: int | None = None) -> Patching:
    """One head patched at one position at a time: `.values` (n,), the restored fraction (or the
    damage) of patching head (layer, head)'s z at position i only, all n positions in one batched
    forward. The refusals of `patch_heads`."""
    if mode not in ("denoise", "noise"):
        raise ValueError(f"mode must be 'denoise' or 'noise', not {mode!r}")
    if not (0 <= layer < model.num_layers and 0 <= head < model.num_heads):
        raise InputError(f"{model.name} has no layer {layer}, head {head}.")
    p = _pair(model, clean, corrupted, answer, wrong, None, max_tokens)
    base, run_ids = (p.cap_c, p.ids_x) if mode == "denoise" else (p.cap_x, p.ids_c)
    n, chunk = p.ids_c.shape[1], model.num_heads  # batches no larger than patch_heads' (its memory budget)
    m = torch.cat([patched_metric(model, run_ids, layer, [head] * len(part), base.head_outputs[layer][0], p.a, p.b,
                                  part) for part in (list(range(i, min(i + chunk, n))) for i in range(0, n, chunk))])
    return Patching(mode, _moved(m, p, mode).cpu().numpy().astype(np.float32), p.m_clean, p.m_corr, p.a, p.b, None)
