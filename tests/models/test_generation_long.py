"""A long generation (`mha_viz.generate` past MHA_VIZ_DENSE_MB; `MHA_VIZ_DENSE_MB=0` makes every one long):
greedy on SmolLM2 (Hugging Face's attention and our MHA) from a ~300-token prompt picks the dense
generation's tokens (up to a near tie), and every row, each new token's included, equals the dense
generation's within 1e-5, never building every head's array; the scan's own rows of the new tokens equal the
recorded ones; the prompt is read without recording any head's rows but the last prompt token's; a
generation stopped midway reads its prompt's rows from a scan of the prompt and equals one eager forward
(a sliding window's too); the dense capture budget does not refuse a long generation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.capture import head_rows
from mha_viz.capture.grown_rows import recorded_bytes
from tests.helpers import ROOT, capture_budget_of, next_token_probs
from tests.tolerance import assert_same_tokens

PROMPT = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()[:1300]  # about 300 SmolLM2 tokens
NEW = 4
NEAR = 2e-5  # as in test_generation.py: the next token's probabilities of two computations within 1e-5 each


def _query_rows(model) -> tuple[list[int], list]:
    """(the most query rows of probabilities any attention layer returned, the hooks to remove)."""
    seen = [0]

    def hook(_module, _inputs, out):
        probs = out[1] if isinstance(out, tuple) and len(out) > 1 else None
        if isinstance(probs, torch.Tensor) and probs.dim() == 4:
            seen[0] = max(seen[0], probs.shape[-2])
    return seen, [m.register_forward_hook(hook) for m, _ in model.attention_modules]


@pytest.fixture(scope="module")
def pair(smollm2):
    """(model, dense generation, long generation, the most query rows a layer recorded in each)."""
    model = smollm2
    seen = {}
    with pytest.MonkeyPatch.context() as mp:
        for kind, env in (("dense", "1024"), ("long", "0")):
            mp.setenv("MHA_VIZ_DENSE_MB", env)
            rows, hooks = _query_rows(model)
            try:
                seen[kind] = mha_viz.generate(model, PROMPT, NEW, stop_at_eos=False), rows[0]
            finally:
                for h in hooks:
                    h.remove()
    return model, seen["dense"][0], seen["long"][0], {k: v[1] for k, v in seen.items()}


@pytest.mark.model
def test_a_long_generation_picks_the_dense_tokens_and_rows(pair):
    model, dense, long = pair[:3]
    P = dense.num_prompt_tokens
    assert 250 <= P <= 350 and long.num_prompt_tokens == P and dense.run.is_dense and not long.run.is_dense
    same = assert_same_tokens([s.token_id for s in long.steps], [s.token_id for s in dense.steps],
                              next_token_probs(model, dense.run.token_ids[:P]), NEAR, model.name)
    n = P + same  # the rows of the tokens both picked
    assert long.run.token_ids[:n] == dense.run.token_ids[:n] and long.run.summary is not None
    with head_rows.forbid_dense():
        for layer in range(model.num_layers):
            np.testing.assert_allclose(long.run.layer_rows(layer, 0, n)[..., :n],
                                       dense.run.attentions[layer, :, :n, :n], atol=1e-5, rtol=0, err_msg=f"{layer}")
            for q in range(P - 1, n):  # each row the cache computed, one head at a time, as the page reads it
                head = q % model.num_heads
                np.testing.assert_allclose(long.run.rows(layer, head, q, q + 1)[0, :n],
                                           dense.run.attentions[layer, head, q, :n], atol=1e-5, rtol=0)


@pytest.mark.model
def test_the_scans_rows_of_the_new_tokens_equal_the_recorded_ones(pair):
    model, _, long = pair[:3]
    P, n = long.num_prompt_tokens, long.run.n
    for layer in range(model.num_layers):
        head = layer % model.num_heads
        np.testing.assert_allclose(long.run.summary.rows(layer, head, P - 1, n), long.run.rows(layer, head, P - 1, n),
                                   atol=1e-5, rtol=0, err_msg=f"layer {layer}")


@pytest.mark.model
def test_a_long_generation_without_the_views_scan_reads_the_same_new_rows(pair, monkeypatch):
    """`views=False` (what retrieval scores read): no scan of the whole sequence at the end (no summary, no
    message of it), the same tokens, and each new token's rows equal to the long generation's with that scan. The
    prompt's one forward says each layer it has read, in order, before the first new token."""
    model, _, long = pair[:3]
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    said = []
    lean = mha_viz.generate(model, PROMPT, NEW, stop_at_eos=False, views=False,
                            progress=lambda fraction, message: said.append(message))
    assert lean.run.summary is None and long.run.summary is not None
    assert not any("for the views" in m for m in said)
    read = [m for m in said if m.startswith("Reading the prompt")]
    assert read == [f"Reading the prompt's {lean.num_prompt_tokens - 1:,} tokens: layer {i} of {model.num_layers}"
                    for i in range(1, model.num_layers + 1)], read
    assert said.index(read[-1]) < said.index(next(m for m in said if "new tokens" in m))
    assert lean.run.token_ids == long.run.token_ids
    P, n = lean.num_prompt_tokens, lean.run.n
    for layer in range(model.num_layers):
        np.testing.assert_array_equal(lean.run.layer_rows(layer, P - 1, n), long.run.layer_rows(layer, P - 1, n))


