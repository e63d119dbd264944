"""Charts a person can read, in Chromium at 1280 and 1366 wide (issue 54; the check is tests/e2e/readable.py):
the states the issue found overlaps in, beyond every page as a new user finds it (test_e2e_app's walk over
every page on MiniLM checks those): Token focus with its summaries, every part of Teaching, and on SmolLM2 the
Head view and Queries and keys."""

from __future__ import annotations

import pytest

from .readable import HEIGHT, WIDTHS, both_widths

pytestmark = [pytest.mark.e2e, pytest.mark.model]
MAIN = "[data-testid=stMain]"


def _switch_on(app, label: str) -> None:
    switch = app.page.locator(f"{MAIN} input[role=switch][aria-label={label!r}]")
    if not switch.is_checked():  # its label takes the click
        app.click(app.page.locator(f"{MAIN} [data-testid=stCheckbox] label").filter(
            has=app.page.locator(f"input[role=switch][aria-label={label!r}]")))


def test_the_states_the_issue_found_overlaps_in_are_readable(shared_app):
    """Token focus with its summaries, every part of Teaching, and on SmolLM2 (whose *Why here?* bars
    name parts such as "L16 MLP") the Head view and Queries and keys."""
    app = shared_app
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    app.set_text("The animal didn't cross the street because it was too tired.")
    checked, found = 0, []
    widths = list(WIDTHS)
    app.page.set_viewport_size({"width": widths[0], "height": HEIGHT})

    def check(where: str) -> None:
        nonlocal checked, found
        n, clashes = both_widths(app, where, widths)
        checked, found = checked + n, found + clashes
    app.goto("Token focus")
    _switch_on(app, "Summaries")
    check("Token focus with summaries")
    app.goto("Teaching: step by step")
    parts = app.page.locator(f"{MAIN} [data-testid=stButtonGroup] button")
    for i in range(parts.count()):
        app.click(parts.nth(i))
        check(f"Teaching, part {i + 1}")
    app.choose_model("smollm2")
    app.set_text("When Mary and John went to the store, John gave a drink to")
    for title in ("Head view", "Queries and keys"):
        app.goto(title)
        check(f"{title} on SmolLM2")
    assert checked >= 20, checked
    assert not found, "\n".join(found)
