"""Share a view by link, in a real browser: a link to /head_view with a model, text, layer and head
opens that head of that text's tokens, the sidebar's *Copy link* copies the same link back, and a
bad link (a layer past the model, a head that is no number, an unknown parameter, script in the
text) opens with a notice: no exception, no dialog, the script shown as text.

Each test opens its own tab on its link (a link is read on a session's first run only).
"""

from __future__ import annotations

import urllib.parse

import pytest

from mha_viz.drawing import heads as head_figures
from mha_viz.export import link_params as links

from .conftest import open_link

pytestmark = pytest.mark.e2e

TEXT = "Dogs chase cats in the garden."


def _open(browser, server: str, name: str, link: str):
    """A new session on `link`, allowed to use the clipboard (the Share box's Copy link)."""
    ui = open_link(browser, server, name, link)
    ui.page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    return ui


def _query(ui) -> dict[str, str]:
    return dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(ui.page.url).query))


def test_a_link_opens_the_head_view_on_its_text_and_head(browser, server, run_of):
    params = {"model": "minilm", "text": TEXT, "layer": "2", "head": "3"}
    ui = _open(browser, server, "link-head", "/head_view?" + urllib.parse.urlencode(params))
    try:
        run = run_of("minilm", TEXT)
        assert ui.heading() == "Head view"
        assert ui.wait_until(ui.ticks, run.tokens) == run.tokens
        assert ui.text_box.input_value() == TEXT
        expected = head_figures.head_heatmap(run, 2, 3).layout.title.text  # the title names layer 2, head 3
        assert expected.startswith("Layer 2, head 3")
        assert ui.chart_title() == expected
        assert not ui.alerts("Warning")
        assert ui.page.url.startswith(server + "/head_view?") and _query(ui) == params
        ui.shot("head")

        # the Share box's Copy link, once the box is opened: the link to this view, the server's own address first
        share = ui.page.locator("[data-testid=stSidebar] [data-testid=stCode]")
        assert share.count() == 0  # closed, the box sends no link
        ui.rerun(ui.page.locator("[data-testid=stSidebar] summary").filter(has_text="Share").click)  # a lazy box
        share.wait_for()
        link = share.locator("code").inner_text().strip()
        assert link == links.url(server, "head_view", params)
        share.hover()  # the copy button shows under the pointer (the box's rerun is over: nothing redraws it)
        share.locator("button").first.click()
        assert ui.wait_until(lambda: ui.page.evaluate("navigator.clipboard.readText()"), link) == link

        # the URL follows the view
        ui.choose("Head", "7", scope="[data-testid=stMain]")
        assert ui.wait_until(lambda: _query(ui).get("head"), "7") == "7"
        assert ui.wait_until(ui.chart_title, "Layer 2, head 7") == "Layer 2, head 7"
        # another page (the navigation clears the query; the app writes it back): the same view's link
        nav = ui.nav_link("Model view")
        ui.rerun(nav.click)
        ui.page.wait_for_url(lambda u: urllib.parse.urlsplit(u).path == "/" and "model=" in u)
        assert _query(ui) == {**params, "head": "7"}
        assert share.locator("code").inner_text().strip() == links.url(server, "", {**params, "head": "7"})
        ui.assert_clean()
    finally:
        ui.close()


def test_a_bad_link_opens_with_a_notice(browser, server, run_of):
    script = "<script>alert(1)</script>"
    ui = _open(browser, server, "link-bad", f"/head_view?model=minilm&layer=99&head=x&evil=1&text={script}")
    try:
        notices = " ".join(ui.alerts("Warning"))
        assert "layer 99" in notices and "head “x”" in notices and "evil" in notices, notices
        assert ui.heading() == "Head view"
        assert ui.text_box.input_value() == script  # the script is the text, shown as text
        tokens = run_of("minilm", script).tokens
        assert ui.wait_until(ui.ticks, tokens) == tokens
        assert ui.chart_title().startswith("Layer 0, head 0")  # the bad layer and head were ignored
        assert ui.page.locator("[data-testid=stApp] script").count() == 0
        assert ui.wait_until(lambda: "evil" in _query(ui) or "layer" in _query(ui), False) is False
        assert _query(ui) == {"model": "minilm", "text": script}  # the URL says what is shown
        ui.shot("bad")
        ui.assert_clean()  # no exception, no error, no dialog, no JavaScript error
    finally:
        ui.close()
