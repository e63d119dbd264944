"""The Compare page and the sidebar's Export box through AppTest: a minimal pair on minilm, the
same model with and without our MHA (no head changes), models of different shapes (by depth),
a model B that cannot load (a message, nothing lost), and the charts' download settings."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mha_viz.export import lesson as lessons
from mha_viz.features.compare import controls as compare_keys
from mha_viz.ui.kit import keys
from mha_viz.ui.shell import sidebar
from tests.app.helpers import app_test, charts, export_box, lesson_panel, open_page, open_with_text

pytestmark = pytest.mark.model


def info_text(at) -> str:
    return " ".join(i.value for i in at.info)


def side_by_side(at) -> dict:
    return next(c for c in charts(at) if len([t for t in c["data"] if t["type"] == "heatmap"]) >= 2)


def test_minimal_pair_on_minilm_changes_heads_and_lists_them():
    at = open_with_text("compare", "The cat sat on the mat.", "minilm")
    at.selectbox(key=compare_keys.CMP_PAIR).set_value("Agreement: are / is").run()
    assert not at.exception, at.exception
    a, b = compare_keys.PAIRS["Agreement: are / is"]
    assert at.text_area(key=keys.TEXT).value == a and at.text_area(key=compare_keys.CMP_TEXT_B).value == b
    assert "token" in info_text(at).lower()  # same tokenizer, same length: token by token
    grid = charts(at)[0]
    change = np.asarray(grid["data"][0]["z"], dtype=float)
    assert change.shape == (6, 12) and change.max() > 1e-3  # one word changed: some head moved
    assert grid["data"][0].get("showscale", True) and "noise" not in grid["layout"]["title"]["text"]
    assert not at.success
    side = side_by_side(at)
    heat = [t for t in side["data"] if t["type"] == "heatmap"]
    assert len(heat) == 3  # A | B | A - B
    diff = np.asarray(heat[2]["z"], dtype=float)
    assert np.abs(diff).max() > 0
    # the head shown first is the one that changed most
    assert (at.session_state[compare_keys.CMP_LAYER], at.session_state[compare_keys.CMP_HEAD]) == np.unravel_index(
        change.argmax(), change.shape)
    table = next(d.value for d in at.dataframe if "layer" in d.value.columns)
    assert len(table) == 72 and any(c.endswith("_diff") for c in table.columns)
    assert any(b.label.startswith("Download the differences") for b in at.get("download_button"))


def test_the_head_that_changed_most_is_the_one_a_link_and_a_lesson_step_carry():
    """Compare opens on the head that changed most, chosen by nobody: the address, a lesson step made there and a
    student following it show that head, not the first one (they carried L0H0, and the student saw it)."""
    at = open_with_text("compare", "The cat sat on the mat.", "minilm")
    at.selectbox(key=compare_keys.CMP_PAIR).set_value("Agreement: are / is").run()
    change = np.asarray(charts(at)[0]["data"][0]["z"], dtype=float)
    row, head = (int(i) for i in np.unravel_index(change.argmax(), change.shape))
    assert (row, head) != (0, 0), "the planted pair must move another head than the first most"
    assert (at.query_params["layer"], at.query_params["head"]) == (str(row), str(head))  # MiniLM's rows: its layers
    lesson_panel(at).button(key=keys.LESSON_ADD).click().run()
    [step] = at.session_state[keys.LESSON_DRAFT].steps
    student = app_test()
    student.query_params["lesson"] = lessons.pack(lessons.Lesson(title="Compare", steps=(step,)))
    student.run()
    assert not student.exception and not student.error
    assert (student.session_state[compare_keys.CMP_LAYER], student.session_state[compare_keys.CMP_HEAD]) == (row, head)
    # a new pair: the page follows the head that changed most then, as no one chose one
    at.text_area(key=compare_keys.CMP_TEXT_B).input("The dog sat on the mat.").run()
    change = np.asarray(charts(at)[0]["data"][0]["z"], dtype=float)
    assert (at.session_state[compare_keys.CMP_LAYER], at.session_state[compare_keys.CMP_HEAD]) == np.unravel_index(
        change.argmax(), change.shape)


def test_same_model_with_and_without_our_mha_changes_nothing():
    at = open_with_text("compare", "The keys to the cabinet are missing.", "minilm")
    at.radio(key=compare_keys.CMP_MODE).set_value(compare_keys.MODELS).run()
    assert not at.exception, at.exception
    assert at.toggle(key=compare_keys.CMP_LOCAL_B).value is True  # default: the other implementation
    grid = charts(at)[0]
    change = np.asarray(grid["data"][0]["z"], dtype=float)
    assert change.shape == (6, 12) and change.max() < 1e-4
    # rounding is not drawn as change (issue 90): one flat colour, no colour bar, the title and a message say so
    assert grid["data"][0]["showscale"] is False and change.max() - change.min() < grid["data"][0]["zmax"] - \
        grid["data"][0]["zmin"]
    assert "within floating-point noise" in grid["layout"]["title"]["text"]
    assert any(m.value.startswith("A and B attend the same") for m in at.success)
    diff = side_by_side(at)["layout"]["coloraxis2"]
    assert (diff["cmin"], diff["cmax"]) == (-1.0, 1.0)  # the B − A panel is not stretched over 1e-8 either
    assert any("within floating-point noise" in a.get("title", {}).get("text", "")
               for k, a in side_by_side(at)["layout"].items() if k.startswith("xaxis"))


def test_models_of_different_shapes_compare_by_depth():
    at = open_with_text("compare", "k d m x b f k d m", "toy-induction")
    at.radio(key=compare_keys.CMP_MODE).set_value(compare_keys.MODELS).run()
    at.selectbox(key=compare_keys.CMP_MODEL_B).set_value("minilm").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert "depth" in " ".join(s.value for s in at.subheader).lower()
    spec = charts(at)[0]
    assert {t["type"] for t in spec["data"]} & {"box", "scatter", "violin"}
    table = next(d.value for d in at.dataframe if "relative_depth" in d.value.columns)
    assert set(table["run"]) == {"A", "B"} and table["relative_depth"].between(0, 1).all()


def test_model_b_that_cannot_load_says_so_and_keeps_everything():
    at = open_with_text("compare", "A sentence to keep.", "minilm")
    at.radio(key=compare_keys.CMP_MODE).set_value(compare_keys.MODELS).run()
    at.selectbox(key=compare_keys.CMP_MODEL_B).set_value(sidebar.OTHER).run()
    at.text_input(key=compare_keys.CMP_OTHER_B).input("/no/such/folder").run()
    assert not at.exception, at.exception
    assert at.error and "folder" in at.error[0].value.lower()
    assert at.text_area(key=keys.TEXT).value == "A sentence to keep."
    open_page(at, "head_view")  # the rest of the app still works on A
    assert not at.exception


def test_chart_downloads_follow_the_export_settings():
    at = open_with_text("head_view", "The cat sat on the mat.", "minilm")
    closed = [b.label for b in at.get("download_button")], [r.key for r in at.radio]
    assert "Attention data (.npz)" not in closed[0] and keys.EXPORT_FORMAT not in closed[1]  # the closed box: a label
    export_box(at)
    at.radio(key=keys.EXPORT_FORMAT).set_value("svg").run()
    at.selectbox(key=keys.EXPORT_SIZE).set_value("paper, full width (7 in at 300 dpi)").run()
    assert not at.exception, at.exception
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    opts = config["toImageButtonOptions"]
    assert opts["format"] == "svg" and opts["width"] == 1050
    assert "minilm" in opts["filename"].lower()
    labels = [b.label for b in at.get("download_button")]
    assert "Attention data (.npz)" in labels and "HTML report" in labels
    open_page(at, "model_view")  # the choice stays on another page, and the box stays open (a run ended early)
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "svg"
    assert keys.EXPORT_FORMAT in [r.key for r in at.radio]
    export_box(at, False)  # and with the box closed (its inputs not drawn)
    assert keys.EXPORT_FORMAT not in [r.key for r in at.radio]
    config = json.loads(at.get("plotly_chart")[0].proto.config)
    assert config["toImageButtonOptions"]["format"] == "svg"


def test_a_minimal_pair_replaces_the_users_sentences_with_an_undo():
    """Issue 90: picking a minimal pair overwrote the sidebar's sentence with no way back, unlike Examples and
    Presets. Undo puts back both sentences (one pair over another still goes back to the user's); an edit of the
    pair's text takes the offer away."""
    at = open_with_text("compare", "My own sentence about a lighthouse.", "minilm")
    at.text_area(key=compare_keys.CMP_TEXT_B).input("My own sentence B.").run()
    names = list(compare_keys.PAIRS)
    for name in names[:2]:
        at.selectbox(key=compare_keys.CMP_PAIR).set_value(name).run()
        assert at.text_area(key=keys.TEXT).value == compare_keys.PAIRS[name][0]
    undo = at.button(key=compare_keys.CMP_UNDO_GO)
    assert "lighthouse" in undo.help
    undo.click().run()
    assert not at.exception
    assert (at.text_area(key=keys.TEXT).value, at.text_area(key=compare_keys.CMP_TEXT_B).value) == (
        "My own sentence about a lighthouse.", "My own sentence B.")
    assert at.selectbox(key=compare_keys.CMP_PAIR).value == "—"
    assert not [b for b in at.button if b.key == compare_keys.CMP_UNDO_GO]
    at.selectbox(key=compare_keys.CMP_PAIR).set_value(names[0]).run()
    at.text_area(key=compare_keys.CMP_TEXT_B).input("Edited after the pair.").run()
    assert not [b for b in at.button if b.key == compare_keys.CMP_UNDO_GO]  # undoing would lose the edit
