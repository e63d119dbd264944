"""A scan's spill read a few rows at a time (`QKSpill.rows`): the queries of the rows asked and the keys they see,
of the heads asked (each query head with its own KV head), equal to the same slices of the tensors put in, whether
the layer stayed in memory or went to the file, where only those bytes are read."""

from __future__ import annotations

import os

import pytest
import torch

from mha_viz.scan.spill import QKSpill

H, G, N, D = 6, 2, 20, 4  # 6 query heads on 2 KV heads: heads 0-2 read KV head 0, heads 3-5 KV head 1


@pytest.fixture(params=["file", "kept"])
def spill(request):
    torch.manual_seed(0)
    q, k = torch.randn(1, H, N, D), torch.randn(1, G, N, D)
    made = QKSpill(keep_bytes=0 if request.param == "file" else 1 << 30)
    made.put(3, q, k, torch.randn(1, G, N, D))
    assert (3 in made.kept) == (request.param == "kept")
    return made, q, k


@pytest.mark.parametrize("heads", [None, [5, 0, 3], [1]])
def test_the_rows_read_are_the_slices_put_in(spill, heads):
    made, q, k = spill
    got_q, got_k = made.rows(3, "cpu", heads, (7, 12), 12)
    want_q = q[:, :, 7:12] if heads is None else q[:, heads, 7:12]
    want_k = k[:, :, :12] if heads is None else k[:, [h // (H // G) for h in heads], :12]
    torch.testing.assert_close(got_q, want_q, rtol=0, atol=0)
    torch.testing.assert_close(got_k, want_k, rtol=0, atol=0)
    full_q, full_k = made.get(3, "cpu")  # the whole layer, as before
    torch.testing.assert_close(full_q, q, rtol=0, atol=0)
    torch.testing.assert_close(full_k, k, rtol=0, atol=0)


def test_only_the_rows_asked_are_read_from_the_file(monkeypatch):
    made = QKSpill(keep_bytes=0)
    made.put(0, torch.randn(1, H, N, D), torch.randn(1, G, N, D))
    asked: list[int] = []
    real = os.preadv

    def counting(fd, buffers, offset):
        asked.append(sum(len(b) for b in buffers))
        return real(fd, buffers, offset)
    monkeypatch.setattr(os, "preadv", counting)
    made.rows(0, "cpu", [4], (10, 11), 11)
    assert sum(asked) == 4 * D * (1 + 11)  # one query row of one head, and its KV head's first 11 keys
