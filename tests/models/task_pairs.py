"""Prompt sets built for the task tests: induction pairs over words that are one token each."""

from __future__ import annotations

import numpy as np

from mha_viz.tasks.prompt_set import Pair, PromptSet

LETTERS = "qwertyuiopasdfghjklzxcvbnm"


def letter_pairs(n: int, seed: int, words=tuple(LETTERS)) -> PromptSet:
    """Induction pairs over `words` (each one token: the toy's letters, a BPE's whole words): k words then the
    first `again` of them; corrupted: the first half changed (nothing to copy). Two lengths, so two groups."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        k = 5 + i % 2
        order = [words[j] for j in rng.permutation(len(words))]
        first, other = order[:k], order[k:2 * k]
        again = int(rng.integers(1, k))
        clean = " ".join(first + first[:again])
        corrupted = " ".join(other + first[:again])
        pairs.append(Pair(clean, corrupted, f" {first[again]}", f" {order[-1]}"))
    return PromptSet(tuple(pairs), f"letters(n={n}, seed={seed})")
