"""A long scan hands each layer the attention output it computed from its own blocks, and the model uses it instead
of running its attention again (`mha_viz_models.reading.given`). Against Hugging Face's own eager forward: handed
the heads' outputs z its eager attention wrote (read at W_O's input), the model's last hidden state is the eager
one's, with PyTorch's fused attention never called; and the outputs a scan hands are those z, within float32
rounding, for GQA, sliding windows, chunks, sink logits, q/k norms and a hybrid (Jamba)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz_models.reading import given
from tests.models import architectures_2026

TEXT = ("The keys to the old wooden cabinet are missing again, said Mary. John looked in the hall. "
        "The keys were in the hall, said John. ") * 2

FAMILIES = ["minilm", "smollm2", "olmo2", "smollm3", "gpt_oss", "cohere2", "llama4", "jamba"]  # Qwen3-Next: stand-in


@pytest.fixture(scope="module")
def family(request, tmp_path_factory):
    name = request.param
    if name in ("minilm", "smollm2", "toy-induction"):
        return mha_viz.load_model(name, device="cpu")
    return mha_viz.load_model(architectures_2026.build(name, tmp_path_factory.mktemp(name)), device="cpu")


@pytest.fixture
def fused_calls(monkeypatch):
    """How many times PyTorch's fused attention runs."""
    calls = []
    real = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    return calls


def _eager(model, ids: torch.Tensor):
    """The eager forward's last hidden state and each attention layer's z (1, H, n, d_v)."""
    capture = model.capture(ids)
    return capture.hidden.float(), [z.float() for z in capture.head_outputs]


@pytest.mark.model
@pytest.mark.parametrize("family", FAMILIES, indirect=True)
def test_handed_outputs_replace_the_models_attention(family, fused_calls):
    model = family
    assert model.takes_outputs
    ids = torch.tensor([mha_viz.tokenize(model, TEXT, 96).ids])
    hidden, zs = _eager(model, ids)
    handed = []

    def hand(layer: int, _inp) -> torch.Tensor:
        handed.append(layer)
        return zs[layer]
    fused_calls.clear()
    lean = model.capture(ids, lean=True, head_outputs=False, on_input=hand, gives_outputs=True)
    assert handed == list(range(model.num_layers)) and not fused_calls
    np.testing.assert_allclose(lean.hidden.float().numpy(), hidden.numpy(), atol=1e-5, rtol=1e-5)

    def wrong(layer: int, _inp) -> torch.Tensor:  # another layer's output: the hidden state moves
        return zs[(layer + 1) % model.num_layers]
    moved = model.capture(ids, lean=True, head_outputs=False, on_input=wrong, gives_outputs=True).hidden.float()
    assert (moved - hidden).abs().max() > 1e-3


@pytest.mark.model
@pytest.mark.parametrize("family", FAMILIES, indirect=True)
def test_a_scan_hands_each_layer_its_heads_outputs(family, fused_calls, monkeypatch):
    model = family
    toks = mha_viz.tokenize(model, TEXT, 96)
    _hidden, zs = _eager(model, torch.tensor([toks.ids]))
    handed: list[torch.Tensor] = []
    real = given.hand

    def kept(maker) -> None:  # a scan hands a maker: the output it makes from the module's q, k, v is kept
        def making(query, key, value, kwargs):
            made = maker(query, key, value, kwargs)
            handed.append(made.clone())
            return made
        real(making)
    monkeypatch.setattr(given, "hand", kept)
    fused_calls.clear()
    # keep_own=False: the read-out of the model's own outputs probes the model once (fused), after the forward
    scan = mha_viz.scan(model, TEXT, max_tokens=96, keep_own=False)
    assert scan.n == toks.n and not fused_calls and len(handed) == model.num_layers
    for layer, (ours, theirs) in enumerate(zip(handed, zs)):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), atol=2e-5, rtol=1e-4, err_msg=f"layer {layer}")


@pytest.mark.model
def test_a_model_that_computes_its_own_attention_refuses_given_outputs():
    toy = mha_viz.load_model("toy-induction", device="cpu")  # our MHA installed: no interface to hand to
    assert not toy.takes_outputs
    with pytest.raises(ValueError, match="given attention outputs"):
        toy.capture(torch.tensor([[1, 2, 3]]), lean=True, on_input=lambda _l, _i: None, gives_outputs=True)
