"""A preset on *Heads behind a prediction* never replaces what the user typed without a way back
(`mha_viz.features.prediction.page`), through AppTest on SmolLM2: the IOI preset over the user's own
sentence and corrupted text shows a notice with Undo, and one click puts the user's sentence back
in the sidebar's box, the corrupted text, answer and wrong tokens back in theirs, and the picker
on the user's own pair; a preset chosen over its own texts loses nothing and offers nothing; an
edit after the preset withdraws the offer (undoing then would lose the edit)."""

from __future__ import annotations

import pytest

from mha_viz.export import shared_controls
from mha_viz.interventions.prediction import IOI
from mha_viz.ui.kit import keys
from mha_viz.ui.shell.pair import OWN
from tests.app.helpers import open_page, shown, start_app

pytestmark = pytest.mark.model
MINE = "Alice lent her bike to Bob because Bob had lost"
MINE_CORRUPTED = "Alice lent her bike to Carol because Bob had lost"


def _page_with(text: str, corrupted: str, answer: str = ""):
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("smollm2").run()
    at.text_area(key=keys.TEXT).input(text).run()
    open_page(at, "prediction")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(corrupted).run()
    at.text_input(key=shared_controls.PRED_ANSWER).input(answer).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def _undo_offered(at) -> bool:
    return keys.PRED_UNDO_GO in [b.key for b in at.button]


def _notices(at) -> str:
    return shown(" ".join(i.value for i in at.info))


def test_undo_puts_back_the_users_own_texts_after_the_ioi_preset():
    at = _page_with(MINE, MINE_CORRUPTED, " her")
    at.selectbox(key=keys.PRED_PRESET).set_value(IOI.name).run()
    assert not at.exception and not at.error
    assert (at.text_area(key=keys.TEXT).value, at.text_area(key=shared_controls.PRED_CORRUPTED).value) == (IOI.clean,
                                                                                               IOI.corrupted)
    assert _undo_offered(at)
    assert f"replaced your sentence “{MINE}”" in _notices(at)
    at.button(key=keys.PRED_UNDO_GO).click().run()
    assert not at.exception and not at.error
    assert at.text_area(key=keys.TEXT).value == MINE  # the sidebar's box
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == MINE_CORRUPTED
    assert at.text_input(key=shared_controls.PRED_ANSWER).value == " her"
    assert at.selectbox(key=keys.PRED_PRESET).value == OWN
    assert [t.value for t in at.text] == [MINE]  # the page's clean text, from the sidebar
    assert not _undo_offered(at) and "replaced" not in _notices(at)


def test_a_preset_over_its_own_sentence_says_it_replaced_only_the_corrupted_text():
    """The sidebar already held the preset's sentence: the notice said it "replaced your sentence" with that very
    sentence (found trying the app as a new user). It names what changed, and Undo still puts that back."""
    at = _page_with(IOI.clean, MINE_CORRUPTED)
    at.selectbox(key=keys.PRED_PRESET).set_value(IOI.name).run()
    assert not at.exception and not at.error and _undo_offered(at)
    said = _notices(at)
    assert "replaced your corrupted text. **Undo** puts it back" in said or \
        "replaced your corrupted text. Undo puts it back" in said, said
    assert "your sentence" not in said
    at.button(key=keys.PRED_UNDO_GO).click().run()
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == MINE_CORRUPTED
    assert at.text_area(key=keys.TEXT).value == IOI.clean


def test_a_preset_over_its_own_texts_offers_no_undo():
    at = _page_with(IOI.clean, IOI.corrupted)
    at.selectbox(key=keys.PRED_PRESET).set_value(IOI.name).run()
    assert not at.exception and not at.error
    assert at.text_area(key=keys.TEXT).value == IOI.clean
    assert not _undo_offered(at) and "replaced" not in _notices(at)


def test_an_edit_after_the_preset_withdraws_the_undo():
    at = _page_with(MINE, MINE_CORRUPTED)
    at.selectbox(key=keys.PRED_PRESET).set_value(IOI.name).run()
    assert _undo_offered(at)
    edited = IOI.corrupted.replace("drink", "book")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(edited).run()
    assert not at.exception and not _undo_offered(at)
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == edited  # the edit stays


def test_a_second_preset_keeps_the_way_back_to_the_users_texts():
    """The user's pair, then the IOI preset, then another preset: Undo puts back the user's pair, not IOI's."""
    at = _page_with(MINE, MINE_CORRUPTED, " her")
    at.selectbox(key=keys.PRED_PRESET).set_value(IOI.name).run()
    other = next(o for o in at.selectbox(key=keys.PRED_PRESET).options if o not in (OWN, IOI.name))
    at.selectbox(key=keys.PRED_PRESET).set_value(other).run()
    assert not at.exception and not at.error
    assert at.text_area(key=keys.TEXT).value not in (MINE, IOI.clean)
    assert _undo_offered(at) and f"replaced your sentence “{MINE}”" in _notices(at)
    at.button(key=keys.PRED_UNDO_GO).click().run()
    assert not at.exception and not at.error
    assert at.text_area(key=keys.TEXT).value == MINE
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == MINE_CORRUPTED
    assert at.text_input(key=shared_controls.PRED_ANSWER).value == " her"