@pytest.mark.model
def test_the_prompt_is_read_without_recording_its_heads(pair):
    model, dense, _, seen = pair
    assert seen["dense"] == dense.num_prompt_tokens  # the hook sees what a layer records
    assert seen["long"] == 1  # one query row a forward: the last prompt token's, then each new token's
    assert pair[2].run.own is None  # nor the model's own outputs, which no page reads of a generation


@pytest.mark.parametrize("which,prompt", [("tiny_gpt2", "The cat sat on the mat. The dog"),
                                          ("window", "The cat sat on the mat and the dog ran off"),
                                          pytest.param("smollm2_ours", "The capital of France is Paris. The capital of",
                                                       marks=pytest.mark.model)])
def test_a_stopped_long_generation_reads_its_prompt_from_a_scan(request, monkeypatch, which, prompt):
    """Snapshots streamed to on_step (what a Stop in the app keeps) read the prompt's rows from a scan of
    the prompt, made on first need; the rows equal one eager forward over the snapshot's tokens. No layer
    (Hugging Face's attention, or our adapters) records more than one query row while it generates."""
    if which == "window":  # a window of 8: the cache keeps the last 8 keys
        model = mha_viz.load_model(request.getfixturevalue("mistral_window_dir"), device="cpu")
    else:
        model = request.getfixturevalue(which)
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    kept = []
    seen, hooks = _query_rows(model)
    try:
        gen = mha_viz.generate(model, prompt, 12, stop_at_eos=False, on_step=lambda g: kept.append(g) or len(kept) < 4)
    finally:
        for h in hooks:
            h.remove()
    assert seen[0] == 1
    assert gen.stopped_by == "stopped" and len(gen.steps) == 4 and not gen.run.is_dense
    snap = kept[-1]
    assert snap.run.summary is None and snap.run.token_ids == gen.run.token_ids
    with torch.no_grad():
        cap = model.capture(torch.tensor([snap.run.token_ids]))
    eager = torch.stack([a[0] for a in cap.attentions]).float().numpy()
    with head_rows.forbid_dense():
        for run in (snap.run, gen.run):
            for layer in range(model.num_layers):
                np.testing.assert_allclose(run.layer_rows(layer), eager[layer], atol=1e-5, rtol=0)
            np.testing.assert_allclose(run.column(0, 1, 2), eager[0, 1, :, 2], atol=1e-5, rtol=0)


def test_the_dense_budget_does_not_refuse_a_long_generation(tiny_gpt2, monkeypatch):
    n = mha_viz.tokenize(tiny_gpt2, "The cat sat").n + 6
    L, H = tiny_gpt2.num_layers, tiny_gpt2.num_heads
    capture_budget_of(monkeypatch, 4 * L * H * n * n - 1)  # every head's array over n tokens is one byte over
    with pytest.raises(mha_viz.capture.GenerationError, match="Capturing every head over"):
        mha_viz.generate(tiny_gpt2, "The cat sat", 6, dense=True)
    assert len(mha_viz.generate(tiny_gpt2, "The cat sat", 6, dense=False, stop_at_eos=False).steps) == 6
    budget = 4 * L * H * n  # not even one row a head for each new token
    capture_budget_of(monkeypatch, budget)
    with pytest.raises(mha_viz.capture.GenerationError, match=r"ask for at most (\d+) new tokens") as refused:
        mha_viz.generate(tiny_gpt2, "The cat sat", 6, dense=False)
    fits, prompt = int(refused.value.args[0].split("at most ")[1].split()[0]), n - 6
    # the number offered is the largest that fits: its rows within the budget, one more token's past it
    assert 1 <= fits < 6
    assert recorded_bytes(L, H, prompt, fits) <= budget < recorded_bytes(L, H, prompt, fits + 1)
    assert len(mha_viz.generate(tiny_gpt2, "The cat sat", fits, dense=False, stop_at_eos=False).steps) == fits
