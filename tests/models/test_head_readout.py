"""Every per-head feature with Hugging Face's own attention, for the architectures whose attention
our MHA does not (all) compute: DeBERTa-v2, OLMo 2, SmolLM3, GPT-OSS, Cohere 2, DeepSeek-V3 (MLA)
and Llama 4 (`architectures_2026`). The heads' outputs z are read at the input of the layer that
applies W_O, the values off the model's own value path. Each is checked against a computation
made here from the model's own modules:
- z through W_O (and its bias) is what the model's W_O layer wrote;
- each key's value norm ‖v_j W_O[h]‖ equals one made from values projected here (v_proj, DeBERTa's
  value_proj, DeepSeek's latent through kv_b_proj);
- patching: a layer patched with the corrupted run's own z changes nothing, and the batched grid
  equals one forward per head; switching heads off changes only what it should.
Direct logit attribution on these decoders is checked by removal in `test_attribution_removal.py`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import attribution
from mha_viz.views import qk, teaching
from mha_viz_models.families.builtin import output_projection
from tests.helpers import hidden_states
from tests.models.architectures_2026 import BUILDERS, build

TEXT = "The cat sat on the mat. The dog sat on the log."
DECODERS = [name for name in BUILDERS if name != "deberta"]


@pytest.fixture(scope="module", params=list(BUILDERS))
def loaded(request, tmp_path_factory):
    name = request.param
    return name, mha_viz.load_model(build(name, tmp_path_factory.mktemp(name)), device="cpu")


def _ids(model) -> torch.Tensor:
    return torch.tensor([mha_viz.tokenize(model, TEXT).ids])


def _layer_inputs(model, ids):
    """Each attention module's input hidden states, and each W_O layer's output, from one plain forward."""
    inputs, written = [], []
    hooks = [m.register_forward_pre_hook(lambda _m, args, kwargs: inputs.append(
        (args[0] if args else kwargs["hidden_states"]).detach()), with_kwargs=True) for m, _ in model.attention_modules]
    hooks += [output_projection(m, fam).register_forward_hook(lambda _m, _i, out: written.append(out.detach()))
              for m, fam in model.attention_modules]
    try:
        with torch.no_grad():
            model.hf_model(input_ids=ids)
    finally:
        for h in hooks:
            h.remove()
    return inputs, written


def _values_by_hand(name: str, module, x: torch.Tensor) -> torch.Tensor:
    """v (n, G, d_v) of one layer, projected here from its input x (1, n, d_model)."""
    if name == "deberta":
        v = module.self.value_proj(x)[0]
        return v.view(v.shape[0], module.self.num_attention_heads, -1)
    if name in ("deepseek_v3", "deepseek_v32", "glm_moe_dsa"):  # MLA: the latent, normed, then each head's
        # [k_nope | v] block of kv_b_proj
        latent = module.kv_a_proj_with_mqa(x)[0, :, :module.kv_lora_rank]
        blocks = module.kv_b_proj(module.kv_a_layernorm(latent))
        blocks = blocks.view(blocks.shape[0], -1, module.qk_nope_head_dim + module.v_head_dim)
        return blocks[..., module.qk_nope_head_dim:]
    if name == "gemma3n":  # v_norm (no scale) over each head's values; x is then the storing layer's input
        v = module.v_proj(x)[0]
        return module.v_norm(v.view(v.shape[0], -1, module.head_dim))
    v = module.v_proj(x)[0]
    return v.view(v.shape[0], -1, module.head_dim)


def test_heads_outputs_and_values_are_read_off_the_models_own_modules(loaded):
    name, model = loaded
    assert model.has_head_outputs and model.reads_values, (name, model.unread)
    if not model.can_recompute:  # the feature our MHA lacks is named, not a Python exception
        assert model.stand_in and "Error" not in model.stand_in and "Traceback" not in model.stand_in
    ids = _ids(model)
    run = mha_viz.analyze(model, TEXT, lean=False)
    assert run.head_outputs is not None and run.value_norms is not None
    inputs, written = _layer_inputs(model, ids)
    w_o = model.head_weights()["W_O"].double()  # (L, H, d_v, d_model)
    H = model.num_heads
    for layer, (module, fam) in enumerate(model.attention_modules):
        z = torch.as_tensor(run.head_outputs[layer]).double()  # (H, n, d_v)
        proj = output_projection(module, fam)
        bias = 0 if proj.bias is None else proj.bias.double()
        torch.testing.assert_close(torch.einsum("hnd,hdm->nm", z, w_o[layer]) + bias, written[layer][0].double(),
                                   atol=1e-5, rtol=1e-5)
        if getattr(module, "is_kv_shared_layer", False):  # Gemma 3n: the values of the layer that stores them
            config = model.hf_model.config
            source = next(i for i, mode in enumerate(config.kv_sharing_modes)
                          if mode == "store" and config.layer_types[i] == config.layer_types[layer])
            module, layer_input = model.attention_modules[source][0], inputs[source]
        else:
            layer_input = inputs[layer]
        with torch.no_grad():
            v = _values_by_hand(name, module, layer_input).double()  # (n, G, d_v)
        v = v.repeat_interleave(H // v.shape[1], dim=1)  # (n, H, d_v): query head h reads KV head h // (H/G)
        norms = torch.einsum("nhd,hdm->hnm", v, w_o[layer]).norm(dim=-1)  # (H, n): ‖v_j W_O[h]‖
        np.testing.assert_allclose(run.value_norms[layer], norms.numpy(), rtol=1e-4, atol=1e-5)


CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPTED = "When Mary and John went to the store, Anna gave a drink to"


@pytest.mark.parametrize("name", DECODERS)
def test_patching_and_switching_heads_off(name, tmp_path):
    model = mha_viz.load_model(build(name, tmp_path / name), device="cpu")
    clean, corrupted = (mha_viz.tokenize(model, t).ids for t in (CLEAN, CORRUPTED))
    if len(clean) != len(corrupted):
        pytest.skip("the byte-level tokenizer splits the two names differently")
    res = attribution.patch_heads(model, CLEAN, CORRUPTED)
    assert res.restored.shape == (model.num_layers, model.num_heads) and np.isfinite(res.restored).all()
    ids_x = torch.tensor([corrupted])
    cap_c, cap_x = model.capture(torch.tensor([clean])), model.capture(ids_x)
    last = model.num_layers - 1
    same = attribution.patched_metric(model, ids_x, last, list(range(model.num_heads)), cap_x.head_outputs[last][0],
                                      res.answer, res.wrong, None)
    np.testing.assert_allclose(same.numpy(), res.m_corrupted, atol=1e-5)
    for head in (0, model.num_heads - 1):  # the batched grid is one forward per head
        m = attribution.patched_metric(model, ids_x, last, [head], cap_c.head_outputs[last][0], res.answer,
                                       res.wrong, None)
        want = (float(m[0]) - res.m_corrupted) / (res.m_clean - res.m_corrupted)
        assert res.restored[last, head] == pytest.approx(want, abs=1e-5)

    def hidden(scale=None):
        return hidden_states(model, ids_x, scale)
    on = hidden()
    scale = torch.ones(model.num_layers, model.num_heads)
    torch.testing.assert_close(hidden(scale)[-1], on[-1], atol=0, rtol=0)  # every head on: nothing changes
    scale[last] = 0  # every head of the last layer off
    off = hidden(scale)
    torch.testing.assert_close(off[last], on[last], atol=0, rtol=0)  # the layers before it are as they were
    assert (off[-1] - on[-1]).abs().max() > 1e-4


def test_the_walkthrough_and_queries_and_keys_read_the_captured_probabilities(loaded):
    """Where our MHA stands in, the teaching steps recompute each head as the model does: GPT-OSS's
    sink takes its share of every row, Llama 4's chunks and the windows hide their keys."""
    name, model = loaded
    if not model.can_recompute:
        pytest.skip(f"our MHA does not stand in for {name}: {model.stand_in}")
    run = mha_viz.analyze(model, TEXT, lean=False)
    for row, layer in enumerate(run.layer_ids):
        for head in (0, model.num_heads - 1):
            w = teaching.walkthrough(model, TEXT, layer, head)
            np.testing.assert_allclose(w.probs, run.attentions[row, head, :w.n, :w.n], atol=1e-5)
            last = w.n - 1
            np.testing.assert_allclose(qk.neuron(w, last, 0).row_probs, w.probs[last], atol=1e-5)
    if name == "gpt_oss":
        assert w.sink is not None and w.probs.sum(-1).max() < 1 - 1e-3


