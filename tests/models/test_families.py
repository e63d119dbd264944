"""The family registry on real (random-init) BERT, GPT-2 and Llama models: each layer's
attention is recognised with the right tag, `output_projection` is the layer that applies W_O,
and `LoadedModel.layer_adapter` is our MHA over the same weights."""

from __future__ import annotations

import pytest
import torch

import mha_viz_models
from mha_viz_models.families.builtin import FAMILIES, family_of, output_projection

W_O = {"bert": lambda m: m.output.dense, "gpt2": lambda m: m.c_proj, "llama": lambda m: m.o_proj}


@pytest.mark.parametrize("fixture, tag", [("bert_dir", "bert"), ("gpt2_dir", "gpt2"), ("llama_dir", "llama")])
def test_each_family_is_recognised_with_its_output_projection(request, fixture, tag):
    folder = str(request.getfixturevalue(fixture))
    hf = mha_viz_models.load(folder, device="cpu")
    assert [fam for _, fam in hf.attention_modules] == [tag] * hf.num_layers
    for layer, (module, fam) in enumerate(hf.attention_modules):
        assert family_of(module) == tag
        proj = output_projection(module, fam)
        assert proj is FAMILIES[tag].output_projection(module) is W_O[tag](module)
        adapter = hf.layer_adapter(layer)
        assert adapter is hf.layer_adapter(layer)  # built once
        if tag == "gpt2":  # a Conv1D (x @ W): ours is the transposed copy
            assert torch.equal(adapter.mha.w_o.weight, proj.weight.T)
        else:
            assert adapter.mha.w_o is proj  # the same parameters
    # the output projection's input is the heads' outputs z side by side
    ids = torch.tensor([[3, 4, 5, 6]])
    cap = hf.capture(ids)
    seen = []
    hook = output_projection(*hf.attention_modules[0]).register_forward_pre_hook(
        lambda _m, args: seen.append(args[0].detach()))
    try:
        with torch.no_grad():
            hf.hf_model(input_ids=ids)
    finally:
        hook.remove()
    z = cap.head_outputs[0]  # (1, H, n, d_v)
    torch.testing.assert_close(seen[0], z.transpose(1, 2).reshape(1, 4, -1), atol=0, rtol=0)

    ours = mha_viz_models.load(folder, device="cpu", local_attention=True)
    assert [fam for _, fam in ours.attention_modules] == ["ours"] * ours.num_layers
    for layer, (module, fam) in enumerate(ours.attention_modules):
        assert family_of(module) == "ours" and module is ours.adapters[layer] is ours.layer_adapter(layer)
        assert output_projection(module, fam) is module.mha.w_o


def test_random_twin_derives_its_adapters_and_lock_afresh(gpt2_dir):
    hf = mha_viz_models.load(str(gpt2_dir), device="cpu")
    hf.head_weights()
    twin = mha_viz_models.random_twin(hf)
    assert twin.lock is not hf.lock
    assert twin.layer_adapter(0) is not hf.layer_adapter(0)
    assert not torch.equal(twin.head_weights()["W_Q"], hf.head_weights()["W_Q"])
