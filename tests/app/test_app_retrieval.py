"""*Retrieval heads* (issue 56): on toy-induction, a needle of letters planted in the bundled documents at two depths
draws every head's score, equal to the library's own `retrieval_scores` over the same needle, length and depths
computed here; its induction head scores above every first-layer head; a head picked (a click on the grid's marker
of a head names it, as everywhere) draws its look at the needle: the needle's own tokens shaded, that head's
heaviest key inside them. An encoder is refused with a message, and a needle left empty asks for one, keeping every
choice."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.drawing import heads as head_figures
from mha_viz.features.retrieval import controls as retrieval_keys
from tests.app.helpers import chart_title, charts, open_with_text, shown

pytestmark = pytest.mark.model
NEEDLE, QUESTION = "q w e r t y u i", "q w"


def _page(model: str = "toy-induction"):
    at = open_with_text("retrieval", "q w e r", model=model)
    return at


def _choose(at, length=40, depths=(25, 75), needle=NEEDLE, question=QUESTION):
    at.number_input(key=retrieval_keys.RETRIEVAL_LENGTH).set_value(length).run()
    at.session_state[retrieval_keys.RETRIEVAL_DEPTHS] = list(depths)
    at.text_input(key=retrieval_keys.RETRIEVAL_NEEDLE).input(needle).run()
    at.text_input(key=retrieval_keys.RETRIEVAL_QUESTION).input(question).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])


def test_the_grid_is_the_librarys_scores_and_a_picked_head_shows_where_it_looked():
    at = _page()
    _choose(at)
    at.button(key=retrieval_keys.RETRIEVAL_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    grid = next(c for c in charts(at) if chart_title(c).startswith("Retrieval score"))
    toy = mha_viz.load_model("toy-induction", device="cpu")
    want = mha_viz.tasks.retrieval_scores(toy, needles=[(NEEDLE, QUESTION)], lengths=(40,), depths=(0.25, 0.75))
    score = np.asarray(grid["data"][0]["z"], dtype=np.float64)
    np.testing.assert_allclose(score, want["score"].to_numpy().reshape(score.shape), rtol=1e-6, atol=1e-9)
    assert score[1].max() > 0 and score[1].max() > score[0].max()  # the induction head copies, layer 0 does not
    assert score.max() <= 1  # each needle token counted once, however often the answer repeats it
    layer, head = divmod(int(np.argmax(score)), score.shape[1])
    # the search opens on its top head (issue 90: the picker stayed on another page's head, which scored 0)
    assert (at.selectbox(key=retrieval_keys.RETRIEVAL_LAYER).value, at.selectbox(
        key=retrieval_keys.RETRIEVAL_HEAD).value) == (layer, head)
    # the grid's markers: one a head, layer-major, so that a click's point index names the head it opens
    H = score.shape[1]
    assert len(grid["data"][1]["x"]) == score.size and f"layer {layer}, head {head}" in grid["data"][1]["text"][
        layer * H + head]
    assert head_figures.grid_pick([{"curve_number": 1, "point_index": layer * H + head}], H) == (layer, head)
    at.selectbox(key=retrieval_keys.RETRIEVAL_LAYER).set_value(layer).run()
    at.selectbox(key=retrieval_keys.RETRIEVAL_HEAD).set_value(head).run()
    assert not at.exception and not at.error
    found = [b for b in at.button if b.label == "Find the retrieval heads"]  # in its place, greyed, saying why
    assert len(found) == 1 and found[0].disabled and "to search again" in found[0].help
    look = next(c for c in charts(at) if chart_title(c).startswith(f"Layer {layer}, head {head}"))
    row = np.asarray(look["data"][0]["y"], dtype=np.float64)
    (shade,) = [s for s in look["layout"]["shapes"] if s["type"] == "rect"]
    start, stop = int(shade["x0"] + 0.5), int(shade["x1"] + 0.5)
    assert stop - start == want.attrs["needle_tokens"] // want.attrs["trials"]  # the needle's own tokens
    assert start <= int(np.argmax(row)) < stop and row.sum() == pytest.approx(1.0, abs=0.05)


def test_an_encoder_is_refused_and_an_empty_needle_asks_for_one_keeping_the_choices():
    at = _page("minilm")
    assert any("decoder" in i.value for i in at.info) and not at.get("button_group")
    said = " ".join(shown(i.value) for i in at.info)
    assert said.count("smollm2") == said.count("toy-induction") == 1, said  # each decoder named once
    at = _page()
    _choose(at, length=36, depths=(10,), needle=" ")
    assert any("needle sentence" in i.value for i in at.info)
    assert not [b for b in at.button if b.key == retrieval_keys.RETRIEVAL_GO]
    assert at.session_state[retrieval_keys.RETRIEVAL_LENGTH] == 36
    assert at.session_state[retrieval_keys.RETRIEVAL_DEPTHS] == [10]
    assert at.session_state[retrieval_keys.RETRIEVAL_QUESTION] == QUESTION


def test_a_needle_the_model_cannot_read_is_refused_before_a_search_and_the_sidebar_text_says_nothing():
    """toy-induction reads letters: the default English needle is its unknown token, so no search is offered (its
    answer could never copy it), and the letters that it reads are named; the sidebar's sentence, unknown to it too,
    is not this page's text, so its notice stays off the page (it is on the Head view)."""
    at = open_with_text("retrieval", "The cat sat on the mat.", model="toy-induction")
    assert not at.exception and not at.error
    assert not [w for w in at.warning if "unknown to" in w.value]  # the sidebar's sentence: not this page's text
    said = " ".join(shown(i.value) for i in at.info).replace("\\", "")  # as drawn: `plain` escapes Markdown
    assert "unknown to toy-induction" in said and "It reads letters a–z" in said, said
    assert not [b for b in at.button if b.key == retrieval_keys.RETRIEVAL_GO]
    _choose(at, length=36, depths=(10,))
    assert not [i for i in at.info if "unknown to" in i.value]
    assert [b for b in at.button if b.key == retrieval_keys.RETRIEVAL_GO]
