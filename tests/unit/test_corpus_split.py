"""The corpus' held-out split (`mha_viz.corpus.split`): every tenth document, at most 64, none under 20 documents."""

from __future__ import annotations

from mha_viz.corpus import split


def test_every_tenth_document_is_held_out_and_never_in_the_statistics():
    train, held = split.split([f"doc {i}" for i in range(300)])
    assert len(held) == 30 and len(train) == 270 and not set(train) & set(held)
    assert held[:3] == ["doc 0", "doc 10", "doc 20"]


def test_at_most_64_held_out_and_none_for_a_small_corpus():
    assert len(split.split([f"d{i}" for i in range(5000)])[1]) == split.HOLD_MAX == 64
    train, held = split.split([f"d{i}" for i in range(19)])
    assert held == [] and len(train) == 19
