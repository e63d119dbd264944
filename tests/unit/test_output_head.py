"""`mha_viz_models.output_head`: the one way the code asks a model for its LM head."""

from __future__ import annotations

from torch import nn

from mha_viz_models.output_head import output_head


class _WithHead(nn.Module):
    def __init__(self, head: nn.Module | None) -> None:
        super().__init__()
        self.head = head

    def get_output_embeddings(self) -> nn.Module | None:
        return self.head


def test_the_head_where_there_is_one_and_none_where_there_is_not():
    linear = nn.Linear(4, 10, bias=False)
    assert output_head(_WithHead(linear)) is linear
    assert output_head(_WithHead(None)) is None  # an embedding model: the method, no head
    assert output_head(nn.Linear(4, 4)) is None  # not a Hugging Face model: no such method
    assert output_head(None) is None
