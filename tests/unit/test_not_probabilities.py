"""The load's check that what a model returns as attention is softmax rows over its tokens
(`verify.not_probabilities`): arrays planted by hand for each way Hugging Face's models were found to differ
(Reformer's chunks, YOSO's headless array, SqueezeBERT's negative weights, Longformer's empty rows, CPM-Ant's rows
masked after the softmax), against rows a softmax makes, a learned sink's share and a half precision's rounding."""

from __future__ import annotations

import torch

from mha_viz_models.reading.verify import not_probabilities

N = 6


def _softmax(heads: int = 2) -> torch.Tensor:
    scores = torch.randn(1, heads, N, N, generator=torch.Generator().manual_seed(0))
    return scores.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf")).softmax(-1)


def test_softmax_rows_and_a_sinks_share_pass_and_wider_rows_do_not():
    """Rows wider than the tokens (a compressed layer's entries) reach the check only split off; unsplit, they are
    refused."""
    rows = _softmax()
    assert not_probabilities([rows, rows], N) is None
    assert not_probabilities([rows * 0.7], N) is None  # a learned sink took 30 % of every row
    assert "array of shape (1, 2, 6, 8)" in not_probabilities([torch.cat([rows * 0.5, rows[..., :2] * 0.2], -1)], N)


def test_other_shapes_negative_weights_and_rows_past_one_are_refused():
    rows = _softmax()
    assert "array of shape (1, 2, 3, 2, 2)" in not_probabilities([torch.rand(1, 2, 3, 2, 2)], N)  # chunks
    assert "array of shape (1, 6, 6)" in not_probabilities([rows[:, 0]], N)  # no heads
    negative = rows.clone()
    negative[0, 0, 3, 0] = -0.3
    assert "not probabilities" in not_probabilities([rows, negative], N)
    assert "in layer 1" in not_probabilities([rows, negative], N)
    assert "not probabilities" in not_probabilities([rows * 1.01], N)  # float32: a row past 1 is no rounding
    assert not_probabilities([rows * 1.01], N, torch.bfloat16) is None  # half precision: it is


def test_empty_rows_are_refused_unless_a_sink_may_take_them():
    rows = _softmax()
    masked = rows.clone()
    masked[0, 1, 2] = 0.0  # one query given no token any weight
    assert "1 of 12 rows" in not_probabilities([masked], N)
    assert not_probabilities([masked], N, torch.float16, sinks=True) is None  # GPT-OSS's sink, all of a row
    assert "12 of 12 rows" in not_probabilities([torch.zeros(1, 2, N, N)], N, sinks=True)  # nothing at all
