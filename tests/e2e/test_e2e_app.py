"""The app in a real browser: typed text becomes the heatmap's axis labels, the model, layer and
head pickers change what is drawn, and every page renders without an error, for both models.

The walk over every page on MiniLM also checks that every chart is readable at 1280 and 1366 wide
(tests/e2e/readable.py: no text of a chart meets another or a plot; issue 54), on the issue's sentence, and so
are the states the issue found overlaps in beyond a page as a new user finds it: Token focus with its summaries,
every part of Teaching, and on SmolLM2 (whose *Why here?* bars name parts such as "L16 MLP") the Head view and
Queries and keys. (Those states were test_e2e_readable's own walk until stop 87; one walk now does both, issue
53: the suite's time.)

The tests share one tab (a page load costs seconds); each starts by putting the sidebar back to
MiniLM with Hugging Face's attention, on the page it needs.
"""

from __future__ import annotations

import urllib.parse

import pytest

from .readable import HEIGHT, WIDTHS, both_widths

pytestmark = pytest.mark.e2e

# at least these pages, each with what it must show (any other page: its title, and no error)
PAGES = ("Model view", "Head view", "Head metrics", "Head similarity", "Compare heads", "Across layers",
         "Model facts")
MINILM_TOKENS = ["[CLS]", "dogs", "chase", "cats", ".", "[SEP]"]  # all-MiniLM-L6-v2, uncased WordPiece
OUR_MHA = "Compute with our MHA"
MAIN = "[data-testid=stMain]"
# the pages the walk on SmolLM2 checks for readable charts (on MiniLM: every page)
SMOLLM2_READABLE = ("Head view", "Queries and keys")


def _ready(app, page: str):
    """MiniLM, Hugging Face's attention, on `page`."""
    if not app.model_title().startswith("all-MiniLM"):
        app.choose_model("minilm")
    if app.switch(OUR_MHA).is_checked():
        app.click(app.page.locator("[data-testid=stSidebar]").get_by_text(OUR_MHA, exact=True))
    if app.heading() != page:
        app.goto(page)
    return app


def test_typed_sentence_gives_heatmap_of_its_tokens(shared_app, run_of):
    app = _ready(shared_app, "Head view")
    app.set_text("Dogs chase cats.")
    assert app.wait_until(app.ticks, MINILM_TOKENS) == MINILM_TOKENS
    assert app.ticks("y") == MINILM_TOKENS  # queries top to bottom, in text order
    assert app.text_box.input_value() == "Dogs chase cats."
    assert app.chart_title().startswith("Layer ")
    app.shot("dogs")

    # repeated words stay separate columns (Plotly would merge equal category labels)
    text = "The cat saw the other cat, and the cat ran."
    expected = run_of("minilm", text).tokens
    assert expected.count("cat") == 3
    app.set_text(text)
    assert app.wait_until(app.ticks, expected) == expected
    assert app.ticks("y") == expected
    app.assert_clean()


def test_model_layer_and_head_pickers(shared_app, run_of):
    app, text = _ready(shared_app, "Head view"), "Birds sing at dawn."
    app.choose("Layer", "0", scope="[data-testid=stMain]")
    app.choose("Head", "0", scope="[data-testid=stMain]")
    app.set_text(text)
    minilm_tokens = run_of("minilm", text).tokens
    assert app.wait_until(app.ticks, minilm_tokens) == minilm_tokens

    app.choose_model("smollm2")  # a causal decoder: no [CLS]/[SEP], byte-level pieces
    smol_tokens = run_of("smollm2", text).tokens
    assert smol_tokens != minilm_tokens and "[CLS]" not in smol_tokens
    assert app.wait_until(app.ticks, smol_tokens) == smol_tokens
    assert app.ticks("y") == smol_tokens
    assert app.chart_title().startswith("Layer 0, head 0, KV head 0")  # grouped-query attention
    app.choose("Layer", "29", scope="[data-testid=stMain]")
    app.choose("Head", "8", scope="[data-testid=stMain]")
    assert app.wait_until(app.chart_title, "Layer 29, head 8, KV head 2") == \
        "Layer 29, head 8, KV head 2"
    app.shot("smollm2-L29-H8")
    app.assert_clean()

    app.choose_model("minilm")  # 6 layers, 12 heads: the layer is clamped to the last one
    assert app.wait_until(app.ticks, minilm_tokens) == minilm_tokens
    assert app.chart_title() == "Layer 5, head 8"
    app.choose("Head", "3", scope="[data-testid=stMain]")
    assert app.wait_until(app.chart_title, "Layer 5, head 3") == "Layer 5, head 3"
    assert app.text_box.input_value() == text
    app.assert_clean()


def test_model_view_opens_the_chosen_head(shared_app):
    app = _ready(shared_app, "Model view")
    caption = app.page.locator("[data-testid=stMain] [data-testid=stCaptionContainer]").first
    assert "6 layers × 12 heads" in caption.inner_text()
    app.choose("Layer", "4", scope="[data-testid=stMain]")
    app.choose("Head", "7", scope="[data-testid=stMain]")
    app.click(app.page.get_by_role("button", name="Open in head view"))
    app.page.locator("[data-testid=stMain] h1").filter(has_text="Head view").wait_for()
    app.wait_idle()
    assert urllib.parse.urlsplit(app.page.url).path.endswith("/head_view")
    assert app.chart_title() == "Layer 4, head 7"
    assert app.ticks()[0] == "[CLS]"
    app.assert_clean()


