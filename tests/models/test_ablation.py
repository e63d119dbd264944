"""Switching heads off (mha_viz.interventions.ablation, mha_viz.interventions.ablation_outcome): gradient
importance against finite differences, a fully masked layer against its output projection's bias, pruning by
importance against random pruning on SmolLM2, and the live view's outcomes (loss, top-k,
sentence embedding) against every row of the logits and the plain loss."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import ablation, heads_off_loss
from mha_viz.interventions import ablation_outcome as outcome
from mha_viz.text import loss_inputs
from mha_viz.text.tokenize import label_ids
from mha_viz_models.families.builtin import output_projection
from mha_viz_models.reading.masking import head_mask
from tests.tolerance import assert_same_ranking

TEXT = "the cat sat on the mat and the dog sat on the log"


def _loss_at(model, inputs, scale: torch.Tensor) -> float:
    with torch.no_grad():
        return float(ablation._loss_under(model, inputs, scale.double().float()))


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert"])
def test_gradient_of_the_head_mask_matches_finite_differences(request, which):
    model = request.getfixturevalue(which)
    grad, per_token = ablation.head_gradients(model, TEXT)
    inputs = loss_inputs.prepare(model, TEXT)
    L, H = model.num_layers, model.num_heads
    eps = 1e-2
    fd = np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            up, down = torch.ones(L, H), torch.ones(L, H)
            up[layer, head] += eps
            down[layer, head] -= eps
            fd[layer, head] = (_loss_at(model, inputs, up) - _loss_at(model, inputs, down)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, atol=2e-3, rtol=2e-2)
    # Michel's per-token absolute sum is at least |Σ_t| = |∂L/∂ξ| / n, with equality only when
    # every token's contribution has the same sign
    assert (per_token + 1e-7 >= np.abs(grad) / inputs.ids.shape[1]).all()
    imp = ablation.head_importance(model, TEXT)
    np.testing.assert_allclose(np.linalg.norm(imp, axis=1), 1.0, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_importance_in_half_precision_is_float32s_within_its_rounding(gpt2_dir, tiny_gpt2, dtype):
    """A model loaded in half precision scores its heads too (bfloat16 failed: numpy has no bfloat16), as float32
    does within the precision's rounding: each row's unit vector within 0.05 of float32's (bfloat16 keeps 8 bits of
    the mantissa; the loss and its gradient go through every layer at that precision)."""
    half = mha_viz.load_model(str(gpt2_dir), device="cpu", dtype=dtype)
    got, want = ablation.head_importance(half, TEXT), ablation.head_importance(tiny_gpt2, TEXT)
    assert got.dtype == np.float64 and np.isfinite(got).all()
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(got, want, atol=0.05)


def test_importance_of_one_scored_token_is_the_normalised_gradient(tiny_gpt2):
    """Two tokens (BOS and a word): only position 0 predicts anything, so the per-token sum has one term and the
    importance is |∂L/∂ξ| row-normalised."""
    tok = tiny_gpt2.tokenizer
    text = next(t for t in ("the cat", "hello world", "cat sat", "the mat", "dog")
                if len(tok(t)["input_ids"]) == 2)
    grad, _ = ablation.head_gradients(tiny_gpt2, text)
    expected = np.abs(grad) / np.linalg.norm(np.abs(grad), axis=1, keepdims=True)
    np.testing.assert_allclose(ablation.head_importance(tiny_gpt2, text), expected, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_bert"])
def test_masking_every_head_of_a_layer_leaves_the_output_projection_bias(request, which):
    model = request.getfixturevalue(which)
    inputs = loss_inputs.prepare(model, TEXT)
    layer = 1
    w_o = output_projection(*model.attention_modules[layer])
    seen = []
    hook = w_o.register_forward_hook(lambda _m, _i, out: seen.append(out.detach()))
    scale = torch.ones(model.num_layers, model.num_heads)
    scale[layer] = 0.0
    try:
        with torch.no_grad(), head_mask(model, scale):
            heads_off_loss.losses(model, loss_inputs.pad(model, [inputs]))
    finally:
        hook.remove()
    bias = w_o.bias.detach()
    assert seen and torch.allclose(seen[0], bias.expand_as(seen[0]), atol=1e-6)
    keep = np.ones((model.num_layers, model.num_heads), bool)
    full = ablation.masked_loss(model, TEXT, keep)
    keep[layer] = False
    assert ablation.masked_loss(model, TEXT, keep) != full  # and the loss does change


def test_masked_lm_masks_fixed_positions(tiny_bert):
    inputs = loss_inputs.prepare(tiny_bert, TEXT)
    scored = (inputs.labels[0] != -100).nonzero().ravel().tolist()
    assert scored == [3, 9]  # non-special positions 1..12: the 3rd and the 9th
    assert all(inputs.ids[0, i] == tiny_bert.tokenizer.mask_token_id for i in scored)


@pytest.mark.model
def test_embedding_loss_is_zero_with_every_head_and_grows_when_heads_go(minilm):
    keep = np.ones((minilm.num_layers, minilm.num_heads), bool)
    assert loss_inputs.loss_kind(minilm) == loss_inputs.EMBEDDING
    assert abs(ablation.masked_loss(minilm, TEXT, keep)) < 1e-6
    keep[:, ::2] = False
    assert ablation.masked_loss(minilm, TEXT, keep) > 1e-3


@pytest.mark.model
def test_pruning_by_importance_beats_random_pruning_on_smollm2(smollm2):
    imp = ablation.head_importance(smollm2, ablation.SAMPLE_PARAGRAPH)
    N = imp.size
    by_importance = np.argsort(imp.ravel())  # least important first
    loss_imp = ablation.pruning_curve(smollm2, ablation.SAMPLE_PARAGRAPH, by_importance, [0.3])[0]
    rng = np.random.default_rng(0)
    random_losses = [ablation.pruning_curve(smollm2, ablation.SAMPLE_PARAGRAPH, rng.permutation(N), [0.3])[0]
                     for _ in range(5)]
    base = ablation.pruning_curve(smollm2, ablation.SAMPLE_PARAGRAPH, by_importance, [0.0])[0]
    assert base < loss_imp < np.mean(random_losses)


def test_predictions_with_mean_ablation_replace_the_heads_by_their_mean(tiny_gpt2):
    """Mean-ablation needs each head's mean output before predicting (it used to crash on a
    decoder); with every head kept the prediction is the unablated one, with heads replaced by
    their mean it differs."""
    keep = np.ones((tiny_gpt2.num_layers, tiny_gpt2.num_heads), dtype=bool)
    same = outcome.predictions(tiny_gpt2, TEXT, keep, mean_ablation=True)
    assert same[0].before == same[0].after
    keep[:, :2] = False
    changed = outcome.predictions(tiny_gpt2, TEXT, keep, mean_ablation=True)
    assert changed[0].before == same[0].before and changed[0].after != changed[0].before
    zeroed = outcome.predictions(tiny_gpt2, TEXT, keep)  # the same heads zeroed instead
    assert changed[0].after != zeroed[0].after


def test_a_gradient_pass_over_the_memory_budget_is_refused_before_it_runs(tiny_gpt2, monkeypatch):
    n = len(mha_viz.tokenize(tiny_gpt2, TEXT).ids)
    need = ablation.gradient_bytes(tiny_gpt2, n)
    assert ablation.gradient_bytes(tiny_gpt2, 2 * n) > 2 * need  # the n² terms show
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    monkeypatch.setattr(ablation, "gradient_bytes", lambda model, n, **_: 3 * 2**20)
    ran = []
    monkeypatch.setattr(ablation, "_loss_under", lambda *a, **k: ran.append(1))
    with pytest.raises(mha_viz.InputError, match=r"3\.0 MiB .*1\.0 MiB"):
        ablation.head_importance(tiny_gpt2, TEXT)
    assert not ran  # refused before any forward or backward pass


MASKED = "the cat sat on the [MASK] and the dog sat on the [MASK]"


def _top_from_every_row(model, text: str, keep: np.ndarray, mean_ablation: bool, k: int = 5) -> list:
    """The top-k at the predicted positions the plain way: every row of the logits under the head
    mask, the means from `ablation.head_means` on the text as typed."""
    ids = loss_inputs.prepare_ids(model, text)
    inputs = loss_inputs.Inputs(ids, None, loss_inputs.loss_kind(model))
    means = ablation.head_means(model, inputs) if mean_ablation else None
    with torch.no_grad(), head_mask(model, torch.as_tensor(keep, dtype=torch.float32), means):
        logits = model.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0]
    if loss_inputs.loss_kind(model) == loss_inputs.NEXT_TOKEN:
        rows = [ids.shape[1] - 1]
    else:
        rows = (ids[0] == model.tokenizer.mask_token_id).nonzero().ravel().tolist()
    out = []
    for r in rows:
        every = torch.softmax(logits[r].float(), -1)
        p, i = every.topk(k)
        out.append(([int(j) for j in i], p.numpy(), every.numpy()))
    return out


def _same_tops(model, shown, plain) -> None:
    """An Outcome's top-k at each predicted position against `_top_from_every_row`'s: the same probabilities
    rank by rank, and the same tokens in the same order, up to tokens whose probabilities lie within the
    rounding of the two ways of computing them (the logits of all rows or of some: 1e-5 of their size),
    which may trade places within twice that."""
    for (label, got), (ids, probs, every) in zip(shown, plain, strict=True):
        np.testing.assert_allclose([q for _, q in got], probs, rtol=1e-5, atol=1e-7)
        tol = 1e-7 + 1e-5 * float(probs.max())
        assert_same_ranking(_ids_of(model, got, every, tol), ids, every, 2 * tol, label)


def _ids_of(model, shown: list[tuple[str, float]], every: np.ndarray, tolerance: float) -> list[int]:
    """The token ids behind a top-k as an Outcome shows it (label, probability): of the tokens that
    are labelled so, the one whose probability in `every` is within `tolerance` of the shown one."""
    ids = []
    for text, q in shown:
        near = np.flatnonzero(np.abs(every - q) <= tolerance)
        named = [int(j) for j in near if label_ids(model, [int(j)]).display[0] == text]
        assert named, f"{text!r} ({q:.6g}): no token of that text and probability"
        ids.append(min(named, key=lambda j: abs(every[j] - q)))
    return ids


@pytest.mark.parametrize("which, text", [("tiny_gpt2", TEXT), ("tiny_bert", MASKED), ("tiny_bert", TEXT)])
@pytest.mark.parametrize("mean_ablation", [False, True])
def test_outcomes_match_the_plain_loss_and_every_row_of_the_logits(request, which, text, mean_ablation):
    model = request.getfixturevalue(which)
    keep = np.ones((model.num_layers, model.num_heads), bool)
    keep[1] = False
    keep[0, ::2] = False
    base = outcome.unablated(model, text)
    off = outcome.ablated(model, text, keep, mean_ablation=mean_ablation, base=base)
    assert base.loss == pytest.approx(ablation.masked_loss(model, text, np.ones_like(keep)), rel=1e-5)
    assert off.loss == pytest.approx(ablation.masked_loss(model, text, keep, mean_ablation=mean_ablation), rel=1e-5)
    assert off.loss != base.loss  # the heads did go (random-init BERT's mean-ablation changes little)
    _same_tops(model, off.top, _top_from_every_row(model, text, keep, mean_ablation))
    _same_tops(model, base.top, _top_from_every_row(model, text, np.ones_like(keep), False))
    assert len(base.top) == (1 if which == "tiny_gpt2" else 2 if text == MASKED else 0)


@pytest.mark.parametrize("which, text, passes", [
    ("tiny_gpt2", TEXT, lambda n: [n]),  # the loss reads every row; the next token is its last row
    ("tiny_bert", MASKED, lambda n: [2, 2]),  # the fixed masks for the loss, the typed ones for the top-k
    ("tiny_bert", TEXT, lambda n: [2]),  # no mask typed: no second pass
])
def test_each_head_set_runs_once_and_the_lm_head_projects_only_the_rows_read(request, which, text, passes):
    model = request.getfixturevalue(which)
    n = loss_inputs.prepare_ids(model, text).shape[1]
    rows: list[int] = []
    handle = model.hf_model.get_output_embeddings().register_forward_hook(
        lambda _m, _i, out: rows.append(out.shape[-2]))
    try:
        base = outcome.unablated(model, text)
        assert rows == passes(n)
        keep = np.ones((model.num_layers, model.num_heads), bool)
        assert outcome.ablated(model, text, keep, mean_ablation=True, base=base) is base  # no pass at all
        assert rows == passes(n)
        keep[0, 0] = False
        outcome.ablated(model, text, keep, mean_ablation=True, base=base)  # the means come from base
        assert rows == passes(n) * 2
    finally:
        handle.remove()


@pytest.mark.model
@pytest.mark.parametrize("mean_ablation", [False, True])
def test_embedding_outcomes_match_the_plain_sentence_embedding(minilm, mean_ablation):
    keep = np.ones((minilm.num_layers, minilm.num_heads), bool)
    keep[2] = False
    other = "A cat is resting on a rug."
    pairs = []
    for text in (TEXT, other):
        base = outcome.unablated(minilm, text)
        off = outcome.ablated(minilm, text, keep, mean_ablation=mean_ablation, base=base)
        inputs = loss_inputs.Inputs(loss_inputs.prepare_ids(minilm, text), None, loss_inputs.EMBEDDING)
        means = ablation.head_means(minilm, inputs) if mean_ablation else None
        with torch.no_grad(), head_mask(minilm, torch.as_tensor(keep, dtype=torch.float32), means):
            plain_off = heads_off_loss.last_hidden(minilm, loss_inputs.pad(minilm, [inputs]))[0].mean(0)
        with torch.no_grad():
            plain_on = heads_off_loss.last_hidden(minilm, loss_inputs.pad(minilm, [inputs]))[0].mean(0)
        torch.testing.assert_close(base.embedding, plain_on, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(off.embedding, plain_off, rtol=1e-5, atol=1e-6)
        assert off.loss == pytest.approx(ablation.masked_loss(minilm, text, keep, mean_ablation=mean_ablation),
                                         rel=1e-4)
        pairs.append((base.embedding, off.embedding))
    change = outcome.compare_embeddings(*pairs)
    assert change == pytest.approx(outcome.embedding_change(minilm, TEXT, keep, other, mean_ablation=mean_ablation),
                                   rel=1e-6)
    cos = torch.nn.functional.cosine_similarity
    assert change["similarity after"] == pytest.approx(float(cos(pairs[0][1], pairs[1][1], dim=0)), rel=1e-6)
    assert 0 < change["cosine to unablated"] < 1


@pytest.mark.parametrize("mean_ablation", [False, True])
@pytest.mark.parametrize("rows", [None, 2])  # every step's mask in one batch, or 2 at a time: a last batch of 1
def test_pruning_curves_are_the_masked_losses_of_each_prefix(tiny_gpt2, monkeypatch, mean_ablation, rows):
    """Each (order, fraction) is the loss with that prefix of the order masked (`masked_loss`, a batch of one),
    however the distinct masks (5 here: both orders share f = 0) are batched."""
    if rows is not None:
        monkeypatch.setattr(ablation, "effect_rows", lambda _model, _n, texts=1, _masks=None: rows * texts)
    L, H = tiny_gpt2.num_layers, tiny_gpt2.num_heads
    orders = [np.arange(L * H), np.random.default_rng(1).permutation(L * H)]
    fractions = [0.0, 0.25, 0.5]
    curves = ablation.pruning_curves(tiny_gpt2, TEXT, orders, fractions, mean_ablation=mean_ablation)
    for order, curve in zip(orders, curves):
        for f, got in zip(fractions, curve):
            keep = np.ones(L * H, bool)
            keep[order[: int(np.ceil(f * L * H))]] = False
            assert got == pytest.approx(ablation.masked_loss(tiny_gpt2, TEXT, keep.reshape(L, H),
                                                             mean_ablation=mean_ablation), rel=1e-5)
    assert curves[0][1] != curves[1][1]


def test_a_refused_gradient_pass_offers_the_longest_text_that_fits(tiny_gpt2, monkeypatch):
    """Issue 90: a refusal names the longest text that fits. The count offered is the largest n whose gradient pass
    fits the budget (one more token's does not), and head_importance at that count runs."""
    from tests.helpers import capture_budget_of

    n = 40
    budget = ablation.gradient_bytes(tiny_gpt2, n, fused=True) - 1  # 40 tokens one byte over
    capture_budget_of(monkeypatch, budget)
    with pytest.raises(ablation.GradientBudget, match=r"At most (\d+) tokens fit") as refused:
        ablation.check_gradient_budget(tiny_gpt2, n, fused=True)
    fits = int(str(refused.value).split("At most ")[1].split()[0])
    assert fits == n - 1
    assert ablation.gradient_bytes(tiny_gpt2, fits, fused=True) <= budget < ablation.gradient_bytes(tiny_gpt2, n,
                                                                                                    fused=True)
    ablation.check_gradient_budget(tiny_gpt2, fits, fused=True)  # no refusal


@pytest.mark.parametrize("which, text", [("tiny_gpt2", TEXT), ("tiny_bert", MASKED),
                                         pytest.param("minilm", TEXT, marks=pytest.mark.model)])
@pytest.mark.parametrize("mean_ablation", [False, True])
def test_each_heads_effect_is_its_own_masked_loss_however_the_runs_are_batched(request, monkeypatch, which, text,
                                                                             mean_ablation):
    """`ablation_effects` runs the copies of the text side by side, each under its own head mask: each head's effect
    is the loss with that head alone off minus the loss with none off, each computed by `masked_loss` on a batch of
    one (within float32's rounding of the loss: a random-init BERT's heads replaced by their mean move it by about
    1e-5), whether every run is in one batch (as sized here) or 5 rows a batch (a last batch of 3); the progress
    reaches every head."""
    model = request.getfixturevalue(which)
    L, H = model.num_layers, model.num_heads
    base = ablation.masked_loss(model, text, np.ones((L, H), bool), mean_ablation=mean_ablation)
    rounding = 1e-5 * max(1.0, abs(base))  # a few of float32's steps at the loss's size
    alone = np.zeros((L, H))
    for layer in range(L):
        for head in range(H):
            keep = np.ones((L, H), bool)
            keep[layer, head] = False
            alone[layer, head] = ablation.masked_loss(model, text, keep, mean_ablation=mean_ablation)
    assert (L * H + 1) % 5, "a last batch shorter than the others"
    for rows in (None, 5):
        if rows is not None:
            monkeypatch.setattr(ablation, "effect_rows", lambda _model, _n, texts=1, _masks=None: rows * texts)
        said = []
        effects = ablation.ablation_effects(model, text, mean_ablation=mean_ablation,
                                            progress=lambda f, _m: said.append(f))
        np.testing.assert_allclose(effects, alone - base, rtol=1e-4, atol=rounding, err_msg=f"{rows} rows a batch")
        assert said[-1] == 1.0 and said == sorted(said) and len(said) == (1 if rows is None else -(-(L * H + 1) // 5))
    if not mean_ablation:
        assert np.ptp(alone - base) > 5 * rounding  # the heads differ: the comparison is not of one value


def test_no_order_or_no_fraction_gives_an_empty_curve(tiny_gpt2):
    L, H = tiny_gpt2.num_layers, tiny_gpt2.num_heads
    assert ablation.pruning_curves(tiny_gpt2, TEXT, [], [0.0, 0.5]).shape == (0, 2)
    assert ablation.pruning_curves(tiny_gpt2, TEXT, [np.arange(L * H)], []).shape == (1, 0)
