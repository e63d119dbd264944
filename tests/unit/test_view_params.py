"""A page's own controls as link parameters (mha_viz.export.view_params), and the app's declaration of
them (mha_viz.ui.kit.page_controls): every kind round-trips through a link, every tampered value is refused
with words a user can read (never another exception), the old parameters keep their names, and every
page's controls are widget keys of the UI's key modules (tests/ui_sources.py)."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_viz import catalogue
from mha_viz.export import lesson as lessons
from mha_viz.export import link_params, shared_controls
from mha_viz.export import view_params as vp
from mha_viz.ui.kit import keys, page_controls
from tests import ui_sources

CONTROLS = {
    "flag": vp.flag("f"),
    "choice": vp.choice("c", ("tokens", "words")),
    "ints": vp.choice("b", (8, 16, 32)),
    "text": vp.choice("t"),
    "number": vp.number("n", 0, 10),
    "float": vp.number("x", 0, 1, integer=False),
    "position": vp.number("p", -1, upto=vp.TOKENS),
    "span": vp.span("s"),
    "picks": vp.picks("k", upto=vp.HEADS),
    "labels": vp.picks("l", text=True),
    "typed": vp.text("y", 12, param="typed"),
}
VALUES = {"flag": (True, "1"), "choice": ("words", "words"), "ints": (16, "16"), "text": ("A cat sat.", "A cat sat."),
          "number": (7, "7"), "float": (0.25, "0.25"), "position": (-1, "-1"), "span": ((2, 9), "2-9"),
          "picks": ([1, 3], "1,3"), "labels": (["L0H1", "L1H2"], "L0H1,L1H2"), "typed": (" Mary\nhad ", " Mary\nhad ")}
TAMPERED = {"flag": ("maybe", "is not 1 (on) or 0 (off)"), "choice": ("lines", "is not one of tokens, words"),
            "ints": ("12", "is not one of 8, 16, 32"), "number": ("11", "is not between 0 and 10"),
            "float": ("1e9", "is not a number"), "position": ("x", "is not a whole number"),
            "span": ("9-2", "start below stop"), "picks": ("1,two", "is not a whole number"),
            "text": ("a\x00b", "is not a value this control takes"),
            "typed": ("x" * 13, "has more than the 12 characters a link may carry")}


@pytest.mark.parametrize("kind", CONTROLS)
def test_every_kind_round_trips_through_its_text(kind):
    control, (value, text) = CONTROLS[kind], VALUES[kind]
    assert control.write(value) == text
    assert control.read(text) == (list(value) if kind in ("picks", "labels") else value)
    assert control.write(None) is None  # nothing chosen: nothing written


@pytest.mark.parametrize("kind", TAMPERED)
def test_a_tampered_value_is_refused_with_words(kind):
    text, says = TAMPERED[kind]
    with pytest.raises(ValueError) as refused:
        CONTROLS[kind].read(text)
    assert says in str(refused.value), str(refused.value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(CONTROLS)), st.text(max_size=300))
def test_any_text_is_a_value_or_a_value_error(kind, text):
    control = CONTROLS[kind]
    try:
        value = control.read(text)
    except ValueError as exc:
        assert str(exc)
        return
    assert control.read(control.write(value)) == value  # what is read is written back the same


def test_run_bounds_are_checked_by_within():
    assert vp.span("s").within((2, 9), 9) and not vp.span("s").within((2, 10), 9)
    assert CONTROLS["position"].within(-1, 4) and CONTROLS["position"].within(3, 4)
    assert not CONTROLS["position"].within(4, 4)
    assert CONTROLS["picks"].within([0, 3], 4) and not CONTROLS["picks"].within([0, 4], 4)
    assert CONTROLS["number"].within(99, 1)  # no run bound


def test_a_link_carries_the_declared_controls_and_refuses_the_rest():
    params = {"model": "minilm", "layer": "2", "focus_token": "10", "focus_show": "attends to", "evil": "1"}
    link, notices = link_params.parse(params, controls=page_controls.CONTROLS)
    assert link.layer == 2 and link.page == (("focus_token", "10"), ("focus_show", "attends to"))
    assert notices == ["The link has parameters this app does not know, ignored: evil."]
    assert link_params.encode(link) == {k: v for k, v in params.items() if k != "evil"}
    # a tampered value is left out with a notice; the rest of the link applies
    link, notices = link_params.parse({"model": "minilm", "focus_token": "ten"}, controls=page_controls.CONTROLS)
    assert link.model == "minilm" and link.page == ()
    assert notices == ["The link's focus_token “ten” is not a whole number: it was ignored."]
    # without the app's controls a page parameter is unknown, as before
    assert "does not know" in link_params.parse({"focus_token": "1"})[1][0]
    # a shared link leaves out a control at its page's default
    view = link_params.Link(model="minilm", page=(("focus_token", "10"), ("focus_show", "both")))
    default = link_params.Link(page=(("focus_token", "1"), ("focus_show", "both")))
    assert link_params.encode(view, default=default) == {"model": "minilm", "focus_token": "10"}


def test_the_pairs_texts_and_the_circuit_keep_the_names_links_gave_them():
    """The prediction's and the circuit's pair (corrupted, answer, wrong) and the circuit's estimate and k are
    controls of their features, carried under the parameter names links had before they were (old links open):
    typed text kept as typed (a token's leading space, a newline), the estimate checked, an over-long text left out
    with a notice."""
    params = {"corrupted": "When Mary and John went\nto", "answer": " Mary", "wrong": " John", "circuit": "eap",
              "k": "9"}
    link, notices = link_params.parse(params, controls=page_controls.CONTROLS)
    assert not notices and dict(link.page) == params
    assert link_params.encode(link) == params
    assert page_controls.CONTROLS["answer"].name == shared_controls.PRED_ANSWER
    assert {c.link_name for c in page_controls.BY_PAGE["circuit"]} >= set(params)
    assert {c.link_name for c in page_controls.BY_PAGE["prediction"]} == {"corrupted", "answer", "wrong"}
    link, notices = link_params.parse({"circuit": "magic", "answer": "x" * 101}, controls=page_controls.CONTROLS)
    assert link.page == () and len(notices) == 2 and "is not one of eap-ig, eap" in notices[0], notices
    assert "more than the 100 characters" in notices[1]


def test_every_page_declares_its_controls_once_under_widget_keys_that_keep_the_old_names_free():
    assert tuple(page_controls.BY_PAGE) == catalogue.ids()  # every page, in the app's order
    declared: dict[str, vp.Control] = {}
    for controls in page_controls.BY_PAGE.values():
        assert len({c.name for c in controls}) == len(controls), "a control is declared twice on one page"
        for c in controls:  # pages that share a control (the walkthrough's window) share its one declaration
            assert declared.setdefault(c.name, c) is c, f"{c.name} is declared twice, differently"
    assert page_controls.WALK_START in page_controls.BY_PAGE["teaching"] + page_controls.BY_PAGE["qk"]
    names = list(declared)
    key_values = set(ui_sources.key_names().values())
    assert set(names) <= key_values | set(page_controls.DERIVED), set(names) - key_values
    assert not set(names) & set(link_params.PARAMS + link_params.LESSON + link_params.EMBED)
    carried = [c.link_name for c in declared.values()]  # a parameter names one control, none of the link's own
    assert len(set(carried)) == len(carried) and not set(carried) & set(link_params.PARAMS + link_params.LESSON)
    assert all(not n.startswith("_") for n in names)  # widgets the user sets, not the app's bookkeeping


def test_a_lesson_step_keeps_its_page_controls_through_its_file_and_a_link():
    view = {"model": "minilm", "text": "The cat sat.", "layer": "0", "head": "1", "dtype": "auto",
            "focus_token": "3", "focus_level": "words"}
    lesson = lessons.Lesson(title="T", steps=(lessons.step("focus", view, "The row of *sat*."),))
    read = lessons.read_lesson(lessons.lesson_json(lesson), pages=catalogue.ids(), controls=page_controls.CONTROLS)
    assert read == lesson and read.steps[0].link.page == (("focus_token", "3"), ("focus_level", "words"))
    assert lessons.read_lesson(lessons.unpack(lessons.pack(lesson)), pages=catalogue.ids(),
                               controls=page_controls.CONTROLS) == lesson
    tampered = lessons.lesson_json(lesson).replace('"focus_level": "words"', '"focus_level": "lines"')
    with pytest.raises(lessons.LessonError, match="Step 1's view: The link's focus_level “lines” is not one of"):
        lessons.read_lesson(tampered, pages=catalogue.ids(), controls=page_controls.CONTROLS)
    # a version-1 lesson without page controls reads as before
    bundled = lessons.read_lesson(lessons.bundled()["attention-head-by-head"], pages=catalogue.ids(),
                                  controls=page_controls.CONTROLS)
    # its prediction step's pair, once the link's own parameters, is that page's controls, under the same names
    assert all(step.link.page == () for step in bundled.steps if step.page != "prediction")
    assert {name for step in bundled.steps if step.page == "prediction" for name, _ in step.link.page} == {
        "corrupted", "answer", "wrong"}


INPUTS = {"selectbox", "radio", "toggle", "checkbox", "slider", "select_slider", "number_input", "multiselect", "pills",
          "segmented_control", "text_input", "text_area", "file_uploader", "color_picker", "date_input", "time_input"}


def test_every_input_of_the_ui_is_a_page_control_or_left_out_with_a_reason():
    """A page's new input that shapes its view is one of its feature's controls (links and lessons then carry it),
    or a local one (`vp.local`, with why not); the sidebar's and the kit's are in page_controls.KIT_NOT_CARRIED."""
    drawn = {}
    for path in ui_sources.MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in INPUTS:
                for kw in node.keywords:
                    if kw.arg == "key" and ui_sources.key_value(kw.value) is not None:
                        drawn[ui_sources.key_value(kw.value)] = f"{path.name}: {ast.unparse(kw.value)}"
    assert len(drawn) > 50
    carried = {c.name for c in page_controls.CONTROLS.values()}  # by session key
    missing = sorted(where for value, where in drawn.items()
                     if value not in carried and value not in page_controls.NOT_CARRIED)
    assert not missing, f"declare these in page_controls.BY_PAGE, or in NOT_CARRIED with why: {missing}"
    assert not page_controls.NOT_CARRIED & carried
    local = [c for f in catalogue.features() for c in f.controls if not c.carried]
    assert len(local) > 20 and all(c.kind == vp.LOCAL and len(c.why) > 10 for c in local)
    assert page_controls.NOT_CARRIED == page_controls.KIT_NOT_CARRIED | {c.name for c in local}
    # the kit lists no feature's input: each is its feature's own, flagged local there
    kit_keys = {v for n, v in vars(keys).items() if n.isupper() and isinstance(v, str)}
    assert page_controls.KIT_NOT_CARRIED <= kit_keys


def test_a_local_control_says_why_and_is_not_carried():
    upload, other = vp.local("uploads: no link carries a file", "an_upload", "another")
    assert (upload.name, other.name) == ("an_upload", "another") and upload.why == other.why
    assert not upload.carried and upload.why.startswith("uploads") and vp.flag("x").carried
    with pytest.raises(ValueError, match="say why"):
        vp.local("", "an_upload")
