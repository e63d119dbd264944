"""The Generate page in a real browser, on toy-induction (a tiny decoder: "k d m x b f k d m"
continues "x b f"): generate, step through with the slider, then *Analyse prompt + generation*
opens the head view on the whole sequence, generated tokens included; and on smollm2, *Stop*
halfway keeps the tokens written so far."""

from __future__ import annotations

import re

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


@pytest.mark.model  # smollm2: slow enough on a CPU to be stopped halfway
def test_stop_keeps_the_tokens_so_far(shared_app):
    app = shared_app
    app.choose_model("smollm2")
    app.set_text("Once upon a time")
    app.goto("Generate")
    app.choose("Max new tokens", "400", scope=MAIN)
    app.page.locator(MAIN).get_by_role("button", name="Generate", exact=True).click()
    stop = _button(app, "Stop")
    # the tokens stream in as they are written: stop once a few are there
    app.page.wait_for_function("""() => {
        const code = document.querySelector('[data-testid=stMain] [data-testid=stCode]');
        return code && code.innerText.trim().split(/\\s+/).length >= 7;
    }""", timeout=120_000)
    assert stop.is_enabled()
    app.click(stop)
    app.page.locator("[data-testid=stAlertContentWarning]").filter(has_text="Stopped after").wait_for()
    [notice] = [w for w in app.alerts("Warning") if "Stopped after" in w]
    k = int(re.search(r"Stopped after (\d+) tokens?", notice).group(1))
    assert 1 <= k < 400
    assert _button(app, "Analyse prompt + generation").is_visible()  # the partial generation is kept
    assert not _button(app, "Stop").is_enabled()
    app.shot("stopped")
    app.assert_clean()
