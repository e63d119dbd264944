"""Compare's need (`compare_plan.comparison`) from the two runs' sizes, never from an every-head array: on the same
tokens a block of rows at a time, whatever the length; otherwise a layer of each run at word level and, for runs
with special tokens, a copy of each without them."""

from __future__ import annotations

from types import SimpleNamespace

from mha_viz.features.compare import plan as compare_plan


def _run(n, *, model="m", special=False, words=None, layers=30, heads=9):
    """A run's sizes only: asking it for its attention fails the test."""
    return SimpleNamespace(num_layers=layers, num_heads=heads, n=n, model_name=model,
                           special_mask=[special] + [False] * (n - 1), word_ids=list(words or range(n)))


def test_runs_on_the_same_tokens_need_one_block_of_rows_at_any_length():
    for n in (20, 8192):
        assert compare_plan.comparison(_run(n), _run(n)).host == compare_plan.COMPARE_BLOCK_BYTES
    assert compare_plan.COMPARE_BLOCK_BYTES <= 2**28


def test_runs_on_other_tokens_need_a_layer_at_word_level_and_copies_without_special_tokens():
    a = _run(12, words=[0, 0, 1, 2, 2, 2, 3, 4, 5, 6, 7, 8])  # 9 words
    b = _run(10, model="other", special=True)  # 10 words, a special token
    words = 8 * 9 * (9 ** 2 + 10 ** 2)
    assert compare_plan.comparison(a, b).host == compare_plan.COMPARE_BLOCK_BYTES + words + 4 * 30 * 9 * 10 ** 2
