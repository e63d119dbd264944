"""Each head's examples over a corpus (`mha_viz.corpus.examples`): the top documents, the histograms, the
deciles and the queries equal brute force (one `mha_viz.analyze` per document, up to the rounding of a
padded batch), merged partials equal one pass whatever the grouping, the kept patterns redraw the
head's attention, the result saves and loads back equal, and memory does not grow with the corpus."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import corpus
from mha_viz.corpus import examples as ex_mod
from mha_viz.corpus.batching import capture_runs
from tests.helpers import assert_examples_match, assert_same_examples, document_scores, encoder_rows
from tests.tolerance import assert_same_above

pytestmark = pytest.mark.model
TOKENS = 48
HEADS = [(0, 0), (2, 3), (5, 11), (3, 7)]


@pytest.fixture(scope="module")
def docs():
    return corpus.read_texts("sample")[:200]


@pytest.fixture(scope="module")
def examples(minilm, docs):
    return corpus.head_examples(minilm, docs, max_tokens=TOKENS, batch_size=16)


def encoder_score(a: np.ndarray) -> np.ndarray:
    """(L, H) the documented score of an encoder's (L, H, n, n) attention (`tests.helpers.encoder_rows`)."""
    return document_scores(encoder_rows(a))


@pytest.fixture(scope="module")
def brute(minilm, docs):
    """Each document's counted rows' scores (L, H, n), from one analyze per document."""
    return [encoder_rows(mha_viz.analyze(minilm, text, max_tokens=TOKENS).attentions) for text in docs]


def test_the_top_documents_histograms_and_deciles_are_brute_forces(examples, brute):
    """The padded batches against one text alone: scores within 1e-5 (a document within that of a bin's
    edge may fall on either side, two within twice that of each other in either order)."""
    assert_examples_match(examples, brute, 1e-5, HEADS)


def test_partials_merge_to_one_pass_in_any_grouping(minilm, docs):
    options = ex_mod.ExampleOptions()
    runs = capture_runs(minilm, docs[:40], max_tokens=TOKENS)
    one = ex_mod.ExamplesPartial(minilm.num_layers, minilm.num_heads, options)
    one.add_runs(runs, range(40))
    parts = []
    for lo, hi in ((25, 40), (0, 7), (7, 25)):  # out of order, uneven
        p = ex_mod.ExamplesPartial(minilm.num_layers, minilm.num_heads, options)
        p.add_runs(runs[lo:hi], range(lo, hi))
        parts.append(p)
    merged = parts[0].merge(parts[1]).merge(parts[2])
    other = parts[2].merge(parts[0].merge(parts[1]))
    for m in (merged, other):
        assert_same_examples(corpus.HeadExamples(m, 40), corpus.HeadExamples(one, 40))


def test_a_kept_pattern_redraws_the_heads_attention(minilm, docs, examples):
    layer, head = 2, 3
    doc, _ = examples.top(layer, head)[0]
    run = mha_viz.analyze(minilm, docs[doc], max_tokens=TOKENS)
    assert examples.tokens(doc) == run.tokens
    a = run.attentions[layer, head]
    drawn = examples.pattern(doc, layer, head)
    assert drawn.shape == a.shape
    kept = drawn > 0
    np.testing.assert_allclose(drawn[kept], a[kept], rtol=2e-3, atol=1e-4)  # float16
    assert (kept.sum(1) <= ex_mod.PATTERN_KEYS).all()
    # the kept keys are each row's PATTERN_KEYS largest of weight ≥ PATTERN_MIN, chosen in the padded batch:
    # up to keys within its 1e-5 of PATTERN_MIN, and within twice that of the last place (two weights)
    kth = np.sort(a, axis=1)[:, -min(ex_mod.PATTERN_KEYS, a.shape[1])][:, None]
    last = np.abs(a - kth) <= 2e-5
    want = (a > kth) & (a >= ex_mod.PATTERN_MIN)
    assert_same_above(kept | last, want | last, a, ex_mod.PATTERN_MIN, 1e-5, "kept keys")


def test_saved_examples_load_back_equal(minilm, docs, tmp_path):
    stats = corpus.head_statistics(minilm, docs[:30], max_tokens=TOKENS, importance=False,
                                   examples=corpus.ExampleOptions(top=5, per_decile=2))
    stats.save(tmp_path / "stats")
    back = corpus.CorpusStats.load(tmp_path / "stats")
    assert back.examples is not None and back.examples.options == stats.examples.options
    assert_same_examples(back.examples, stats.examples, atol=0)
    assert back.examples.top_tokens(1, 1) == stats.examples.top_tokens(1, 1)
    np.testing.assert_array_equal(back.examples.pattern(*[back.examples.top(1, 1)[0][0], 1, 1]),
                                  stats.examples.pattern(stats.examples.top(1, 1)[0][0], 1, 1))
    stats.examples = None  # saved again without: the examples' files go
    stats.save(tmp_path / "stats")
    assert corpus.CorpusStats.load(tmp_path / "stats").examples is None


def test_memory_is_fixed_by_the_options_not_by_the_corpus(minilm, docs):
    """What is kept after 40 and after 200 documents: the heaps and histograms are the same size, the
    patterns at most (top + 10 · per_decile) a head, the token masses bounded by the vocabulary."""
    small = corpus.head_examples(minilm, docs[:40], max_tokens=TOKENS)
    large = corpus.head_examples(minilm, docs, max_tokens=TOKENS)
    heads = minilm.num_layers * minilm.num_heads
    for ex in (small, large):
        assert len(ex.part.patterns) <= heads * (10 + 10 * 3)
        assert ex.part.key_ids.size <= minilm.tokenizer.vocab_size
        assert len(ex.part.documents) <= len({d for d, _, _ in ex.part.patterns})
        kept = set(zip(*[a.tolist() for a in ex_mod.kept_triples(ex.part)]))
        assert set(ex.part.patterns) == kept  # a pattern for every kept (document, head), and no other


def test_skipping_special_tokens_leaves_their_rows_and_columns_out(minilm, docs):
    text = docs[3]
    run = mha_viz.analyze(minilm, text, max_tokens=TOKENS)
    ex = corpus.head_examples(minilm, [text], max_tokens=TOKENS, skip="special")
    keep = ~np.asarray(run.special_mask)
    keep[0] = False
    a = run.attentions[:, :, keep][:, :, :, keep]  # then the first row and column of this go too: pad one
    padded = np.zeros((*a.shape[:2], a.shape[-1] + 1, a.shape[-1] + 1), dtype=a.dtype)
    padded[:, :, 1:, 1:] = a
    np.testing.assert_allclose(ex.part.top_score[..., 0], encoder_score(padded), atol=1e-6)
    assert not np.allclose(ex.part.top_score[..., 0], encoder_score(run.attentions), atol=1e-3)  # [SEP] counted
    with pytest.raises(ValueError, match="skip"):
        corpus.ExampleOptions(skip="none")
