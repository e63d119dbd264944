"""The sidebar's example sentences never replace what the user typed without a way back: choosing
one over the user's own text offers Undo, one click puts the text back (and the picker on "—");
choosing one over an empty box or over another example offers nothing; an edit after the example
withdraws the offer."""

from __future__ import annotations

from mha_viz.ui.kit import keys
from mha_viz.ui.shell.sidebar import EXAMPLES
from tests.app.helpers import start_app

MINE = "My own sentence about the cat that I typed myself."
FIRST, SECOND = list(EXAMPLES)[:2]


def _offered(at) -> bool:
    return keys.EXAMPLE_UNDO_GO in [b.key for b in at.button]


def _undone_after(*examples: str):
    """The user's text, then `examples` one after another: Undo is offered, and puts the user's text back."""
    at = start_app()
    at.text_area(key=keys.TEXT).input(MINE).run()
    for name in examples:
        at.selectbox(key=keys.EXAMPLE).set_value(name).run()
    assert at.text_area(key=keys.TEXT).value == EXAMPLES[examples[-1]]
    assert _offered(at)
    at.button(key=keys.EXAMPLE_UNDO_GO).click().run()
    assert not at.exception, at.exception
    assert at.text_area(key=keys.TEXT).value == MINE
    return at


def test_an_example_over_the_users_text_offers_undo_and_undo_puts_it_back():
    at = _undone_after(FIRST)
    assert at.selectbox(key=keys.EXAMPLE).value == "—"
    assert not _offered(at)


def test_an_example_over_another_example_or_an_edit_after_it_offers_nothing():
    at = start_app()
    at.text_area(key=keys.TEXT).input("").run()
    at.selectbox(key=keys.EXAMPLE).set_value(FIRST).run()
    assert not _offered(at)  # the box was empty: nothing of the user's was replaced
    at.selectbox(key=keys.EXAMPLE).set_value(SECOND).run()
    assert not _offered(at)  # one example over another
    at.text_area(key=keys.TEXT).input(MINE).run()
    at.selectbox(key=keys.EXAMPLE).set_value(FIRST).run()
    assert _offered(at)
    at.text_area(key=keys.TEXT).input(EXAMPLES[FIRST] + " edited").run()
    assert not _offered(at)  # undoing now would lose the edit
    assert at.text_area(key=keys.TEXT).value == EXAMPLES[FIRST] + " edited"


def test_a_second_example_keeps_the_way_back_to_the_users_text():
    """The user's text, then one example, then another: Undo still puts back the user's text (not the
    first example, and not nothing)."""
    _undone_after(FIRST, SECOND)
