"""Token focus and query/key subsets in the app through AppTest: the focus grid shows the run's
row and column of the chosen token in every head, on tokens and words, for one token and for
long texts; the head view's "chosen queries and keys" shows exactly those queries and keys."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.drawing import style as figure_style
from mha_viz.export import shared_controls
from mha_viz.features.focus import controls as focus_keys
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.ui.kit import keys
from mha_viz.views import detail
from tests.app.helpers import charts, open_page, open_with_text, titled

pytestmark = pytest.mark.model

LONG = "The cat sat on the mat because it was warm and the dog watched it from the door. " * 9  # > 128 tokens
TOY_LONG = " ".join("abcdefghijklmnopqrstuvwxyz"[i % 26] for i in range(150))


def _grids(at) -> dict[str, dict]:
    """The focus grids by title start: 'attends to' / 'attended by'."""
    out = {}
    for spec in charts(at):
        title = spec["layout"].get("title", {}).get("text", "")
        if title.startswith("Every head: what attends to"):
            out["by"] = spec
        elif title.startswith("Every head: what"):
            out["to"] = spec
    return out


def _check_focus(at, index: int, words: bool = False) -> None:
    run = at.session_state[keys.CURRENT].run
    grids = _grids(at)
    assert set(grids) == {"to", "by"}, list(grids)
    to = np.array(grids["to"]["data"][0]["z"], dtype=float)
    by = np.array(grids["by"]["data"][0]["z"], dtype=float)
    a = run.attentions.astype(np.float64)
    labels = detail.word_labels(run.tokens, run.word_ids) if words else run.tokens
    if words:
        wl = np.stack([[detail.word_level(a[layer, h], run.word_ids) for h in range(run.num_heads)]
                       for layer in range(run.num_layers)])
        a = wl
    m = a.shape[-1]
    assert to.shape == by.shape == (run.num_layers * run.num_heads, m)
    np.testing.assert_allclose(to, a[:, :, index, :].reshape(-1, m), atol=1e-5)
    np.testing.assert_allclose(by, a[:, :, :, index].reshape(-1, m), atol=1e-5)
    assert [figure_style.label_text(x) for x in grids["to"]["data"][0]["x"]] == list(labels)


@pytest.mark.parametrize("model", ["minilm", "toy-induction"])
@pytest.mark.parametrize("text", ["a", "long"])
def test_token_focus_tokens_and_words(model, text):
    text = (LONG if model == "minilm" else TOY_LONG) if text == "long" else text
    at = open_with_text("focus", text, None if model == "minilm" else model)
    run = at.session_state[keys.CURRENT].run
    assert run.n >= 1 and (text == "a" or run.n > 60)
    index = at.selectbox(key=shared_controls.FOCUS_TOKEN).value
    # the page opens past [CLS] on an encoder, on the last token of a decoder (toy-induction: the row that reads all)
    assert index == (run.n - 1 if model == "toy-induction" else min(1, run.n - 1)) and run.is_causal == (
        model == "toy-induction")
    _check_focus(at, index)
    other = 1 if index == run.n - 1 and run.n > 1 else run.n - 1
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(other).run()
    assert not at.exception and not at.error
    _check_focus(at, other)
    at.radio(key=shared_controls.FOCUS_LEVEL).set_value("words").run()
    assert not at.exception and not at.error
    _check_focus(at, at.selectbox(key=shared_controls.FOCUS_TOKEN).value, words=True)
    at.radio(key=focus_keys.FOCUS_SHOW).set_value("attended by").run()
    assert not at.exception and set(_grids(at)) == {"by"}


def _heatmap(at):
    return next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")


def test_head_view_shows_the_chosen_queries_and_keys():
    at = open_with_text("head_view", "The cat sat on the mat. The dog ran to the door!")
    run = at.session_state[keys.CURRENT].run
    at.radio(key="head_detail").set_value("chosen queries and keys").run()
    assert not at.exception and not at.error
    at.slider(key=head_view_keys.SUBSET_QUERIES).set_range(8, 14).run()
    at.slider(key=head_view_keys.SUBSET_KEYS).set_range(1, 6).run()
    assert not at.exception and not at.error
    spec = _heatmap(at)
    layer, head = at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]
    np.testing.assert_allclose(np.array(spec["data"][0]["z"], dtype=float),
                               run.head(layer, head)[8:14, 1:6], atol=1e-6)
    assert [figure_style.label_text(y) for y in spec["data"][0]["y"]] == run.tokens[8:14]
    assert [figure_style.label_text(x) for x in spec["data"][0]["x"]] == run.tokens[1:6]
    # the sentence preset: the second sentence's queries over the first sentence's keys
    spans = detail.sentence_spans(run.tokens)
    assert len(spans) == 2
    at.selectbox(key=head_view_keys.SUBSET_PRESET).set_value("sentence 2's queries × sentence 1's keys").run()
    assert not at.exception and not at.error
    spec = _heatmap(at)
    (q0, q1), (k0, k1) = spans[1], spans[0]
    assert [figure_style.label_text(y) for y in spec["data"][0]["y"]] == run.tokens[q0:q1]
    assert [figure_style.label_text(x) for x in spec["data"][0]["x"]] == run.tokens[k0:k1]
    np.testing.assert_allclose(np.array(spec["data"][0]["z"], dtype=float),
                               run.head(layer, head)[q0:q1, k0:k1], atol=1e-6)


def test_subset_on_one_token_and_a_long_text():
    at = open_with_text("head_view", "a")
    at.radio(key="head_detail").set_value("chosen queries and keys").run()
    assert not at.exception and not at.error
    at = open_with_text("head_view", "word " * 400)  # past every-token detail: the subset is still offered
    at.radio(key="head_detail").set_value("chosen queries and keys").run()
    at.slider(key=head_view_keys.SUBSET_QUERIES).set_range(300, 402).run()
    assert not at.exception and not at.error
    spec = _heatmap(at)
    assert len(spec["data"][0]["y"]) == 102 and len(spec["data"][0]["x"]) == 96


def test_head_view_pick_lists_show_the_picked_tokens_in_text_order():
    at = open_with_text("head_view", "The cat sat on the mat. The dog ran to the door!")
    run = at.session_state[keys.CURRENT].run
    at.radio(key="head_detail").set_value("chosen queries and keys").run()
    at.toggle(key=head_view_keys.SUBSET_PICK).set_value(True).run()
    assert not at.exception and not at.error
    at.multiselect(key=head_view_keys.SUBSET_QUERY_LIST).set_value([9, 2, 5]).run()
    at.multiselect(key=head_view_keys.SUBSET_KEY_LIST).set_value([0, 7]).run()
    assert not at.exception and not at.error
    spec = _heatmap(at)
    layer, head = at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]
    assert [figure_style.label_text(y) for y in spec["data"][0]["y"]] == [run.tokens[i] for i in (2, 5, 9)]
    assert [figure_style.label_text(x) for x in spec["data"][0]["x"]] == [run.tokens[0], run.tokens[7]]
    np.testing.assert_allclose(np.array(spec["data"][0]["z"], dtype=float),
                               run.head(layer, head)[[2, 5, 9]][:, [0, 7]], atol=1e-6)
    # a preset fills the pick-lists too
    at.selectbox(key=head_view_keys.SUBSET_PRESET).set_value("sentence 1 × sentence 1").run()
    q0, q1 = detail.sentence_spans(run.tokens)[0]
    assert at.multiselect(key=head_view_keys.SUBSET_QUERY_LIST).value == list(range(q0, q1))
    assert [figure_style.label_text(y) for y in _heatmap(at)["data"][0]["y"]] == run.tokens[q0:q1]


def test_focus_shows_hostile_tokens_as_text():
    at = open_with_text("focus", "<script>alert(1)</script> [x](javascript:alert(1)) $x$")
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(2).run()  # the token "script"
    assert not at.exception and not at.error
    for spec in charts(at):
        title = str(spec["layout"].get("title", {}).get("text", ""))
        text = title + "".join(map(str, spec["data"][0].get("x", [])))
        assert "<script" not in text and "<" not in text.replace("<br>", "")
    captions = " ".join(c.value for c in at.caption)
    assert "](javascript" not in captions  # Markdown escaped by text.plain


def test_focus_choices_survive_a_visit_to_another_page():
    at = open_with_text("focus", "The cat sat on the mat.")
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(3).run()
    at.radio(key=shared_controls.FOCUS_LEVEL).set_value("words").run()
    open_page(at, "model_view")
    open_page(at, "focus")
    assert not at.exception and not at.error
    assert at.selectbox(key=shared_controls.FOCUS_TOKEN).value == 3
    assert at.radio(key=shared_controls.FOCUS_LEVEL).value == "words"



def test_summaries_on_demand_are_the_runs_means_and_maxima():
    """By default each direction draws its grid only; the Summaries toggle adds the four
    summary panels and the largest weight per head, their numbers the run's own, and stays on
    across a visit to another page."""
    at = open_with_text("focus", "The cat sat on the mat. The dog ran!")
    titles = [spec["layout"]["title"]["text"] for spec in charts(at)]
    assert len(titles) == 3 and titles[0].startswith("Heads where"), titles  # the ranking of heads (issue 54)
    assert all(t.startswith("Every head") for t in titles[1:]), titles
    at.toggle(key=focus_keys.FOCUS_SUMMARIES).set_value(True).run()
    assert not at.exception and not at.error
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(3).run()
    run = at.session_state[keys.CURRENT].run
    assert len(charts(at)) == 7
    summary = titled(at, "Summaries: what attends to")
    cols = run.attentions[:, :, :, 3].astype(np.float64)  # (layers, heads, n): what attends to token 3
    for trace, z in zip(summary["data"], (cols.mean(1), cols.max(1), cols.mean(0), cols.max(0))):
        np.testing.assert_allclose(np.array(trace["z"], dtype=float), z, atol=1e-6)
        assert [figure_style.label_text(x) for x in trace["x"]] == run.tokens
    assert [a["text"] for a in summary["layout"]["annotations"]] == [
        "mean over heads", "max over heads", "mean over layers", "max over layers"]
    heads = titled(at, "Largest weight per head (attended by)")
    others = np.delete(cols, 3, axis=-1).max(-1)
    np.testing.assert_allclose(np.array(heads["data"][0]["z"], dtype=float), others, atol=1e-6)
    layer, head = np.unravel_index(np.argmax(others), others.shape)
    [frame] = heads["layout"]["shapes"]
    assert (frame["x0"] + 0.5, frame["y0"] + 0.5) == (head, layer)
    assert "Largest weight per head (attends to)" in [s["layout"]["title"]["text"] for s in charts(at)]
    open_page(at, "model_facts")
    open_page(at, "focus")
    assert not at.exception and at.toggle(key=focus_keys.FOCUS_SUMMARIES).value is True
    assert len(charts(at)) == 7


def test_focus_and_subsets_on_smollm2_and_our_mha():
    """A decoder with grouped-query heads, and MiniLM computed by our MHA."""
    at = open_with_text("focus", "The cat sat on the mat. The dog ran!", "smollm2")
    run = at.session_state[keys.CURRENT].run
    assert at.selectbox(key=shared_controls.FOCUS_TOKEN).value == run.n - 1 and run.tokens[-1] == "!"  # its last
    _check_focus(at, run.n - 1)
    last_row = _grids(at)["to"]["data"][0]["y"][-1]
    assert run.is_causal and last_row == f"L{run.layer_ids[-1]} H{run.num_heads - 1}"
    open_page(at, "head_view")
    at.radio(key="head_detail").set_value("chosen queries and keys").run()
    at.selectbox(key=head_view_keys.SUBSET_PRESET).set_value("sentence 2's queries × sentence 1's keys").run()
    assert not at.exception and not at.error
    (q0, q1), (k0, k1) = detail.sentence_spans(run.tokens)[:2][::-1]
    spec = _heatmap(at)
    assert [figure_style.label_text(y) for y in spec["data"][0]["y"]] == run.tokens[q0:q1]
    assert [figure_style.label_text(x) for x in spec["data"][0]["x"]] == run.tokens[k0:k1]
    at = open_with_text("focus", "The cat sat on the mat.")
    at.toggle(key="local_attention").set_value(True).run()
    assert not at.exception and not at.error
    assert at.session_state[keys.CURRENT].model.implementation.startswith("ours")
    _check_focus(at, 1)
