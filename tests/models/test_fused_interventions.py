"""The interventions that read no attention probabilities run Hugging Face's fused attention (SDPA) instead of the
eager one the capture needs (`mha_viz_models.loading.switch.fused`): switching heads off, patching (of one pair and
of a set), attribution patching and the gradient importance. Each is run twice, on a random-init Llama with
grouped-query attention and on GPT-2: as shipped, and with the switch refused (the model stays on eager attention,
as it was before). The attention modules must see SDPA in the first run and eager in the second, the model must be
back on eager after each, and every value must agree within float32's rounding (patching's as the logit difference
moved: a fraction of a random model's small gap magnifies rounding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import ablation, attribution, estimate
from mha_viz.interventions import ablation_outcome as outcome
from mha_viz.tasks.prompt_set import Pair, PromptSet
from mha_viz_models.loading import switch

CLEAN, CORRUPTED = "one two three four five six", "one two four three five six"  # the same token count


def _ablated(model):
    keep = np.ones((model.num_layers, model.num_heads), dtype=bool)
    keep[0, 1] = keep[-1, 0] = False
    base = outcome.unablated(model, CLEAN)
    off = outcome.ablated(model, CLEAN, keep, base=base)
    mean_off = outcome.ablated(model, CLEAN, keep, mean_ablation=True, base=base)
    probabilities = [q for _, top in off.top for _, q in top]
    return np.array([base.loss, off.loss, mean_off.loss, *probabilities])


def _patched(model):
    one = attribution.patch_heads(model, CLEAN, CORRUPTED)
    return one.values * (one.m_clean - one.m_corrupted)  # the logit difference moved (a random model's gap is small)


def _patched_over_a_set(model):
    vocab = model.tokenizer.convert_ids_to_tokens(list(range(len(model.tokenizer))))
    answer, wrong = sorted({" " + t[1:] for t in vocab if t.startswith("Ġ") and t[1:].isalpha() and len(t) > 2})[:2]
    pairs = [Pair(CLEAN, CORRUPTED, answer, wrong), Pair("six five four three two one", "six five three four two one",
                                                         answer, wrong)]
    task = mha_viz.patch_heads(model, PromptSet(pairs, "two"), metric="raw", batch=2, resamples=10)
    assert len(task.kept) == 2, task.left_out
    return task.per_pair


def _estimated(model):
    one = estimate.estimate_positions(model, CLEAN, CORRUPTED)
    return one.values * (one.m_clean - one.m_corrupted)


def _gradients(model):
    return ablation.head_gradients(model, CLEAN)[0]


DOING = {"switching heads off": _ablated, "patching": _patched, "patching over a set": _patched_over_a_set,
         "attribution patching": _estimated,
         "gradient importance": _gradients}


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def model(request, llama_dir, gpt2_dir):
    return mha_viz.load_model(str(llama_dir if request.param == "llama" else gpt2_dir), device="cpu")


def _seen(model, doing) -> tuple[np.ndarray, set[str]]:
    """What `doing` returns, and the attention implementations the model's attention modules ran with."""
    seen = set()
    hooks = [m.register_forward_pre_hook(lambda _m, _a: seen.add(model.hf_model.config._attn_implementation))
             for m, _ in model.attention_modules]
    try:
        return np.asarray(doing(model), dtype=np.float64), seen
    finally:
        for h in hooks:
            h.remove()


@pytest.mark.parametrize("doing", list(DOING))
def test_each_runs_fused_attention_and_equals_the_eager_run(model, doing, monkeypatch):
    fused, fused_seen = _seen(model, DOING[doing])
    assert fused_seen == {"sdpa"}, fused_seen
    assert model.hf_model.config._attn_implementation == "eager"  # back for the capture
    monkeypatch.setattr(switch, "use_fused", lambda m: False)  # the switch refused: eager, as before
    eager, eager_seen = _seen(model, DOING[doing])
    assert eager_seen == {"eager"}, eager_seen
    scale = max(1.0, float(np.abs(eager).max()))
    np.testing.assert_allclose(fused, eager, rtol=0, atol=2e-5 * scale, err_msg=doing)
    assert not np.allclose(eager, 0)  # something was measured


def test_a_model_that_has_no_fused_path_stays_eager_and_says_so(model, monkeypatch):
    """A family whose code refuses SDPA (Gemma 2's soft-capping raises ValueError) keeps eager attention."""
    def refuse(_impl):
        raise ValueError("does not support an attention implementation through torch.nn.functional."
                         "scaled_dot_product_attention yet")
    monkeypatch.setattr(model.hf_model, "set_attn_implementation", refuse)
    with torch.no_grad(), switch.fused(model) as switched:
        assert not switched
        assert model.hf_model.config._attn_implementation == "eager"


def test_a_fused_gradient_pass_is_estimated_without_n_squared_arrays(model, gpt2_dir):
    """Where the model switches to SDPA, the estimate of a gradient pass run inside `fused` grows linearly with n
    (no H n² term); on eager attention (our MHA here), and for a pass run outside `fused`, as before."""
    n = 64
    assert switch.fuses(model)
    once, twice = (ablation.gradient_bytes(model, k, fused=True) for k in (n, 2 * n))
    assert twice == 2 * once  # linear in n
    assert ablation.gradient_bytes(model, n) - once >= 4 * model.num_layers * model.num_heads * n * n  # n² dropped
    ours = mha_viz.load_model(str(gpt2_dir), device="cpu", local_attention=True)
    assert not switch.fuses(ours)
    assert ablation.gradient_bytes(ours, n, fused=True) == ablation.gradient_bytes(ours, n)


def test_a_fused_pass_inside_another_stays_fused_until_the_outer_one_ends(model):
    """A loss computed inside a fused pass (`heads_off_loss` under a caller's `fused`): the inner exit leaves SDPA
    on, the outer one puts eager back."""
    with model.lock, switch.fused(model):
        with switch.fused(model) as inner:
            assert inner
        assert model.hf_model.config._attn_implementation == "sdpa"
    assert model.hf_model.config._attn_implementation == "eager"
