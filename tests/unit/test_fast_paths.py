"""The speed tricks of our MHA (`mha_viz_models.attention.fast_paths`) change nothing: each against
the plain computation it replaces, on random inputs, and `forward` (every trick on, or each one
off in turn) against `reference_forward` (none), over the layer's variants. Bit for bit, except
the one product of the stacked weights (within 1e-6) and the fused kernel (test_mha.py)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mha_viz_models import MultiHeadAttention
from mha_viz_models.attention import fast_paths
from mha_viz_models.attention.config import Extras, Positions, Shape, Visibility

B, N = 2, 7


@pytest.mark.parametrize("d_k", [4, 8, 64, 3, 6])  # scales 1/2, 1/√8, 1/8, 1/√3, 1/√6
def test_scaled_scores_are_bitwise_the_plain_ones(d_k):
    torch.manual_seed(d_k)
    q, k, scale = torch.randn(B, 3, N, d_k) * 4, torch.randn(B, 3, N + 2, d_k) * 4, 1 / math.sqrt(d_k)
    assert torch.equal(fast_paths.scaled_scores(q, k, scale), (q @ k.transpose(-2, -1)) * scale)


def _plain_masked(scores, blocked, additive):
    scores = scores if additive is None else scores + additive
    return scores if blocked is None else scores.masked_fill(blocked, float("-inf"))


def _plain_softmax(scores):
    return torch.softmax(scores, dim=-1, dtype=torch.float32)


def _plain(scores, blocked, additive):
    return _plain_softmax(_plain_masked(scores, blocked, additive)).nan_to_num(0.0)


@pytest.mark.parametrize("masks", ["none", "causal", "padding-broadcast", "additive", "additive-broadcast",
                                   "empty-row"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_in_place_passes_are_bitwise_the_plain_ones(masks, dtype):
    torch.manual_seed(0)
    scores = torch.randn(B, 3, N, N).to(dtype)
    blocked = additive = None
    if masks in ("causal", "empty-row"):
        blocked = torch.ones(N, N, dtype=torch.bool).triu(1)  # (n_q, n_k)
        if masks == "empty-row":
            blocked[2] = True  # query 2 sees nothing: zeros, not NaN
    if masks == "padding-broadcast":  # scores of one text, padding of two: the result outgrows the scores
        scores, blocked = scores[:1], torch.tensor([[False] * N, [False] * 4 + [True] * 3])[:, None, None, :]
    if masks == "additive":
        additive = torch.randn(B, 1, N, N).to(dtype)  # in the scores' dtype, as Hugging Face passes it
    if masks == "additive-broadcast":  # one text's scores, two texts' masks
        scores, additive = scores[:1], torch.randn(B, 1, N, N).to(dtype)
    want = _plain(scores, blocked, additive)
    work = scores.clone()
    probs = fast_paths.softmax_in_place(fast_paths.masked_in_place(work, blocked, additive))
    if blocked is not None or additive is not None:
        probs = fast_paths.zero_empty_rows(probs)
    assert probs.dtype == torch.float32 and torch.equal(probs, want)
    fits = masks not in ("padding-broadcast", "additive-broadcast")
    assert (probs.data_ptr() == work.data_ptr()) == (fits and dtype == torch.float32)  # in place where it may be


def test_in_place_passes_leave_autograd_its_copies():
    scores = torch.randn(1, 2, N, N, requires_grad=True)
    blocked = torch.ones(N, N, dtype=torch.bool).triu(1)
    masked = fast_paths.masked_in_place(scores * 1.0, blocked, None)  # a fresh tensor, as scaled_scores gives
    probs = fast_paths.zero_empty_rows(fast_paths.softmax_in_place(masked))
    probs[..., 0].sum().backward()
    plain = scores.detach().clone().requires_grad_()
    _plain(plain, blocked, None)[..., 0].sum().backward()
    assert torch.equal(probs, _plain(scores.detach(), blocked, None)) and torch.equal(scores.grad, plain.grad)


def test_the_weight_stack_is_three_products_and_follows_changes():
    torch.manual_seed(1)
    mha = MultiHeadAttention(Shape(16, 4, num_kv_heads=2))
    layers, stack, x = (mha.w_q, mha.w_k, mha.w_v), fast_paths.WeightStack(), torch.randn(B, N, 16)

    def three():
        return torch.cat([lin(x) for lin in layers], -1)  # (B, N, h·d_k + 2·G·d_k)

    with torch.inference_mode():
        weight, bias = stack(layers)
        assert not weight.is_inference()  # a gradient pass may save it later
        torch.testing.assert_close(F.linear(x, weight, bias), three(), atol=1e-6, rtol=1e-5)
        assert stack(layers)[0] is weight  # kept while nothing changes
    with torch.no_grad():
        for change in (lambda: mha.w_v.bias.add_(1.0),  # in place: same storage, a new version
                       lambda: setattr(mha.w_k, "weight", nn.Parameter(mha.w_k.weight * 2))):  # a new storage
            change()
            weight, bias = stack(layers)
            torch.testing.assert_close(F.linear(x, weight, bias), three(), atol=1e-6, rtol=1e-5)
    weight, bias = stack(layers)  # with autograd: stacked afresh, part of the graph
    assert weight.requires_grad and stack(layers)[0] is not weight
    F.linear(x, weight, bias).sum().backward()
    assert mha.w_q.weight.grad is not None and mha.w_k.weight.grad.abs().sum() > 0
    assert not fast_paths.WeightStack.applies((nn.Linear(4, 4), nn.Linear(4, 4, bias=False), nn.Linear(4, 4)))


class L2(nn.Module):  # Llama 4's norm after RoPE: each head's q and k to unit length
    def forward(self, x):
        return F.normalize(x, dim=-1)


def _norm(width: int) -> nn.Module:
    norm = nn.RMSNorm(width)
    nn.init.uniform_(norm.weight, 0.5, 1.5)
    return norm


def _rope(n: int, d_k: int, layout: str):
    theta = torch.arange(n)[:, None] * 10000.0 ** (-torch.arange(0, d_k, 2) / d_k)  # (n, d_k / 2)
    angles = {"halves": torch.cat([theta, theta], -1), "pairs": theta.repeat_interleave(2, -1)}[layout]
    return angles.cos(), angles.sin()


# name: (shape, positions, visibility, extras, forward's keyword arguments, rotary layout or None, cross)
def _variant(name: str, d_k: int):
    h, g = 4, 2 if "gqa" in name else 4
    shape = Shape(h * d_k, h, num_kv_heads=g, d_k=d_k, d_kv_in=(20 if "cross" in name else None))
    positions, visibility, extras, rope = Positions(), Visibility(), Extras(), None
    kw: dict = {"is_causal": "causal" in name}
    if "padding" in name:
        kw["key_padding_mask"] = torch.tensor([[False] * N, [False] * 4 + [True] * 3])
    if "additive" in name:
        kw["attn_mask"] = torch.randn(B, 1, N, N)
    if "empty-row" in name:
        kw["attn_mask"] = torch.ones(N, N, dtype=torch.bool)
        kw["attn_mask"][3] = False
    if "rope" in name:
        rope = "pairs" if "pairs" in name else "halves"
        positions = Positions(rope=rope)
    if "window" in name or "chunk" in name:
        visibility = Visibility(window=3 if "window" in name else None, chunk=3 if "chunk" in name else None)
    if "softcap" in name or "sinks" in name:
        extras = Extras(softcap=2.0 if "softcap" in name else None,
                        sinks=torch.randn(h) if "sinks" in name else None)
    if "norms" in name:
        over = "over-heads" in name
        extras = Extras(q_norm=_norm(h * d_k if over else d_k), k_norm=_norm(g * d_k if over else d_k),
                        norm_over_heads=over)
    if "llama4" in name:  # a NoPE layer with its temperature, a RoPE layer with its L2 norm
        positions = Positions(rope=None, temperature=(2.0, 0.5)) if "nope" in name else Positions()
        rope, extras = "halves", Extras(rotated_norm=L2())
    return shape, positions, visibility, extras, kw, rope


VARIANTS = ["plain", "causal", "gqa-causal-padding", "additive", "empty-row", "cross", "cross-gqa-padding",
            "rope-causal", "rope-pairs-gqa", "softcap-causal", "sinks-gqa-causal", "window-causal", "window",
            "chunk-causal", "norms-rope", "norms-over-heads-gqa", "llama4-rope", "llama4-nope-causal"]


def _layer_and_inputs(name: str, d_k: int):
    torch.manual_seed(len(name) + d_k)
    shape, positions, visibility, extras, kw, rope = _variant(name, d_k)
    mha = MultiHeadAttention(shape, positions, visibility, extras).eval()
    x = torch.randn(B, N, shape.d_model)
    key = torch.randn(B, N, shape.d_kv_in) if "cross" in name else None
    if rope is not None:
        kw["rotary"] = _rope(N, d_k, rope)
    return mha, x, key, kw


def _steps(mha, x, key, kw):
    """The steps as the adapters run them: three products (no stack), then attend and merge."""
    if key is None:
        q, k, v = mha.project_self(x, kw.get("rotary"))
    else:
        q, (k, v) = mha.project_q(x), mha.project_kv(key, key)
        q, k = mha.positioned(q, k, kw.get("rotary"))
    z, probs = mha.attend(q, k, v, **{a: b for a, b in kw.items() if a != "rotary"})
    return mha.merge(z), probs


@pytest.mark.parametrize("d_k", [4, 6])  # the scale a power of two (q scaled first) or not
@pytest.mark.parametrize("name", VARIANTS)
def test_forward_is_the_reference_path(name, d_k):
    mha, x, key, kw = _layer_and_inputs(name, d_k)
    with torch.inference_mode():
        out, probs = mha.reference_forward(x, key, **kw)
        steps_out, steps_probs = _steps(mha, x, key, kw)
        fast_out, fast_probs = mha(x, key, **kw)
    assert torch.isfinite(out).all() and torch.isfinite(probs).all()
    assert torch.equal(steps_probs, probs) and torch.equal(steps_out, out)  # every trick but the stack: bit for bit
    torch.testing.assert_close(fast_probs, probs, atol=1e-6, rtol=1e-5)  # the stack's one product rounds apart
    torch.testing.assert_close(fast_out, out, atol=1e-6, rtol=1e-5)


TRICKS_OFF = {  # each trick replaced by the plain computation it stands for
    "weight stack": (fast_paths.WeightStack, "applies", staticmethod(lambda layers: False)),
    "scaled scores": (fast_paths, "scaled_scores", lambda q, k, scale: (q @ k.transpose(-2, -1)) * scale),
    "masks in place": (fast_paths, "masked_in_place", _plain_masked),
    "softmax in place": (fast_paths, "softmax_in_place", _plain_softmax),
    "empty rows in place": (fast_paths, "zero_empty_rows", lambda p: p.nan_to_num(0.0)),
}


@pytest.mark.parametrize("d_k", [4, 6])
@pytest.mark.parametrize("trick", list(TRICKS_OFF))
def test_each_trick_off_changes_nothing(trick, d_k, monkeypatch):
    mha, x, _, kw = _layer_and_inputs("sinks-gqa-causal-padding-additive", d_k)
    with torch.inference_mode():
        on = mha(x, **kw)
        reference = mha.reference_forward(x, **kw)
        monkeypatch.setattr(*TRICKS_OFF[trick])
        off = mha(x, **kw)
    tolerance = {"atol": 1e-6, "rtol": 1e-5} if trick == "weight stack" else {"atol": 0, "rtol": 0}
    for a, b in zip(on, off):
        torch.testing.assert_close(a, b, **tolerance)
    if trick == "weight stack":  # with the stack off, no trick is left that rounds apart
        assert torch.equal(off[0], reference[0]) and torch.equal(off[1], reference[1])


@pytest.mark.parametrize("window,chunk", [(None, None), (3, None), (None, 4)])
def test_masking_the_blocked_columns_only_is_the_whole_mask(window, chunk):
    """A block of queries 5 … 9 of a 12-token text against keys 2 … 9: masking only the columns that hold
    a blocked key gives the scores the whole mask gives, bit for bit, given the whole mask or those columns' alone."""
    from mha_viz_models.attention.visibility import hidden_columns, hidden_keys
    torch.manual_seed(2)
    scores = torch.randn(B, 3, 5, 8)
    blocked = hidden_keys(5, 8, causal=True, window=window, chunk=chunk, first=5, key_start=2)
    want = scores.masked_fill(blocked, float("-inf"))
    assert torch.equal(fast_paths.masked_columns_in_place(scores.clone(), blocked), want)
    assert fast_paths.masked_columns_in_place(scores.clone(), None).equal(scores)
    lo, hi = hidden_columns(5, 8, causal=True, window=window, chunk=chunk, first=5, key_start=2)
    assert hi - lo < 8 or window or chunk  # the columns alone, as a long text's block of rows gives them (a window
    # or a chunk hides keys at both ends of this block: every column)
    part = hidden_keys(5, hi - lo, causal=True, window=window, chunk=chunk, first=5, key_start=2 + lo)
    assert torch.equal(fast_paths.masked_columns_in_place(scores.clone(), part, (lo, hi)), want)
