"""Generation step by step (mha_viz.generate): greedy tokens equal Hugging Face's generate (up to a step
whose two best tokens lie within the rounding of two ways of computing them: there the two continue
different texts), the incrementally captured attention equals one eager forward over the final sequence,
sampling is reproducible under a seed, toy-induction continues its pattern, and bad input gets a message."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from tests.helpers import next_token_probs
from tests.tolerance import assert_same_argmax, assert_same_tokens

PROMPT = "The capital of France is Paris. The capital of Italy is"
# the next token's probabilities in two computations (a KV cache or not, our MHA or Hugging Face's): within
# 1e-5 each, so two tokens may trade the first place within twice that
NEAR = 2e-5


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def _eager(model, ids: list[int]) -> np.ndarray:
    """Every head's attention from one eager forward over `ids` (independent of generate)."""
    cap = model.capture(torch.tensor([ids]))
    return torch.stack([a[0] for a in cap.attentions]).float().numpy()  # (L, H, n, n)


def _hf_greedy(model, prompt: str, new: int) -> list[int]:
    ids = torch.tensor([mha_viz.tokenize(model, prompt).ids])
    out = model.hf_model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                                  min_new_tokens=new, do_sample=False, pad_token_id=model.tokenizer.pad_token_id)
    return out[0, ids.shape[1]:].tolist()


def _same_greedy(model, gen, other: list[int]) -> int:
    """`gen`'s tokens against `other`, another greedy computation's from the same prompt, up to a near tie
    of `model`'s (`assert_same_tokens`): the steps that agree."""
    prompt = gen.run.token_ids[:gen.num_prompt_tokens]
    return assert_same_tokens([s.token_id for s in gen.steps], other, next_token_probs(model, prompt), NEAR,
                              model.name)


@pytest.mark.model
def test_greedy_equals_hugging_face_and_attention_equals_eager_on_smollm2(smollm2):
    gen = mha_viz.generate(smollm2, PROMPT, 12, stop_at_eos=False)
    _same_greedy(smollm2, gen, _hf_greedy(smollm2, PROMPT, 12))
    assert gen.text.strip().startswith("Rome")
    n = gen.num_prompt_tokens + 12
    assert gen.run.attentions.shape == (30, 9, n, n) and gen.run.num_kv_heads == 3
    np.testing.assert_allclose(gen.run.attentions, _eager(smollm2, gen.run.token_ids), atol=1e-5, rtol=0)


@pytest.mark.model
def test_our_mha_inside_smollm2_generates_the_same(smollm2, smollm2_ours):
    ours = mha_viz.generate(smollm2_ours, PROMPT, 6, stop_at_eos=False)
    theirs = mha_viz.generate(smollm2, PROMPT, 6, stop_at_eos=False)
    _same_greedy(smollm2, theirs, [s.token_id for s in ours.steps])
    np.testing.assert_allclose(ours.run.attentions, _eager(smollm2, ours.run.token_ids), atol=1e-5, rtol=0)


@pytest.mark.parametrize("which", ["tiny_gpt2", "tiny_gpt2_ours"])
def test_random_gpt2_greedy_and_incremental_capture(request, which):
    model = request.getfixturevalue(which)
    prompt = "The cat sat on the mat. The dog"
    gen = mha_viz.generate(model, prompt, 10, stop_at_eos=False)
    theirs = request.getfixturevalue("tiny_gpt2")
    _same_greedy(theirs, gen, _hf_greedy(theirs, prompt, 10))
    a = gen.run.attentions
    np.testing.assert_allclose(a, _eager(model, gen.run.token_ids), atol=1e-5, rtol=0)
    np.testing.assert_allclose(a.sum(-1), 1.0, atol=1e-5)
    assert not np.triu(a, 1).any()  # causal: nothing above the diagonal


@pytest.mark.parametrize("prompt", ["A", "The cat sat on the mat and the dog ran off"])
def test_generation_past_a_sliding_window_equals_eager(mistral_window_dir, prompt):
    """A window of 8: past 8 tokens the cache holds the last 8 keys only; each new row still has
    one entry per token, 0 where the window hides the key, as one eager forward computes it."""
    model = mha_viz.load_model(mistral_window_dir, device="cpu")
    gen = mha_viz.generate(model, prompt, 14, stop_at_eos=False)
    n = gen.num_prompt_tokens + 14
    assert n > 8 and gen.run.attentions.shape == (2, 4, n, n)
    eager = _eager(model, gen.run.token_ids)
    assert not np.tril(eager, -8).any() and np.tril(eager, -7).any()  # the window is in force
    np.testing.assert_allclose(gen.run.attentions, eager, atol=1e-5, rtol=0)
    np.testing.assert_allclose(gen.run.attentions.sum(-1), 1.0, atol=1e-5)


