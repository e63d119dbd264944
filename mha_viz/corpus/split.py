"""A corpus split for its statistics: every tenth document (at most 64) is held out of them, to test
the corpus importance order on text it never saw (`importance.pruning_curve`); corpora under 20
documents keep every document. `documents` splits a corpus once and hashes what the statistics use."""

from __future__ import annotations

from typing import NamedTuple

from mha_viz.corpus.inputs import corpus_hash

HOLD_EVERY, HOLD_MAX, HOLD_MIN_DOCS = 10, 64, 20


def split(texts: list[str]) -> tuple[list[str], list[str]]:
    """(documents for the statistics, held-out documents): every HOLD_EVERY-th held out, at most
    HOLD_MAX, none for corpora under HOLD_MIN_DOCS."""
    if len(texts) < HOLD_MIN_DOCS:
        return list(texts), []
    held = set(range(0, len(texts), HOLD_EVERY)[:HOLD_MAX])
    return [t for i, t in enumerate(texts) if i not in held], [texts[i] for i in sorted(held)]


class Documents(NamedTuple):
    """A corpus split (`split`), with the hash of the documents the statistics use."""

    count: int
    train: list[str]
    held: list[str]
    digest: str  # inputs.corpus_hash(train)


def documents(texts: list[str]) -> Documents:
    """`texts` split and hashed."""
    train, held = split(texts)
    return Documents(len(texts), train, held, corpus_hash(train))
