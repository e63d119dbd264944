"""`mha_viz_models.families.FAMILIES`: adding an attention family is one adapter class and one `Family`."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch import nn

from mha_viz_models import MultiHeadAttention
from mha_viz_models.adapters import Adapter
from mha_viz_models.families import (
    FAMILIES, Family, family_of, find_attention, install_local_attention, output_projection, register,
)


def test_tags_in_order_of_precedence():
    assert list(FAMILIES)[:6] == ["ours", "bert", "gpt2", "llama", "neox", "phi3"]
    assert all(tag == fam.tag for tag, fam in FAMILIES.items())


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
