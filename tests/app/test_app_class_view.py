"""What a room of students sees, through AppTest: messages carry the Material icons Streamlit ships
(no emoji, which a machine without an emoji font draws as a box) and show their Markdown rendered,
not as typed (no asterisks around "Show attention as: contributions")."""

from __future__ import annotations

import pytest
from streamlit.string_util import validate_material_icon

from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.ui.kit import keys
from tests.app.helpers import frame, heatmap_tokens, open_box, open_page, start_app

pytestmark = pytest.mark.model


def _alerts(at) -> list:
    return [*at.info, *at.warning, *at.error, *at.success]


def test_messages_carry_material_icons_and_render_their_markdown():
    at = start_app()  # minilm, the default: an encoder, which the prediction and generate pages refuse
    seen = {}
    for page in ("prediction", "generate", "examples"):
        open_page(at, page)
        assert not at.exception, at.exception
        seen[page] = _alerts(at)
    alerts = [a for shown in seen.values() for a in shown]
    assert all(seen.values()), {p: len(a) for p, a in seen.items()}  # every page said something
    icons = [a.proto.icon for a in alerts]
    assert all(i.startswith(":material/") and validate_material_icon(i) for i in icons), icons
    refusal = next(a.value for a in seen["prediction"] if "is an encoder" in a.value)
    assert "*Show attention as: contributions*" in refusal  # emphasis, as Markdown renders it
    for alert in alerts:  # an escaped asterisk or backtick is one the student sees
        assert "\\*" not in alert.value and "\\`" not in alert.value, alert.value


def test_a_token_with_a_leading_space_reads_apart_from_the_same_word_without():
    """SmolLM2 reads the first "Mary" and the last " Mary" as two tokens: every label of the head view
    (the heatmap's axes, the table, the query and key pickers) tells them apart by a shown space."""
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("smollm2").run()
    at.text_area(key=keys.TEXT).input("Mary and John went out. John gave the book to Mary").run()
    open_page(at, "head_view")
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    tokens = heatmap_tokens(at)
    assert tokens[0] == "Mary" and tokens[-1] == "␣Mary", tokens
    assert "␣John" in tokens and "John" not in tokens  # both Johns follow a space
    table = frame(open_box(at, head_view_keys.STRONGEST_OPEN), "attends most to")  # built only while open
    assert list(table["query"]) == tokens
    open_box(at, head_view_keys.WHY_OPEN)  # *Why here?*'s query and key pickers: a box built only while open
    picker = next(s for s in at.selectbox if any(str(o).endswith(": ␣Mary") for o in s.options))
    assert "0: Mary" in picker.options, picker.options


def test_the_model_picker_names_each_model_briefly_and_says_the_rest_below():
    at = start_app()
    picker = at.selectbox(key=keys.MODEL_CHOICE)
    titles = list(picker.options)
    assert titles[:3] == ["all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "toy-induction"], titles
    assert max(map(len, titles)) <= 24, titles  # what the sidebar shows whole (the e2e tier measures it)
    picker.set_value("toy-induction").run()
    assert not at.exception
    below = [c.value for c in at.sidebar.caption]
    assert any("a previous-token and an induction head" in c for c in below), below
