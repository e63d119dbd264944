"""The teaching page's matrix figure: every row and column of a matrix is its own category, also
when tokens repeat ("the cat sat on the mat": two columns "the")."""

from __future__ import annotations

import numpy as np

from mha_viz import teach_figures


def test_repeated_tokens_keep_their_own_rows_and_columns():
    tok = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    fig = teach_figures.matrix(np.random.default_rng(0).random((8, 8)), tok, title="A", columns=tok,
                               probabilities=True)
    heat = fig.data[0]
    assert len(set(heat.x)) == len(set(heat.y)) == 8 and list(heat.x) == list(heat.y)
    assert [x.split("\u200b")[0] for x in heat.x] == tok  # shown as the tokens
