"""Retrieval heads' count (`tasks.retrieval.count_copies` of `copies`) on planted attention: a head whose heaviest
key is the needle's copy of each generated token copies every one, a head that looks elsewhere none, and generated
tokens that are not the needle's count for no head."""

from __future__ import annotations

import numpy as np

from mha_viz.tasks.retrieval import copies, count_copies


def test_a_planted_copier_copies_every_token_and_a_planted_looker_none():
    prompt = [9, 9, 5, 6, 7, 9, 9, 1]  # the needle 5 6 7 at positions 2 … 4
    generated = [5, 6, 3, 7]  # 3 is no token of the needle
    n = len(prompt) + len(generated)

    def rows_at(layer, row):
        t = row - (len(prompt) - 1)  # the step this row chose
        rows = np.full((3, n), 0.01)
        w = generated[t]
        rows[0, prompt.index(w) if w in prompt[2:5] else 0] = 1.0  # head 0: on the needle's w
        rows[1, 0] = 1.0  # head 1: the first token, always
        rows[2, 2 + (t + 1) % 3] = 1.0  # head 2: the needle, but the wrong token of it
        return rows
    hits = count_copies(copies(rows_at, prompt, (2, 5), generated, lambda t: len(prompt) - 1 + t, num_layers=2),
                        (2, 5), num_layers=2)
    assert hits.tolist() == [[3, 0, 0], [3, 0, 0]]  # score = 3 / 3 needle tokens: 1, 0 and 0
