"""`mha_viz_models.families.builtin.FAMILIES`: adding an attention family is one adapter class and one `Family`."""

from __future__ import annotations

from contextlib import contextmanager
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from mha_viz_models import MultiHeadAttention
from mha_viz_models.families.adapters import Adapter
from mha_viz_models.families.builtin import (
    FAMILIES,
    Family,
    family_of,
    find_attention,
    install_local_attention,
    output_projection,
    register,
)


class PlainAttention(nn.Module):
    """A made-up attention layer: wq, wk, wv, wo and nothing else the known families look for."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):  # one head
        return self.wo(nn.functional.scaled_dot_product_attention(
            self.wq(x)[:, None], self.wk(x)[:, None], self.wv(x)[:, None])[:, 0])


class PlainFamilyAttention(Adapter):
    def __init__(self, original: PlainAttention) -> None:
        super().__init__()
        self.mha = MultiHeadAttention.from_linears(
            original.wq, original.wk, original.wv, original.wo, num_heads=1)

    def forward(self, x):
        return self.mha(x, need_weights=self.need_weights)[0]


class TwoLayers(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.config = SimpleNamespace(model_type="plain", num_attention_heads=1)
        self.layers = nn.ModuleList(PlainAttention(d) for _ in range(2))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


@pytest.fixture
def plain_family():
    fam = register(Family(
        "plain", recognise=lambda m: isinstance(m, PlainAttention),
        build=lambda m, _config, _causal: PlainFamilyAttention(m), output_projection=lambda m: m.wo,
    ))
    try:
        yield fam
    finally:
        del FAMILIES["plain"]


def test_a_registered_family_is_found_and_replaced(plain_family):
    model = TwoLayers()
    assert family_of(PlainAttention(8)) == "plain"
    found = find_attention(model)
    assert [(attr, fam) for _, attr, _, fam in found] == [("0", "plain"), ("1", "plain")]
    assert output_projection(found[0][2], "plain") is model.layers[0].wo
    x = torch.randn(2, 3, 8)
    with torch.no_grad():
        before = model(x)
        adapters = install_local_attention(model, causal=False)
        after = model(x)
    assert [type(a) for a in adapters] == [PlainFamilyAttention] * 2 and list(model.layers) == adapters
    assert family_of(adapters[0]) == "ours" and output_projection(adapters[0], "ours") is adapters[0].mha.w_o
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)


def test_unknown_layers_are_not_recognised():
    assert "plain" not in FAMILIES
    assert family_of(PlainAttention(8)) is None and family_of(nn.Linear(2, 2)) is None


# --- precedence: when several families recognise a module, the first registered wins -----------
@contextmanager
def registered(*families: Family):
    """The families added to FAMILIES (after the built-in ones) while the block runs."""
    try:
        for fam in families:
            register(fam)
        yield
    finally:
        for fam in families:
            FAMILIES.pop(fam.tag, None)


def _plain(tag: str) -> Family:
    return Family(tag, recognise=lambda m: isinstance(m, PlainAttention),
                  build=lambda m, _config, _causal: PlainFamilyAttention(m), output_projection=lambda m: m.wo)


def _anything(tag: str) -> Family:
    return Family(tag, recognise=lambda m: True, build=lambda m, _config, _causal: m,
                  output_projection=lambda m: m)


class LlamaLike(nn.Module):
    """What the "llama" family looks for: q/k/v/o_proj, scaling and layer_idx."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d) for _ in range(4))
        self.scaling, self.layer_idx = d ** -0.5, 0


class OursLookingLikeLlama(Adapter):
    """An adapter that keeps the attributes of the Llama layer it replaces."""

    def __init__(self, original: LlamaLike) -> None:
        super().__init__()
        self.mha = MultiHeadAttention.from_linears(
            original.q_proj, original.k_proj, original.v_proj, original.o_proj, num_heads=2)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (
            original.q_proj, original.k_proj, original.v_proj, original.o_proj)
        self.scaling, self.layer_idx = original.scaling, original.layer_idx


class Wrapping(Adapter):
    """An adapter that holds the layer it replaces as a submodule."""

    def __init__(self, original: LlamaLike) -> None:
        super().__init__()
        self.mha = MultiHeadAttention.from_linears(
            original.q_proj, original.k_proj, original.v_proj, original.o_proj, num_heads=2)
        self.original = original


def test_of_two_families_that_recognise_a_module_the_first_registered_wins():
    model = TwoLayers()
    with registered(_plain("plain-a"), _plain("plain-b")):
        assert family_of(model.layers[0]) == "plain-a"
        assert [fam for *_, fam in find_attention(model)] == ["plain-a", "plain-a"]
        del FAMILIES["plain-a"]  # the other one takes over
        assert family_of(model.layers[0]) == "plain-b"
    with registered(_plain("plain-b"), _plain("plain-a")):  # the other order: the other winner
        assert family_of(model.layers[0]) == "plain-b"


def test_a_family_registered_later_does_not_take_what_a_built_in_one_recognises():
    llama = LlamaLike()
    ours = OursLookingLikeLlama(llama)
    assert FAMILIES["llama"].recognise(ours) and FAMILIES["ours"].recognise(ours)  # two candidates...
    with registered(_anything("anything")):
        assert family_of(llama) == "llama"
        assert family_of(ours) == "ours"  # ...and ours wins: an adapter installed before is not replaced again
        assert family_of(PlainAttention(8)) == "anything"  # what no built-in family knows


def test_a_module_inside_an_attention_already_found_is_not_found_again():
    model = TwoLayers()
    model.layers = nn.ModuleList(Wrapping(LlamaLike()) for _ in range(2))
    assert family_of(model.layers[0].original) == "llama"  # a family knows the inner module too...
    found = find_attention(model)
    assert [(attr, fam) for _, attr, _, fam in found] == [("0", "ours"), ("1", "ours")]  # ...the outer one wins
