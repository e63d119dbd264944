"""A student follows a lesson in a real browser: the teacher's link opens the bundled lesson on its
first step; Next goes through three steps, each with its note above the view, its page, its text
in the box and "Step k of N" in the lesson's bar above the view, and the address names the step (a
reload stays there). Then, in a window of 1366 × 768 (issue 54's first minute), the student visits every page the
navigation offers: on each, the sentence box, "Step 3 of N", Back and Next lie inside the window as it first
draws (nothing is scrolled)."""

from __future__ import annotations

import urllib.parse

import pytest

from mha_viz import catalogue
from mha_viz.export import lesson as lessons
from tests.helpers import HEADINGS

from .conftest import open_link
from .readable import WINDOW, outside

pytestmark = pytest.mark.e2e

BUNDLED = "attention-head-by-head"


def _first_words(note: str, n: int = 6) -> str:
    """The note's first words as the browser shows them (Markdown's emphasis and code marks dropped)."""
    plain = note.replace("*", "").replace("`", "").replace("_", "").split("$")[0]
    return " ".join(plain.split()[:n])


def test_a_student_steps_through_a_lesson_from_its_link(browser, server):
    lesson = lessons.read_lesson(lessons.bundled()[BUNDLED], pages=catalogue.ids())
    ui = open_link(browser, server, "lesson", f"/?lesson={BUNDLED}", ready=".st-key-lesson_note_box")
    try:
        ui.page.set_viewport_size(WINDOW)
        bar = ui.page.locator(".st-key-lesson_bar")
        note_box = ui.page.locator(".st-key-lesson_note_box")
        for k, step in enumerate(lesson.steps[:3]):
            assert ui.wait_until(ui.heading, HEADINGS[step.page]) == HEADINGS[step.page]
            assert _first_words(step.note) in note_box.inner_text().replace("\n", " ")
            assert f"Step {k + 1} of {len(lesson.steps)}" in bar.inner_text()
            assert ui.text_box.input_value() == step.link.text
            query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(ui.page.url).query))
            assert (query.get("lesson"), query.get("step")) == (BUNDLED, str(k + 1))
            assert query.get("model") == step.link.model
            ui.assert_clean()
            ui.shot(f"step-{k + 1}")
            if k < 2:
                ui.click(bar.get_by_role("button", name="Next"))
        ui.page.reload(wait_until="domcontentloaded")  # a new session on the address: the same step
        note_box.wait_for()
        ui.wait_idle()
        assert ui.wait_until(ui.heading, HEADINGS[lesson.steps[2].page]) == HEADINGS[lesson.steps[2].page]
        assert "Step 3 of" in bar.inner_text()

        titles = ui.nav_titles()
        assert len(titles) >= 18, titles  # every page (Whole text is now the Head view's Links section)
        for title in titles:
            ui.goto(title)
            assert f"Step 3 of {len(lesson.steps)}" in bar.inner_text(), title
            where = {name: outside(bar.get_by_role("button", name=name, exact=True)) for name in ("Back", "Next")}
            where["the sentence box"] = outside(ui.text_box)
            assert not any(where.values()), (title, where)
        ui.assert_clean()
    finally:
        ui.close()
