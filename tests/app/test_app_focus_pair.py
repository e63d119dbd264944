"""Heads found from two tokens in the app (issue 54): on Token focus, "it" → "animal" on MiniLM ranks
the heads as Hugging Face's own attention weights do, the bars show the top heads, the button opens
the strongest on the Head view; the Head view's button opens Token focus on a cell's query and key;
the choices stay across a visit to another page; a causal model's later key gets a message."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz.drawing import style as figure_style
from mha_viz.export import shared_controls
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.ui.kit import keys
from tests.app.helpers import chart_titles, open_box, open_page, open_with_text, titled

pytestmark = pytest.mark.model

TEXT = "The animal didn't cross the street because it was too tired."


def _hugging_face(at) -> np.ndarray:
    """(layers, heads, n, n) weights of the sidebar's model from its own forward (not our capture)."""
    model = at.session_state[keys.CURRENT].model
    enc = model.tokenizer(TEXT, return_tensors="pt")
    with torch.no_grad():
        out = model.hf_model(**enc, output_attentions=True)
    return torch.stack([a[0] for a in out.attentions]).double().numpy()


def _bars(at) -> dict:
    return titled(at, "Heads where")


def test_it_to_animal_ranks_the_heads_and_opens_the_strongest():
    at = open_with_text("focus", TEXT)
    run = at.session_state[keys.CURRENT].run
    it, animal = run.tokens.index("it"), run.tokens.index("animal")
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(it).run()
    # until a key is picked it is the token "it" puts the most weight on, and the bars' first head is the one
    # the Strongest line names (the line named L0 H2 → "because" beside a ranking it did not match)
    because = run.tokens.index("because")
    assert at.selectbox(key=shared_controls.FOCUS_KEY).value == because
    assert _bars(at)["data"][0]["y"][0] == "L0 H2" and "looks at 9: because" in chart_titles(at)[0]
    strongest = next(c.value for c in at.caption if c.value.startswith("Strongest"))
    assert strongest.startswith("Strongest: L0 H2, where 10: it puts 1.000 of its attention on 9: because"), strongest
    at.selectbox(key=shared_controls.FOCUS_KEY).set_value(animal).run()
    assert not at.exception and not at.error
    # a key the user picked stays with another token
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(it - 1).run()
    assert at.selectbox(key=shared_controls.FOCUS_KEY).value == animal
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(it).run()
    w = _hugging_face(at)[:, :, it, animal]
    order = np.argsort(-w.ravel(), kind="stable")[:10]
    bars = _bars(at)["data"][0]
    heads = run.num_heads
    assert list(bars["y"]) == [f"L{run.layer_ids[i // heads]} H{i % heads}" for i in order]
    np.testing.assert_allclose(np.array(bars["x"], dtype=float), w.ravel()[order], atol=1e-5)
    assert list(bars["y"][:2]) == ["L3 H1", "L5 H11"]
    assert "10: it" in chart_titles(at)[0] and "2: animal" in chart_titles(at)[0]
    # the Strongest line under "attends to" names the ranking's first head for the chosen key
    strongest = next(c.value for c in at.caption if c.value.startswith("Strongest"))
    assert "On 2: animal: L3 H1, 0.677" in strongest
    # the choices stay across a visit to another page
    open_page(at, "model_facts")
    open_page(at, "focus")
    assert at.selectbox(key=shared_controls.FOCUS_TOKEN).value == it
    assert at.selectbox(key=shared_controls.FOCUS_KEY).value == animal
    # the button opens the strongest head on the Head view
    at.button(key=keys.FOCUS_OPEN_TOP).click().run()
    assert not at.exception and at.title[0].value == "Head view"
    assert (at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]) == divmod(int(order[0]), heads)
    assert (at.selectbox(key=keys.HEAD_VIEW_LAYER).value, at.selectbox(key=keys.HEAD_VIEW_HEAD).value) == (3, 1)


def test_the_head_views_button_opens_token_focus_on_the_cell():
    at = open_with_text("head_view", TEXT)
    run = at.session_state[keys.CURRENT].run
    it, animal = run.tokens.index("it"), run.tokens.index("animal")
    open_box(at, head_view_keys.WHY_OPEN)  # a click on a cell opens *Why here?* and sets its query and key
    at.selectbox(key=shared_controls.WHY_QUERY).set_value(it).run()  # what a click on the cell (it, animal) sets
    at.selectbox(key=shared_controls.WHY_KEY).set_value(animal).run()
    button = at.button(key=keys.HEAD_FIND_HEADS)
    assert button.label == "Which heads look from “it” to “animal”?"
    button.click().run()
    assert not at.exception and not at.error and at.title[0].value == "Token focus"
    assert at.selectbox(key=shared_controls.FOCUS_TOKEN).value == it
    assert at.selectbox(key=shared_controls.FOCUS_KEY).value == animal
    assert at.radio(key=shared_controls.FOCUS_LEVEL).value == "tokens"
    assert list(_bars(at)["data"][0]["y"][:2]) == ["L3 H1", "L5 H11"]


def test_the_words_level_and_a_causal_models_later_key():
    at = open_with_text("focus", TEXT)
    at.radio(key=shared_controls.FOCUS_LEVEL).set_value("words").run()
    assert not at.exception and not at.error
    labels = [figure_style.label_text(x) for x in titled(at, "Every head: what word")["data"][0]["x"]]
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(labels.index("it")).run()
    at.selectbox(key=shared_controls.FOCUS_KEY).set_value(labels.index("animal")).run()
    assert not at.exception and not at.error
    assert list(_bars(at)["data"][0]["y"][:2]) == ["L3 H1", "L5 H11"]  # one-piece words: the tokens' weights
    at = open_with_text("focus", "The cat sat on the mat.", "smollm2")
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(1).run()
    at.selectbox(key=shared_controls.FOCUS_KEY).set_value(4).run()
    assert not at.exception and not at.error
    assert any("is causal" in i.value and "puts no weight" in i.value for i in at.info)
    assert not [t for t in chart_titles(at) if t.startswith("Heads where")]
    at.selectbox(key=shared_controls.FOCUS_KEY).set_value(0).run()
    assert not at.exception and len(_bars(at)["data"][0]["y"]) == 10
