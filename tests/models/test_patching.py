"""Activation patching per head (`docs/attribution.md`, section 3): the batched computation equals one
forward per head, patching with the corrupted run's own z changes nothing, an induction head
restores the toy model's repeat, and what cannot be patched gets a message before anything runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import attribution
from mha_viz_models.loading.outputs_run import head_outputs_run

CLEAN = "q w e r t y u i o q w e r t y u i"
CORRUPTED = "a s d f g h j k l q w e r t y u i"  # the first half changed: no earlier occurrence to copy


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def test_batched_patching_equals_one_forward_per_head(toy):
    res = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z")
    ids_x = torch.tensor([mha_viz.tokenize(toy, CORRUPTED).ids])
    cap_c = toy.capture(torch.tensor([mha_viz.tokenize(toy, CLEAN).ids]))
    a, b = res.answer, res.wrong
    for layer in range(toy.num_layers):
        for head in range(toy.num_heads):  # one forward, one head patched: the plain way
            m = attribution.patched_metric(toy, ids_x, layer, [head], cap_c.head_outputs[layer][0], a, b, None)
            want = (float(m[0]) - res.m_corrupted) / (res.m_clean - res.m_corrupted)
            assert res.restored[layer, head] == pytest.approx(want, abs=1e-5)


def test_patching_with_the_corrupted_runs_own_z_changes_nothing(toy):
    res = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z")
    ids_x = torch.tensor([mha_viz.tokenize(toy, CORRUPTED).ids])
    cap_x = toy.capture(ids_x)
    for layer in range(toy.num_layers):
        m = attribution.patched_metric(toy, ids_x, layer, list(range(toy.num_heads)), cap_x.head_outputs[layer][0],
                                        res.answer, res.wrong, None)
        np.testing.assert_allclose(m.numpy(), res.m_corrupted, atol=1e-5)


def test_an_induction_head_restores_the_repeat(toy):
    res = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z")
    assert res.m_clean > res.m_corrupted  # the clean text repeats: "o" follows "i" again
    run = mha_viz.analyze(toy, CLEAN)
    induction = mha_viz.metrics.head_table(run).query("layer == 1").set_index("head")["induction_score"]
    assert int(np.argmax(res.restored[1])) == int(induction.idxmax())
    noised = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", mode="noise")
    assert noised.damage.shape == (2, toy.num_heads)
    at_last = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", position=-1)
    assert at_last.position == len(mha_viz.tokenize(toy, CLEAN).ids) - 1


def test_what_cannot_be_patched_gets_a_message(toy, bert_dir):
    with pytest.raises(mha_viz.InputError, match="same number of tokens"):
        attribution.patch_heads(toy, CLEAN, "q w e")
    with pytest.raises(mha_viz.InputError, match="same logit difference"):
        attribution.patch_heads(toy, CLEAN, CLEAN, answer="o", wrong="z")
    with pytest.raises(mha_viz.InputError, match="not a decoder"):
        attribution.patch_heads(mha_viz.load_model(bert_dir, device="cpu"), "a b", "c d")


def test_the_answer_and_the_wrong_token_must_differ(toy):
    with pytest.raises(mha_viz.InputError, match="both 'o'"):
        attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="o")


def test_progress_follows_the_layers_and_can_stop_the_work(toy):
    seen = []
    attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", progress=lambda f, m: seen.append((f, m)))
    L = toy.num_layers  # the one (fraction, message) protocol
    assert seen == [((layer + 1) / L, f"Patched layer {layer + 1} of {L}") for layer in range(L)]

    class Stop(Exception):
        pass

    def stop(fraction, message):
        raise Stop
    with pytest.raises(Stop):
        attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", progress=stop)


@pytest.mark.parametrize("mode", ["denoise", "noise"])
def test_patching_by_position_equals_one_position_at_a_time(toy, mode):
    """The batched positions of one head against patch_heads at each position alone."""
    layer, head = 1, 2
    by_pos = attribution.patch_positions(toy, CLEAN, CORRUPTED, layer, head, answer="o", wrong="z", mode=mode)
    n = len(mha_viz.tokenize(toy, CLEAN).ids)
    assert by_pos.values.shape == (n,)
    for i in range(n):
        one = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", mode=mode, position=i)
        assert by_pos.values[i] == pytest.approx(float(one.values[layer, head]), abs=1e-5)
    whole = attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", mode=mode)
    assert abs(whole.values[layer, head]) > 1e-3  # a head that moves the metric at all …
    assert np.abs(by_pos.values).max() > 1e-3  # … moves it at some position


def test_gpt2_family_batched_patching_equals_one_forward_per_head(gpt2_dir):
    """GPT-2's fused c_attn and Conv1D c_proj: the heads' slices of c_proj's input are patched."""
    model = mha_viz.load_model(gpt2_dir, device="cpu")
    clean, corrupted = "one two three four five", "one two four three five"
    ids_c, ids_x = (torch.tensor([mha_viz.tokenize(model, t).ids]) for t in (clean, corrupted))
    assert ids_c.shape == ids_x.shape
    res = attribution.patch_heads(model, clean, corrupted)
    cap_c = head_outputs_run(model, ids_c)  # the z patching reads (fused attention)
    for layer in range(model.num_layers):
        for head in range(model.num_heads):
            m = attribution.patched_metric(model, ids_x, layer, [head], cap_c.head_outputs[layer][0],
                                            res.answer, res.wrong, None)
            want = (float(m[0]) - res.m_corrupted) / (res.m_clean - res.m_corrupted)
            assert res.restored[layer, head] == pytest.approx(want, abs=1e-5)


def test_texts_over_the_token_cap_are_refused_not_cut(toy):
    """Cut to the cap, both texts would patch the wrong last token: refused, with the counts."""
    with pytest.raises(mha_viz.InputError, match="more than the 6 allowed"):
        attribution.patch_heads(toy, CLEAN, CORRUPTED, answer="o", wrong="z", max_tokens=6)
