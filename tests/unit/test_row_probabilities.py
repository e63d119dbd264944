"""A long text's queries a block at a time (`MultiHeadAttention.row_probabilities`, the keys cut to
`visibility.visible_span`) give the rows of the whole matrix that `attend` computes, for the causal
mask, sliding windows (a decoder's and an encoder's), chunks and sinks; `hidden_keys` with positions
named is the same mask as the whole one's rows and columns."""

from __future__ import annotations

import pytest
import torch

from mha_viz_models.attention.config import Extras, Shape, Visibility
from mha_viz_models.attention.mha import MultiHeadAttention
from mha_viz_models.attention.visibility import hidden_columns, hidden_keys, visible_span

N = 23


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window,chunk", [(None, None), (4, None), (None, 5), (3, 6), (7, 4)])
def test_hidden_columns_from_the_first_and_last_query_are_the_whole_blocks(causal, window, chunk):
    """Every block of queries against every span of keys, at every start: the columns that hold a key hidden from
    some query (read from the block's whole mask) are the range `hidden_columns` finds from two rows."""
    for first in range(N):
        for stop in range(first + 1, N + 1):
            for k0 in range(0, N, 3):
                for k1 in (k0 + 1, min(N, k0 + 5), N):
                    mask = hidden_keys(stop - first, k1 - k0, causal=causal, window=window, chunk=chunk,
                                       first=first, key_start=k0)
                    found = hidden_columns(stop - first, k1 - k0, causal=causal, window=window, chunk=chunk,
                                           first=first, key_start=k0)
                    columns = [] if mask is None else torch.nonzero(mask.any(0)).flatten().tolist()
                    assert found == ((columns[0], columns[-1] + 1) if columns else None), (first, stop, k0, k1)


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window,chunk", [(None, None), (4, None), (None, 5), (3, 6)])
def test_hidden_keys_at_named_positions_are_the_whole_masks_block(causal, window, chunk):
    whole = hidden_keys(N, N, causal=causal, window=window, chunk=chunk)
    whole = torch.zeros(N, N, dtype=torch.bool) if whole is None else whole
    for first, stop in ((0, 4), (7, 15), (20, 23)):
        k0, k1 = visible_span(first, stop, N, causal=causal, window=window, chunk=chunk)
        part = hidden_keys(stop - first, k1 - k0, causal=causal, window=window, chunk=chunk, first=first,
                           key_start=k0)
        part = torch.zeros(stop - first, k1 - k0, dtype=torch.bool) if part is None else part
        assert torch.equal(part, whole[first:stop, k0:k1])
        # every key outside the span is hidden from every query of the block
        assert whole[first:stop, :k0].all() and whole[first:stop, k1:].all()


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kind", ["plain", "window", "chunk", "sinks"])
def test_blocks_of_rows_equal_the_whole_matrix(causal, kind):
    torch.manual_seed(3)
    visibility = Visibility(window=4) if kind == "window" else Visibility(chunk=6) if kind == "chunk" else None
    extras = Extras(sinks=torch.randn(4)) if kind == "sinks" else None
    mha = MultiHeadAttention(Shape(32, 4, num_kv_heads=2), visibility=visibility, extras=extras).eval()
    x = torch.randn(1, N, 32)
    with torch.no_grad():
        q, k, v = mha.project_self(x)
        _, whole = mha.attend(q, k, v, is_causal=causal)
        for first in range(0, N, 5):
            stop = min(first + 5, N)
            k0, k1 = visible_span(first, stop, N, causal=causal, window=mha.window, chunk=mha.chunk)
            rows = mha.row_probabilities(q[:, :, first:stop], k[:, :, k0:k1], first=first, key_start=k0,
                                         is_causal=causal)
            torch.testing.assert_close(rows, whole[:, :, first:stop, k0:k1], atol=1e-6, rtol=0)
            assert float(whole[:, :, first:stop, :k0].abs().sum() + whole[:, :, first:stop, k1:].abs().sum()) == 0
            one = mha.row_probabilities(q[:, [2], first:stop], k[:, [1], k0:k1], first=first, key_start=k0,
                                        is_causal=causal, heads=[2])  # one head (KV head 1): its own sink
            torch.testing.assert_close(one[:, 0], whole[:, 2, first:stop, k0:k1], atol=1e-6, rtol=0)
