"""`qk_terms` and `qk_pattern_terms` against the model's own attention: the terms sum to the score that
Hugging Face's eager attention computes from its own q and k (read by wrapping its
`eager_attention_forward`, after RoPE and the q/k norms); taking one part's write out of the query's
(key's) stream, with the norms frozen by hooks on the model's own norm modules, changes that score by the
part's row (column) sum; and on toy-induction the induction head's key is written by the previous-token
head and its query by the embeddings. Random-init models get random norm weights and biases, so that a
norm folded wrongly cannot hide behind γ = 1."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.circuits.score_terms import qk_pattern_terms, qk_terms
from mha_viz.text.tokenize import InputError
from tests.helpers import save_peaked
from tests.models import architectures_2026
from tests.models.small_families import BUILDERS

TEXT = "The cat sat on the mat. The dog sat on the log, and the cat saw the dog."


def _save(family: str, out) -> str:
    """A random-init model whose norms have random weights (and biases) around their init."""
    return save_peaked(*BUILDERS[family](), out, jitter_norms=0.5, seed=11)


@pytest.fixture(scope="module", params=list(BUILDERS))
def random_model(request, tmp_path_factory):
    folder = _save(request.param, tmp_path_factory.mktemp(request.param))
    return request.param, mha_viz.load_model(folder, device="cpu", local_attention=False)


def _ids(model, text: str = TEXT) -> torch.Tensor:
    return torch.tensor([mha_viz.tokenize(model, text).ids])


def hf_qk(model, ids: torch.Tensor, hooks=()) -> list[tuple[torch.Tensor, torch.Tensor, float]]:
    """Each layer's (q (B, H, n, d), k (B, G, n, d), scaling) as Hugging Face's eager attention receives
    them: its own projections, q/k norms and RoPE (the model loaded with its own attention)."""
    seen: list = []
    patched = []
    for name in {type(m).__module__ for m in model.hf_model.modules()}:
        module = sys.modules[name]
        original = getattr(module, "eager_attention_forward", None)
        if original is None:
            continue

        def wrapper(mod, query, key, *args, _original=original, **kwargs):
            seen.append((query.detach().double(), key.detach().double(), float(kwargs["scaling"])))
            return _original(mod, query, key, *args, **kwargs)
        patched.append((module, original))
        module.eager_attention_forward = wrapper
    handles = [m.register_forward_hook(h) for m, h in hooks]
    try:
        with torch.inference_mode():
            model.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False)
    finally:
        for module, original in patched:
            module.eager_attention_forward = original
        for h in handles:
            h.remove()
    assert len(seen) == model.num_layers
    return seen


def hf_score(seen, layer: int, head: int, i: int, j: int, num_heads: int) -> float:
    q, k, scaling = seen[layer]
    g = head // (num_heads // k.shape[1])
    return float(q[0, head, i] @ k[0, g, j]) * scaling


def _check_sum(model, layer: int, head: int, i: int, j: int) -> None:
    t = qk_terms(model, TEXT, layer, head, i, j)
    reference = hf_score(hf_qk(model, _ids(model)), layer, head, i, j, model.num_heads)
    assert t.terms.dtype == np.float64 and t.terms.shape == (len(t.query_parts), len(t.key_parts))
    assert t.terms.sum() == pytest.approx(reference, rel=1e-4, abs=1e-4)
    assert t.score == pytest.approx(reference, rel=1e-4, abs=1e-4)
    assert t.error < 1e-4
    # every earlier head is a part of its own, on both sides
    assert {f"L{a}H{h}" for a in range(layer) for h in range(model.num_heads)} <= set(t.query_parts)
    assert t.query_parts[0] == "embed" and t.query_parts[-1] == "bias"


def test_terms_sum_to_the_score_hugging_face_computes(random_model):
    family, model = random_model
    last = model.num_layers - 1
    n = _ids(model).shape[1]
    for head in (0, model.num_heads - 1):
        _check_sum(model, last, head, n - 1, 3)
    _check_sum(model, 1, 1, n // 2, n // 2 - 1)
    if family == "gemma2":  # the cap is said, and the score is the one before it
        assert qk_terms(model, TEXT, last, 0, 2, 1).softcap == 5.0
    if family == "bert":  # a post-norm model's norms are parts of their own
        t = qk_terms(model, TEXT, last, 0, 2, 5)
        assert "L0 attn norm bias" in t.query_parts and "L0 MLP norm bias" in t.key_parts


def test_pattern_terms_weigh_each_pair_by_the_heads_attention(random_model):
    _, model = random_model
    layer, head = model.num_layers - 1, 1
    run = mha_viz.analyze(model, TEXT)
    a = run.attentions[layer, head].astype(np.float64)  # (n, n)
    seen = hf_qk(model, _ids(model))
    q, k, scaling = seen[layer]
    g = head // (model.num_heads // k.shape[1])
    scores = (q[0, head] @ k[0, g].T).numpy() * scaling  # (n, n)
    p = qk_pattern_terms(model, TEXT, layer, head)
    n = a.shape[0]
    assert p.pattern and p.score == pytest.approx(float((a * scores).sum() / n), rel=1e-4, abs=1e-4)
    assert p.terms.sum() == pytest.approx(p.score, rel=1e-4, abs=1e-4)
    # the weighting by hand, one pair at a time, for two of the pairs the head attends to
    i, j = n - 1, int(a[n - 1].argmax())
    one = qk_terms(model, TEXT, layer, head, i, j)
    assert one.terms.sum() == pytest.approx(scores[i, j], rel=1e-4, abs=1e-4)


@pytest.mark.model
@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_terms_sum_to_the_score_on_the_bundled_models(name, request):
    model = request.getfixturevalue(name)
    n = _ids(model).shape[1]
    _check_sum(model, model.num_layers - 1, 2, n - 2, 4)


def _frozen_norms(model, layer: int, ids):
    """Forward hooks that freeze the norms of block `layer` (input norm, q/k norms) at the scale they had
    on `ids`: each norm's output times σ(its input now) / σ(its input then), σ the RMS over its last axis
    (the families of the removal test use RMSNorm)."""
    block = next(m for n, m in model.hf_model.named_modules() if n.endswith(f"layers.{layer}"))
    norms = [m for m in block.modules() if type(m).__name__.endswith("RMSNorm")]
    then: dict[int, torch.Tensor] = {}

    def rms(x):
        return x.double().pow(2).mean(-1, keepdim=True).sqrt()

    def record(mod, args, out):
        then[id(mod)] = rms(args[0])

    def freeze(mod, args, out):
        return (out.double() * rms(args[0]) / then[id(mod)]).to(out.dtype)
    hf_qk(model, ids, [(m, record) for m in norms])
    return block, [(m, freeze) for m in norms]


def _without(model, layer: int, position: int, write: torch.Tensor, hooks) -> list:
    """The eager attention's q and k at `layer` with `write` (d,) taken out of block `layer`'s input at
    `position`, the norms frozen."""
    block = next(m for n, m in model.hf_model.named_modules() if n.endswith(f"layers.{layer}"))

    def remove(_mod, args, kwargs):
        hidden = (args[0] if args else kwargs["hidden_states"]).clone()
        hidden[0, position] -= write.to(hidden.dtype)
        return ((hidden, *args[1:]), kwargs) if args else (args, {**kwargs, "hidden_states": hidden})
    handle = block.register_forward_pre_hook(remove, with_kwargs=True)
    try:
        return hf_qk(model, _ids(model), hooks)
    finally:
        handle.remove()


def _writes(model, ids, source_layer: int, source_head: int):
    """Head (source_layer, source_head)'s write (n, d) into the stream, by hand: z off o_proj's input times its W_O
    block, through the post-attention norm (Gemma 3) with its σ of this run; and that layer's MLP write
    (the module after which the stream is the block's output: `mlp`, or Gemma's post-feedforward norm)."""
    layer = model.hf_model.model.layers[source_layer]
    got = {}
    hooks = [(layer.self_attn.o_proj, lambda m, a, out: got.update(z=a[0].detach().double(), o=out.detach().double()))]
    mlp = getattr(layer, "post_feedforward_layernorm", None) or layer.mlp
    hooks.append((mlp, lambda m, a, out: got.update(mlp=out.detach().double())))
    hf_qk(model, ids, hooks)
    d_v = layer.self_attn.o_proj.in_features // model.num_heads
    cols = slice(source_head * d_v, (source_head + 1) * d_v)
    w = layer.self_attn.o_proj.weight.detach().double()[:, cols]  # (d, d_v): the head's columns
    head = got["z"][0, :, cols] @ w.T  # (n, d)
    post = getattr(layer, "post_attention_layernorm", None)
    if hasattr(layer, "pre_feedforward_layernorm"):  # Gemma: the norm after attention, frozen at this run's
        o = got["o"][0]
        sigma = (o.pow(2).mean(-1, keepdim=True) + post.eps).sqrt()
        head = head / sigma * (1 + post.weight.detach().double())
    return head, got["mlp"][0]


@pytest.mark.parametrize("family", ["llama", "gemma3"])
def test_taking_a_write_out_changes_the_score_by_its_row_or_column_sum(family, tmp_path):
    model = mha_viz.load_model(_save(family, tmp_path / family), device="cpu", local_attention=False)
    ids = _ids(model)
    n, layer, head = ids.shape[1], 2, 1
    i, j = n - 1, n // 2
    t = qk_terms(model, TEXT, layer, head, i, j)
    clean = hf_score(hf_qk(model, ids), layer, head, i, j, model.num_heads)
    _, frozen = _frozen_norms(model, layer, ids)
    source = int(np.argmax([abs(t.query_totals()[t.query_parts.index(f"L0H{h}")]) for h in range(model.num_heads)]))
    head_write, mlp_write = _writes(model, ids, 0, source)
    for part, write in ((f"L0H{source}", head_write), ("L0 MLP", mlp_write)):
        a = t.query_parts.index(part)
        seen = _without(model, layer, i, write[i], frozen)
        assert clean - hf_score(seen, layer, head, i, j, model.num_heads) == pytest.approx(
            t.query_totals()[a], rel=1e-3, abs=1e-4)
        b = t.key_parts.index(part)
        seen = _without(model, layer, j, write[j], frozen)
        assert clean - hf_score(seen, layer, head, i, j, model.num_heads) == pytest.approx(
            t.key_totals()[b], rel=1e-3, abs=1e-4)
    assert abs(t.query_totals()[t.query_parts.index(f"L0H{source}")]) > 1e-3  # a part that matters was tested


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def test_the_induction_heads_key_comes_from_the_previous_token_head(toy):
    text = "q w e r t y u i q w e r t y u i"
    run = mha_viz.analyze(toy, text)
    a = run.attentions
    n = a.shape[-1]
    previous = int(np.argmax([np.mean([a[0, h, p, p - 1] for p in range(1, n)]) for h in range(toy.num_heads)]))
    induction = int(np.argmax([np.mean([a[1, h, p, p - 7] for p in range(9, n)]) for h in range(toy.num_heads)]))
    query, key = 10, 3  # the second "w"; the token after the first "w"
    t = qk_terms(toy, text, 1, induction, query, key)
    assert t.error < 1e-5
    assert t.key_parts[int(np.argmax(t.key_totals()))] == f"L0H{previous}"
    assert t.query_parts[int(np.argmax(t.query_totals()))] == "embed"
    why = t.minus(qk_terms(toy, text, 1, induction, query, key + 1))  # why that key and not the next one
    assert why.key_parts[int(np.argmax(why.key_totals()))] == f"L0H{previous}"


@pytest.mark.parametrize(("family", "reason"), [("deepseek_v3", "multi-head latent attention"),
                                               ("qwen3_next", "sigmoid gate")])
def test_what_cannot_be_split_exactly_is_refused_by_name(family, reason, tmp_path):
    model = mha_viz.load_model(architectures_2026.build(family, tmp_path), device="cpu", local_attention=False)
    with pytest.raises(InputError, match=reason):
        qk_terms(model, TEXT, model.num_layers - 1, 0, 5, 2)


def test_bad_positions_and_refused_models_get_a_message(random_model):
    _, model = random_model
    with pytest.raises(InputError, match="outside the text"):
        qk_terms(model, TEXT, 0, 0, 500, 0)
    with pytest.raises(InputError, match="does not exist"):
        qk_terms(model, TEXT, model.num_layers, 0, 0, 0)
