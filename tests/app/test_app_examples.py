"""The *Head examples* page through AppTest: without a corpus it says where to run one; after the
Corpus page's job it draws the chosen head's top documents (the library's, with its attention on
their tokens), its histograms, its top tokens and the head finder (a point a head, layer-major, so
that a click names its head); for minilm and for toy-induction. Another tab (a new session) sees the
server's last corpus for its model, except on a public server."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import corpus
from mha_viz.corpus import split
from mha_viz.drawing import heads as head_figures
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.examples import controls as examples_keys
from mha_viz.ui.kit import keys
from tests.app.helpers import chart_title, charts, open_page, open_with_text, shown

pytestmark = pytest.mark.model


def _corpus(model: str, tokens: int):
    at = open_with_text("corpus", "The cat sat on the mat.", model)
    at.number_input(key=corpus_keys.CORPUS_TOKENS).set_value(tokens).run()
    at.toggle(key=corpus_keys.CORPUS_IMPORTANCE).set_value(False).run()
    at.button(key=corpus_keys.CORPUS_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def test_without_a_corpus_the_page_says_where_to_run_one(fresh_cache):
    at = open_with_text("examples", "The cat sat on the mat.", "minilm")
    assert not at.exception
    assert "No corpus has been run for" in shown(" ".join(i.value for i in at.info))
    assert not at.get("plotly_chart")
    at.button(key=examples_keys.EXAMPLES_TO_CORPUS).click().run()
    assert at.title[0].value == "Corpus"


@pytest.mark.parametrize("model, tokens", [("minilm", 32), ("toy-induction", 24)])
def test_the_page_draws_the_librarys_examples_and_the_finder_opens_a_head(fresh_cache, model, tokens):
    at = _corpus(model, tokens)
    at.button(key=corpus_keys.CORPUS_TO_EXAMPLES).click().run()  # the corpus's results lead to the page
    assert at.title[0].value == "Head examples"
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    loaded = mha_viz.load_model(model)
    train, _ = split.split(corpus.read_texts("sample"))
    want = corpus.head_examples(loaded, train, max_tokens=tokens)
    top = want.top(0, 0)
    documents = [chart_title(c) for c in charts(at) if chart_title(c).startswith("Document ")]
    assert documents[:len(top)] == [f"Document {doc} · score {score:.3f}" for doc, score in top]  # in order
    drawn = next(c for c in charts(at) if chart_title(c) == documents[0])
    doc = top[0][0]
    weights = np.asarray(drawn["data"][0]["customdata"], dtype=float).ravel()[:len(want.tokens(doc))]
    pattern = want.pattern(doc, 0, 0)
    query = want.query(doc, 0, 0)
    np.testing.assert_allclose(weights, pattern[query], atol=1e-6)  # shaded from the score's own row
    per_row = len(drawn["data"][0]["z"][0])
    assert (drawn["data"][1]["x"][0], drawn["data"][1]["y"][0]) == (query % per_row, query // per_row)  # and framed
    titles = [chart_title(c) for c in charts(at)]
    assert any(t.startswith("Head finder") for t in titles) and any("scores over the corpus" in t for t in titles)
    scores = next(c for c in charts(at) if "scores over the corpus" in chart_title(c))
    np.testing.assert_array_equal(np.asarray(scores["data"][0]["y"]), want.histogram(0, 0)[1])
    # another head, picked: its own top documents
    at.selectbox(key=examples_keys.EXAMPLES_LAYER).set_value(1).run()
    at.selectbox(key=examples_keys.EXAMPLES_HEAD).set_value(2).run()
    assert not at.exception and not at.error
    first = want.top(1, 2)[0]
    assert f"Document {first[0]} · score {first[1]:.3f}" in [chart_title(c) for c in charts(at)]
    # the finder: one point a head, layer-major, so that a click's point index names the head
    finder = next(c for c in charts(at) if chart_title(c).startswith("Head finder"))
    H = loaded.num_heads
    assert len(finder["data"][0]["x"]) == loaded.num_layers * H
    assert "L1H2" in finder["data"][0]["text"][H + 2]
    assert head_figures.grid_pick([{"curve_number": 0, "point_index": H + 2}], H, curve=0) == (1, 2)


def test_the_head_view_links_to_its_heads_examples_once_a_corpus_ran(fresh_cache):
    at = open_with_text("head_view", "The cat sat on the mat.", "minilm")
    assert keys.EXAMPLES_OPEN not in [b.key for b in at.button]  # no corpus yet: no link
    open_page(at, "corpus")
    at.number_input(key=corpus_keys.CORPUS_TOKENS).set_value(16).run()
    at.toggle(key=corpus_keys.CORPUS_IMPORTANCE).set_value(False).run()
    at.button(key=corpus_keys.CORPUS_GO).click().run()
    open_page(at, "head_view")
    at.button(key=keys.EXAMPLES_OPEN).click().run()
    assert not at.exception and at.title[0].value == "Head examples"
    assert (
        at.selectbox(key=examples_keys.EXAMPLES_LAYER).value,
        at.selectbox(key=examples_keys.EXAMPLES_HEAD).value,
    ) == (at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD])


def test_another_tab_sees_the_servers_last_corpus_and_a_public_server_keeps_each_visitors_own(fresh_cache, monkeypatch):
    """A corpus run in one tab was invisible to a second tab's Head examples and Head view ("No corpus has been run"):
    a new session now shows the server's most recently used statistics for its model, and says whose they are. On a
    public server a visitor never sees another's (their documents may be an upload)."""
    _corpus("minilm", 16)  # the first tab
    other = open_with_text("examples", "The cat sat on the mat.", "minilm")  # a second tab: its own session
    assert not other.exception and not other.error and not other.info, [i.value for i in other.info]
    assert "The last corpus run on this server for this model" in shown(" ".join(c.value for c in other.caption))
    assert any(chart_title(c).startswith("Document ") for c in charts(other))
    open_page(other, "head_view")
    assert keys.EXAMPLES_OPEN in [b.key for b in other.button]
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    visitor = open_with_text("examples", "The cat sat on the mat.", "minilm")
    assert "No corpus has been run for" in shown(" ".join(i.value for i in visitor.info))
    open_page(visitor, "head_view")
    assert keys.EXAMPLES_OPEN not in [b.key for b in visitor.button]
