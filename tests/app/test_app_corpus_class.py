"""What a class sees on the Corpus and Head examples pages (issue 43): a corpus cut to its first N
documents (the statistics, their key and the caption follow the cut); "this sentence against the
corpus" says when a length difference explains the deviations, by the rule worked by hand here;
Head examples opens on the head chosen elsewhere, lists decile samples by score, and draws a long
document as a window around its query."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import corpus
from mha_viz.corpus import split
from mha_viz.corpus.inputs import corpus_hash
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.examples import controls as examples_keys
from mha_viz.features.examples import figures as example_figures
from mha_viz.metrics import METRICS
from mha_viz.ui.kit import keys
from tests.app.helpers import chart_title, charts, open_page, open_with_text, shown

pytestmark = pytest.mark.model



def _documents(at) -> list[tuple[int, float, dict]]:
    """(document, score, chart) of every document drawn, in page order."""
    out = []
    for chart in charts(at):
        if chart_title(chart).startswith("Document "):
            doc, score = chart_title(chart)[len("Document "):].split(" · ")[:2]
            out.append((int(doc), float(score.split()[1]), chart))
    return out


def _run(at, tokens: int) -> None:
    at.number_input(key=corpus_keys.CORPUS_TOKENS).set_value(tokens).run()
    at.toggle(key=corpus_keys.CORPUS_IMPORTANCE).set_value(False).run()
    at.button(key=corpus_keys.CORPUS_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])


def test_a_corpus_cut_to_its_first_documents_and_the_length_that_explains_a_sentence(fresh_cache):
    at = open_with_text("corpus", "Hi.", "minilm")
    at.number_input(key=corpus_keys.CORPUS_FIRST).set_value(30).run()
    _run(at, 16)
    train, _ = split.split(corpus.read_texts("sample")[:30])
    assert len(train) == 27
    assert at.session_state[keys.CORPUS_LAST].corpus == corpus_hash(train)  # the cut is the statistics' key
    assert "27 documents" in shown(" ".join(s.value for s in at.success))
    assert "its first 30 only" in shown(" ".join(c.value for c in at.caption))

    at.selectbox(key=corpus_keys.CORPUS_METRIC).set_value("entropy").run()
    model = mha_viz.load_model("minilm")
    lengths = sorted(mha_viz.analyze(model, t, max_tokens=16).n for t in train)  # each document as read alone
    n = mha_viz.analyze(model, "Hi.").n
    median = float(np.median(lengths))
    deviation = next(c for c in charts(at) if "this sentence − corpus mean" in chart_title(c))
    z = np.asarray(deviation["data"][0]["z"], dtype=float)
    far = np.abs(z) >= 2
    with_length = int((far & (z < 0 if n < median else z > 0)).sum())
    unusual = n < lengths[0] or n > lengths[-1] or 2 * n <= median or n >= 2 * median
    assert unusual and far.any() and 2 * with_length > far.sum()  # the rule, by hand: it holds here
    said = shown(" ".join(i.value for i in at.info))
    assert "A length difference explains these deviations" in said
    assert f"{n} tokens" in said and f"{lengths[0]}–{lengths[-1]} (median {median:g})" in said
    assert f"{with_length} of the {int(far.sum())} heads" in said and METRICS["norm_entropy"].label in said
    at.selectbox(key=corpus_keys.CORPUS_METRIC).set_value("confidence").run()  # bounded in 0..1: length says nothing
    assert "A length difference explains" not in shown(" ".join(i.value for i in at.info))


def test_head_examples_open_on_the_shared_head_with_the_deciles_by_score(fresh_cache):
    at = open_with_text("head_view", "a b c d a b c d", "toy-induction")
    at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(1)
    at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(2).run()  # chosen before any corpus ran
    open_page(at, "corpus")
    _run(at, 24)
    open_page(at, "examples")
    assert not at.exception and not at.error
    assert (at.selectbox(key=examples_keys.EXAMPLES_LAYER).value,
            at.selectbox(key=examples_keys.EXAMPLES_HEAD).value) == (1, 2)
    train, _ = split.split(corpus.read_texts("sample"))
    want = corpus.head_examples(mha_viz.load_model("toy-induction"), train, max_tokens=24)
    drawn = _documents(at)
    top = want.top(1, 2)
    assert [(d, round(s, 3)) for d, s, _ in drawn[:len(top)]] == [(d, round(s, 3)) for d, s in top]
    samples = [(d, s) for d, s, _ in drawn[len(top):]]
    by_hand = sorted(((d, s) for kept in want.deciles(1, 2) for d, s in kept), key=lambda p: (-p[1], p[0]))
    assert len(samples) > 3 and [d for d, _ in samples] == [d for d, _ in by_hand]  # the highest score first
    assert all(a >= b for (_, a), (_, b) in zip(samples, samples[1:]))


def test_a_long_document_is_drawn_as_a_window_around_its_query(fresh_cache, tmp_path):
    sample = corpus.read_texts("sample")
    texts = [" ".join(sample[i * 25:(i + 1) * 25]) for i in range(12)]  # 12 documents, each well over 256 tokens
    path = tmp_path / "long.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    at = open_with_text("corpus", "The cat sat on the mat.", "minilm")
    at.radio(key=corpus_keys.CORPUS_SOURCE).set_value("A file on this machine").run()
    at.text_input(key=corpus_keys.CORPUS_PATH).input(str(path)).run()
    _run(at, 256)
    open_page(at, "examples")
    assert not at.exception and not at.error
    layer = at.selectbox(key=examples_keys.EXAMPLES_LAYER).value
    head = at.selectbox(key=examples_keys.EXAMPLES_HEAD).value
    want = corpus.head_examples(mha_viz.load_model("minilm"), texts, max_tokens=256)
    drawn = _documents(at)
    assert drawn
    for doc, _, chart in drawn[:3]:
        n, query = len(want.tokens(doc)), want.query(doc, layer, head)
        assert n == 256
        start, stop = example_figures.document_window(n, query)
        assert f"tokens {start}–{stop - 1} of {n}, around the query" in chart_title(chart)
        assert stop - start <= example_figures.WINDOW and start <= query < stop
        per_row = len(chart["data"][0]["z"][0])
        weights = np.asarray(chart["data"][0]["customdata"], dtype=float).ravel()[:stop - start]
        np.testing.assert_allclose(weights, want.pattern(doc, layer, head)[query, start:stop], atol=1e-6)
        frame = chart["data"][1]
        assert (frame["x"][0], frame["y"][0]) == ((query - start) % per_row, (query - start) // per_row)
        short = example_figures.document_figure(["t"] * example_figures.WINDOW, np.eye(example_figures.WINDOW),
                                                "a short document", per_row=per_row)
        assert chart["layout"]["height"] <= short.layout.height  # no taller than a document of WINDOW tokens