def test_a_window_of_the_walkthrough_reads_the_captured_probabilities(loaded):
    """A window in the middle of the text (6 tokens from the 5th): its probabilities are the captured ones, the
    keys outside it take the rest of each row (less GPT-OSS's sink), the neuron view's row counts them, z reads
    every key, and X is the attention module's own input."""
    name, model = loaded
    if not model.can_recompute:
        pytest.skip(f"our MHA does not stand in for {name}: {model.stand_in}")
    run = mha_viz.analyze(model, TEXT, lean=False)
    inputs, _ = _layer_inputs(model, _ids(model))
    rec = teaching.record(model, TEXT)
    start, stop = 5, 11
    prefix = teaching.record(model, TEXT, stop)
    for row, layer in enumerate(run.layer_ids):
        head = (row * 3) % model.num_heads
        w = teaching.walkthrough(model, TEXT, layer, head, recording=rec, start=start, size=stop - start)
        folded = start if model.is_causal else run.n - (stop - start)  # a decoder's later keys are always hidden
        assert (w.start, w.n, w.total, w.outside) == (start, stop - start, run.n, folded)
        rows = run.attentions[row, head, start:stop]
        np.testing.assert_allclose(w.probs, rows[:, start:stop], atol=1e-5)
        np.testing.assert_allclose(w.outside_probs, rows.sum(-1) - rows[:, start:stop].sum(-1), atol=1e-5)
        np.testing.assert_allclose(qk.neuron(w, 3, 1).row_probs, w.probs[3], atol=1e-5)
        np.testing.assert_allclose(w.z, run.head_outputs[row, head, start:stop], atol=1e-4)
        torch.testing.assert_close(torch.from_numpy(w.X), inputs[model.layer_ids.index(layer)][0, start:stop].float())
        if model.is_causal:  # a decoder's window needs the text up to its end only (what the app records)
            cut = teaching.walkthrough(model, TEXT, layer, head, recording=prefix, start=start, size=stop - start)
            for a, b in ((cut.probs, w.probs), (cut.outside_probs, w.outside_probs), (cut.z, w.z), (cut.X, w.X)):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)  # float32 products of another length
