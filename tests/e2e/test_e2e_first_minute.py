"""The first minute, in Chromium at 1366 × 768 (issue 54): a teacher types a sentence without
scrolling. The landing page says what to do first and its sentence box is in sight (and the Lesson panel's
hint shows "$…$" as typed). (A student in a lesson reaching Back and Next without scrolling on every page is
test_e2e_lesson's walk, in the lesson's own session.)"""

from __future__ import annotations

import pytest

from .conftest import open_app
from .readable import WINDOW, outside

pytestmark = pytest.mark.e2e


def test_the_landing_page_says_what_to_do_first_with_the_box_in_sight(browser, server):
    ui = open_app(browser, server, "first-minute")
    try:
        ui.page.set_viewport_size(WINDOW)
        assert "Start here" in ui.page.locator("[data-testid=stMain]").inner_text()
        assert not outside(ui.text_box), outside(ui.text_box)
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