def test_sampling_is_reproducible_under_a_seed(tiny_gpt2):
    args = dict(temperature=1.5, top_k=20, top_p=0.95, stop_at_eos=False)
    first = mha_viz.generate(tiny_gpt2, "The cat", 12, seed=7, **args)
    again = mha_viz.generate(tiny_gpt2, "The cat", 12, seed=7, **args)
    other = [mha_viz.generate(tiny_gpt2, "The cat", 12, seed=s, **args) for s in (8, 9)]
    ids = [s.token_id for s in first.steps]
    assert ids == [s.token_id for s in again.steps]
    assert any([s.token_id for s in g.steps] != ids for g in other)  # the seed matters
    greedy = mha_viz.generate(tiny_gpt2, "The cat", 12, stop_at_eos=False)
    _same_greedy(tiny_gpt2, greedy, _hf_greedy(tiny_gpt2, "The cat", 12))


def test_top_k_one_is_greedy(tiny_gpt2):
    sampled = mha_viz.generate(tiny_gpt2, "The dog", 8, temperature=1.0, top_k=1, seed=3, stop_at_eos=False)
    greedy = mha_viz.generate(tiny_gpt2, "The dog", 8, stop_at_eos=False)
    assert [s.token_id for s in sampled.steps] == [s.token_id for s in greedy.steps]


def test_each_step_reports_the_models_distribution(tiny_gpt2):
    gen = mha_viz.generate(tiny_gpt2, "The cat sat", 4, stop_at_eos=False)
    for t, step in enumerate(gen.steps):
        prefix = gen.run.token_ids[: gen.num_prompt_tokens + t]
        with torch.no_grad():
            logits = tiny_gpt2.hf_model(input_ids=torch.tensor([prefix])).logits[0, -1]
        p = torch.softmax(logits.float(), -1)
        assert_same_argmax(step.token_id, p.numpy(), NEAR, f"step {t}")  # the cache's forward against this one
        assert step.prob == pytest.approx(float(p[step.token_id]), abs=1e-5)
        assert len(step.top) == mha_viz.capture.generation.TOP and step.top[0][1] == pytest.approx(step.prob, abs=1e-6)
        assert step.entropy == pytest.approx(float(-(p * p.log()).sum()), abs=1e-4)
    assert gen.row_of(0) == gen.num_prompt_tokens - 1


def test_toy_induction_continues_the_pattern(toy):
    gen = mha_viz.generate(toy, "k d m x b f k d m", 3)
    assert gen.new_tokens == ["x", "b", "f"] and gen.text == "x b f"
    assert gen.full_text == "k d m x b f k d m x b f"
    np.testing.assert_allclose(gen.run.attentions, _eager(toy, gen.run.token_ids), atol=1e-6, rtol=0)


def test_on_step_streams_and_can_stop(toy):
    seen = []

    def on_step(g):
        seen.append(list(g.new_tokens))
        np.testing.assert_allclose(g.run.attentions.sum(-1), 1.0, atol=1e-5)  # every row, the newest too
        return len(seen) < 2

    gen = mha_viz.generate(toy, "k d m x b f k d m", 5, on_step=on_step)
    assert seen == [["x"], ["x", "b"]] and gen.new_tokens == ["x", "b"] and gen.stopped_by == "stopped"
    np.testing.assert_allclose(gen.run.attentions, _eager(toy, gen.run.token_ids), atol=1e-6, rtol=0)


@pytest.mark.model
def test_an_encoder_is_refused_with_a_message(minilm):
    needs = "needs a decoder with a language-model head, such as the bundled smollm2 or toy-induction"
    with pytest.raises(mha_viz.capture.GenerationError, match=needs):
        mha_viz.generate(minilm, "Hello there", 4)


@pytest.mark.parametrize("prompt,new,cap,needle", [
    ("", 4, None, "Type a sentence"),
    ("   ", 4, None, "Type a sentence"),
    ("k d m", 20, 10, "At most 6 new tokens fit"),
    ("k d m x b f k d m", 0, None, "at least one new token"),
    ("k d m x b f k d m", 2, 10, "already fills the limit of 10"),
    ("a b c d e f g h i j k l", 2, 10, "more than the limit of 10"),
])
def test_bad_input_gets_a_message(toy, prompt, new, cap, needle):
    with pytest.raises(mha_viz.InputError, match=needle):
        mha_viz.generate(toy, prompt, new, max_tokens=cap)


def test_the_session_cap_limits_generation(toy):
    with mha_viz.text.session_cap(12):
        with pytest.raises(mha_viz.InputError, match="At most 2 new tokens fit"):
            mha_viz.generate(toy, "k d m x b f k d m", 5)
        assert len(mha_viz.generate(toy, "k d m x b f k d m", 2).steps) == 2


def test_non_finite_logits_are_reported(gpt2_dir):
    broken = mha_viz.load_model(str(gpt2_dir), device="cpu")
    with torch.no_grad():
        broken.hf_model.lm_head.weight[0, 0] = float("nan")  # tied to the embeddings: NaN spreads
    with pytest.raises(mha_viz.capture.GenerationError, match="not finite"):
        mha_viz.generate(broken, "The cat", 3)
