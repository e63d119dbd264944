"""The first minute, in Chromium at 1366 × 768 (issue 54): a teacher types a sentence without
scrolling, and a student in a lesson reaches Back and Next without scrolling, on every page.

The landing page says what to do first and its sentence box is in sight (and the Lesson panel's
hint shows "$…$" as typed); then a student opens the
bundled lesson from its link and visits every page the navigation offers: on each, the sentence box,
"Step k of N", Back and Next lie inside the window as it first draws (nothing is scrolled)."""

from __future__ import annotations

import pytest

from .conftest import open_app, open_link

pytestmark = pytest.mark.e2e
WINDOW = {"width": 1366, "height": 768}


def _outside(locator) -> str:
    """'' when the element lies wholly inside the window, else where it is."""
    box = locator.bounding_box()
    if box is None:
        return "not drawn"
    inside = (0 <= box["x"] and box["x"] + box["width"] <= WINDOW["width"]
              and 0 <= box["y"] and box["y"] + box["height"] <= WINDOW["height"])
    return "" if inside else f"at x={box['x']:.0f}, y={box['y']:.0f} ({box['width']:.0f} × {box['height']:.0f})"


def test_the_landing_page_says_what_to_do_first_with_the_box_in_sight(browser, server):
    ui = open_app(browser, server, "first-minute")
    try:
        ui.page.set_viewport_size(WINDOW)
        assert "Start here" in ui.page.locator("[data-testid=stMain]").inner_text()
        assert not _outside(ui.text_box), _outside(ui.text_box)
        # the Lesson panel's hint, once it is opened (closed, it sends nothing), shows its dollar signs (as $…$
        # KaTeX drew "…" alone)
        sidebar = ui.page.locator("[data-testid=stSidebar]")
        ui.rerun(sidebar.locator("summary").filter(has_text="Lesson").click)
        hint = sidebar.get_by_text("for formulas")
        hint.wait_for()
        assert "Markdown ($…$ for formulas)" in sidebar.text_content()
        ui.assert_clean()
    finally:
        ui.close()


def test_in_a_lesson_the_box_back_and_next_are_in_sight_on_every_page(browser, server):
    ui = open_link(browser, server, "first-minute-lesson", "/?lesson=attention-head-by-head",
                   ready=".st-key-lesson_bar")
    try:
        ui.page.set_viewport_size(WINDOW)
        bar = ui.page.locator(".st-key-lesson_bar")
        titles = ui.nav_titles()
        assert len(titles) >= 18, titles  # every page (Whole text is now the Head view's Links section)
        for title in titles:
            ui.goto(title)
            assert "Step 1 of 10" in bar.inner_text(), title
            where = {name: _outside(bar.get_by_role("button", name=name, exact=True)) for name in ("Back", "Next")}
            where["the sentence box"] = _outside(ui.text_box)
            assert not any(where.values()), (title, where)
        ui.assert_clean()
    finally:
        ui.close()
