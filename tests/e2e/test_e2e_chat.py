"""A chat in a real browser (issue 88) on SmolLM2-Instruct, the bundled decoder: *Input* offers Chat once the model
has loaded; the user's question is typed, *Generate* answers it, and *Analyse the chat with this reply* makes the
answer the assistant's message: the Head view opens with each token's role along its axes (the legend names the
roles), the Line view and Token focus show them too, Head metrics says where the answer looks; nothing is cut off or
drawn over anything (readable.check), and no error shows."""

from __future__ import annotations

import pytest

from . import readable

pytestmark = pytest.mark.e2e
MAIN, SIDEBAR = "[data-testid=stMain]", "[data-testid=stSidebar]"
QUESTION = "What is the capital of France?"


def _legend(app, chart: int = 0) -> list[str]:
    return app.charts().nth(chart).locator(".legendtext").evaluate_all("els => els.map(e => e.textContent)")


def test_smollm2_answers_a_chat_with_the_roles_on_every_token_view(shared_app):
    app = shared_app
    app.choose_model("smollm2")
    app.page.locator(f"{SIDEBAR} [data-testid=stRadio]").filter(has=app.page.get_by_text("Input", exact=True)
                                                                ).wait_for()
    app.radio("Input", "Chat")
    user = app.page.locator(f"{SIDEBAR} textarea[aria-label=User]")
    user.wait_for()

    def ask() -> None:
        user.fill(QUESTION)
        user.press("Control+Enter")
    app.rerun(ask)
    app.assert_clean()

    app.goto("Generate")
    app.choose("Max new tokens", "6", scope=MAIN)
    app.click(app.page.locator(MAIN).get_by_role("button", name="Generate", exact=True))
    answer = app.page.locator(f"{MAIN} [data-testid=stCode]").first
    answer.wait_for(timeout=60_000)
    app.wait_until(lambda: bool(answer.inner_text().strip()), True, timeout_s=60)
    app.click(app.page.locator(MAIN).get_by_role("button", name="Analyse the chat with this reply", exact=True))
    app.page.locator(f"{MAIN} h1").filter(has_text="Head view").wait_for()
    app.wait_idle()
    reply = app.page.locator(f"{SIDEBAR} textarea[aria-label=\"Assistant's reply (optional)\"]")
    assert reply.input_value().strip(), "the answer became the assistant's message"
    assert app.wait_until(lambda: sorted(set(_legend(app)) & {"system", "user", "assistant"}),
                          ["assistant", "system", "user"]) == ["assistant", "system", "user"]
    captions = app.page.locator(f"{MAIN} [data-testid=stCaptionContainer]").all_inner_texts()
    assert any("each token's role in the chat" in c for c in captions), captions
    app.shot("head-view")
    assert readable.check(app, "Head view")[1] == []
    app.assert_clean()

    app.goto("Line view")
    captions = app.page.locator(f"{MAIN} [data-testid=stCaptionContainer]").all_inner_texts()
    assert any("coloured by their role in the chat" in c for c in captions), captions
    app.shot("line-view")
    app.goto("Token focus")
    app.shot("token-focus")
    legends = [set(_legend(app, i)) for i in range(app.charts().count())]
    assert any(shown >= {"system", "user", "assistant"} for shown in legends), legends
    app.goto("Head metrics")
    main = app.page.locator(MAIN)
    main.get_by_text("Where the answer looks: the chat's roles", exact=True).wait_for()
    app.shot("head-metrics")
    app.assert_clean()