def _check_page(app, title: str, tokens: list[str], layers: int, heads: int) -> None:
    """What each page must show for a short text (beyond: no error, no exception)."""
    main = app.page.locator("[data-testid=stMain]")
    if title == "Model view":
        assert app.charts().count() >= 1
        caption = main.locator("[data-testid=stCaptionContainer]").first.inner_text()
        assert f"{layers} layers × {heads} heads" in caption
    elif title == "Head view":
        assert app.ticks() == tokens and app.ticks("y") == tokens
    elif title == "Head metrics":
        assert app.charts().count() >= 1 and main.locator("[data-testid=stDataFrame]").count() >= 1
    elif title == "Head similarity":
        assert app.charts().count() >= 3  # matrix, map of heads, diversity per layer
    elif title == "Compare heads":
        assert app.charts().count() == 2  # first and last head by default
        # side by side, at 1280 wide Plotly labels every other key of a sentence (the walk's width alternates)
        for chart in (0, 1):
            assert app.ticks("y", chart=chart) == tokens
            assert _labels_some_of(app.ticks("x", chart=chart), tokens)
        assert app.chart_title(1).startswith(f"Layer {layers - 1}, head {heads - 1}")
    elif title == "Across layers":
        assert app.ticks() == tokens  # rollout to the last layer, tokens on both axes
        assert app.ticks("y") == tokens
    elif title == "Model facts":
        facts = app.facts()
        assert facts["layers"] == str(layers) and facts["attention heads per layer"] == str(heads), facts


def _labels_some_of(shown: list[str], tokens: list[str]) -> bool:
    """Whether the labels `shown` are the first token and others of `tokens`, in their order (an axis Plotly
    thinned)."""
    rest = iter(tokens)
    return bool(shown) and shown[0] == tokens[0] and all(label in rest for label in shown)


@pytest.mark.parametrize("model,layers,heads,text", [
    ("minilm", 6, 12, "The animal didn't cross the street because it was too tired."),
    ("smollm2", 30, 9, "Heads attend to the words before them."),
], ids=["minilm", "smollm2"])
def test_every_page_renders(shared_app, run_of, model, layers, heads, text):
    app = _ready(shared_app, "Model view")
    app.set_text(text)
    if model != "minilm":
        app.choose_model(model)
    tokens = run_of(model, text).tokens
    titles = app.nav_titles()
    assert set(PAGES) <= set(titles) and titles[0] == "Model view", titles
    # every chart of every page at both widths on MiniLM, as a new user finds it, and the states of `_states`
    readable = set(titles) if model == "minilm" else set(SMOLLM2_READABLE)
    size, widths, checked, clashes = app.page.viewport_size, list(WIDTHS), 0, []
    app.page.set_viewport_size({"width": widths[0], "height": HEIGHT})

    def check(where: str) -> None:
        nonlocal checked, clashes
        n, found = both_widths(app, f"{where} on {model}", widths)
        checked, clashes = checked + n, clashes + found
    try:
        for title in titles[1:] + titles[:1]:  # ends on the model view, which the app opened on
            app.goto(title)
            if title in PAGES:
                assert app.heading() == title
            else:  # a page added since: it has a title of its own
                assert app.heading()
            app.shot(title)
            app.assert_clean()
            _check_page(app, title, tokens, layers, heads)
            if title in readable:
                check(title)
                _states(app, title, check)
    finally:
        app.page.set_viewport_size(size)
    assert app.text_box.input_value() == text
    assert checked >= (40 if model == "minilm" else 2), checked
    assert not clashes, "\n".join(clashes)


def _states(app, title: str, check) -> None:
    """The states of page `title` the issue found overlaps in, beyond the page as it opens, each `check`ed: the Head
    view with *Why here?* opened (a box built only while open), Token focus with its summaries, and every other part
    of Teaching."""
    if title == "Head view":
        closed = app.page.locator(f"{MAIN} [data-testid=stExpander] details:not([open]) > summary").filter(
            has_text="Why here?")
        if closed.count():  # the tab's session keeps it open once opened (the walk on another model)
            app.rerun(closed.click)
        assert app.wait_until(lambda: app.page.locator(MAIN).get_by_text("share of the score").count() > 0, True)
        check("Head view with Why here?")
    elif title == "Token focus":
        _switch_on(app, "Summaries")
        check("Token focus with summaries")
    elif title.startswith("Teaching"):
        parts = app.page.locator(f"{MAIN} [data-testid=stButtonGroup] button")
        for i in range(1, parts.count()):  # the first is the part the page opened on
            app.click(parts.nth(i))
            check(f"Teaching, part {i + 1}")


def _switch_on(app, label: str) -> None:
    switch = app.page.locator(f"{MAIN} input[role=switch][aria-label={label!r}]")
    assert switch.count(), f"no switch {label!r} on the page"
    if not switch.is_checked():  # its label takes the click
        app.click(app.page.locator(f"{MAIN} [data-testid=stCheckbox] label").filter(
            has=app.page.locator(f"input[role=switch][aria-label={label!r}]")))
    assert switch.is_checked(), f"the switch {label!r} did not turn on"


def test_our_mha_toggle(shared_app):
    app = _ready(shared_app, "Model view")
    app.click(app.page.locator("[data-testid=stSidebar]").get_by_text(OUR_MHA, exact=True))
    assert app.switch(OUR_MHA).is_checked()
    app.goto("Model facts")
    facts = app.facts()
    assert facts["attention implementation"].startswith("ours"), facts
    assert facts["model"] == "minilm", facts
    app.goto("Head view")
    app.set_text("Dogs chase cats, our way.")
    expected = MINILM_TOKENS[:4] + [",", "our", "way", ".", "[SEP]"]
    assert app.wait_until(app.ticks, expected) == expected
    app.assert_clean()
