"""The corpus statistics count their documents by length (`CorpusStats.lengths`): each document's
token count as `analyze` reads it alone (after `max_tokens`), the same whatever the batches and
their merge order, kept by save / load, and a saved count that disagrees with the documents is
refused."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import corpus

LETTERS = ["a b c d a b c d", "q w e r t y q w e r t y", "m", "z y x", "h e l l o h e l l o",
           "a b c d e f g h i j k l m n o p q r s t u v w x y z a b c", "k k k k", "b a"]
MAX_TOKENS = 24


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def test_documents_are_counted_by_their_own_length(toy, tmp_path):
    want = np.bincount([mha_viz.analyze(toy, t, max_tokens=MAX_TOKENS).n for t in LETTERS])
    assert want.size - 1 == MAX_TOKENS  # the long one is cut: the count is of what was read
    stats = corpus.head_statistics(toy, LETTERS, batch_size=3, max_tokens=MAX_TOKENS, importance=False)
    np.testing.assert_array_equal(stats.lengths, want)
    a, b = (corpus.batch_partial(toy, LETTERS[i:j], max_tokens=MAX_TOKENS, importance=False)
            for i, j in ((0, 5), (5, 8)))
    np.testing.assert_array_equal(b.merge(a).finish().lengths, want)  # padded to the longer, in any order
    back = corpus.CorpusStats.load(stats.save(tmp_path / "s"))
    np.testing.assert_array_equal(back.lengths, want)
    assert back.lengths.sum() == back.n_docs == len(LETTERS)


def test_a_saved_length_count_that_disagrees_is_refused(toy, tmp_path):
    stats = corpus.head_statistics(toy, LETTERS[:4], batch_size=4, max_tokens=MAX_TOKENS, importance=False)
    stats.lengths = stats.lengths + 1  # more documents than the statistics hold
    folder = stats.save(tmp_path / "s")
    with pytest.raises(ValueError, match="document lengths"):
        corpus.CorpusStats.load(folder)
