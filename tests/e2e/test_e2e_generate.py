"""The Generate page in a real browser, on toy-induction (a tiny decoder: "k d m x b f k d m"
continues "x b f"): generate, step through with the slider, then *Analyse prompt + generation*
opens the head view on the whole sequence, generated tokens included."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.e2e
PROMPT = "k d m x b f k d m"
PROMPT_TOKENS = ["<bos>", *PROMPT.split()]
MAIN = "[data-testid=stMain]"


def _button(app, name: str):
    return app.page.locator(MAIN).get_by_role("button", name=name, exact=True)


def _code(app) -> str:
    blocks = app.page.locator(f"{MAIN} [data-testid=stCode]")
    return blocks.first.inner_text().strip() if blocks.count() else ""


def test_generate_step_through_and_analyse(shared_app):
    app = shared_app
    app.choose_model("toy-induction")
    app.set_text(PROMPT)
    app.goto("Generate")
    assert app.heading() == "Generate"
    app.choose("Max new tokens", "3", scope=MAIN)
    app.click(_button(app, "Generate"))
    assert app.wait_until(lambda: _code(app), "x b f") == "x b f"
    app.assert_clean()

    # step 1: the prompt is the context; the bars are the first step's
    assert app.chart_title(0).startswith("Step 1:")
    assert app.ticks("x", chart=1) == PROMPT_TOKENS
    thumb = app.page.locator(f"{MAIN} [data-testid=stSlider] input[type=range]").first
    thumb.focus()
    for _ in range(2):
        app.rerun(lambda: thumb.press("ArrowRight"))
    assert app.wait_until(lambda: app.chart_title(0).split(":")[0], "Step 3") == "Step 3"
    # step 3 was chosen by the generated "b": the context holds the generated x and b
    assert app.ticks("x", chart=1) == PROMPT_TOKENS + ["x", "b"]
    assert thumb.input_value() == "3"
    app.shot("step-3")
    app.assert_clean()

    app.click(_button(app, "Analyse prompt + generation"))
    app.page.locator(f"{MAIN} h1").filter(has_text="Head view").wait_for()
    app.wait_idle()
    expected = PROMPT_TOKENS + ["x", "b", "f"]
    assert app.wait_until(app.ticks, expected) == expected  # the generated tokens are in the run
    assert app.text_box.input_value() == PROMPT + " x b f"
    app.shot("head-view")
    app.assert_clean()
