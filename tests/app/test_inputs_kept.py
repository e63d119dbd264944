"""Every input the user sets keeps its value across page switches and runs that end early
(st.switch_page), with nothing but Streamlit's persist_state: the sidebar's model, text, token
limit and hidden tokens, a page's own controls after a visit to another page, the Export box."""

from __future__ import annotations

from mha_viz.export import shared_controls
from mha_viz.features.lines import controls as lines_keys
from mha_viz.features.lines import figures as line_figures
from mha_viz.ui.kit import keys

from .helpers import export_box, open_page, start_app

TEXT = "Seven quiet otters drifted past the old mill at dawn."


def test_sidebar_page_controls_and_export_survive_page_switches():
    at = start_app()
    at.text_area(key=keys.TEXT).input(TEXT).run()
    at.number_input(key=keys.TOKEN_LIMIT).set_value(40).run()
    at.checkbox(key=keys.HIDE_SPECIAL).check().run()
    export_box(at).radio(key=keys.EXPORT_FORMAT).set_value("svg").run()
    export_box(at, False)  # closed, its inputs are not drawn: their values stay
    open_page(at, "lines")
    at.slider(key=lines_keys.LINE_THRESHOLD).set_value(0.35).run()
    at.radio(key=lines_keys.LINE_SIDE).set_value(line_figures.KEY).run()
    open_page(at, "focus")
    at.radio(key=shared_controls.FOCUS_LEVEL).set_value("words").run()
    for page in ("model_facts", "head_view", "lines"):  # away (no line controls drawn), then back
        open_page(at, page)
    assert not at.exception, at.exception
    assert at.text_area(key=keys.TEXT).value == TEXT
    assert at.number_input(key=keys.TOKEN_LIMIT).value == 40
    assert at.checkbox(key=keys.HIDE_SPECIAL).value is True
    assert export_box(at).radio(key=keys.EXPORT_FORMAT).value == "svg"
    assert at.slider(key=lines_keys.LINE_THRESHOLD).value == 0.35
    assert at.radio(key=lines_keys.LINE_SIDE).value == line_figures.KEY
    open_page(at, "focus")
    assert at.radio(key=shared_controls.FOCUS_LEVEL).value == "words"
    # the views computed on what was kept: the text's tokens, [CLS]/[SEP] hidden
    run = at.session_state[keys.CURRENT].run
    assert run.tokens[:2] == ["seven", "quiet"] and "[SEP]" not in run.tokens, run.tokens
