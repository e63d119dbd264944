"""Lessons and links keep every choice (issue 54): a lesson built on every page with a choice of each
page's own controls that is not the default, downloaded as a link and followed in a fresh session,
opens every step on its choices; a link shared from a page reopens them; a tampered value falls
back to the page's default with a notice. A lesson naming a model this server cannot load or does
not offer is refused, naming the model, and what the student had stays."""

from __future__ import annotations

import pytest

from mha_viz.export import lesson as lessons
from mha_viz.export import shared_controls
from mha_viz.features.ablation import controls as ablation_keys
from mha_viz.features.across_layers import controls as across_layers_keys
from mha_viz.features.compare import controls as compare_keys
from mha_viz.features.compare_heads import controls as compare_heads_keys
from mha_viz.features.composition import controls as composition_keys
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.examples import controls as examples_keys
from mha_viz.features.focus import controls as focus_keys
from mha_viz.features.generate import controls as generate_keys
from mha_viz.features.head_metrics import controls as head_metrics_keys
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.features.lines import controls as lines_keys
from mha_viz.features.model_view import controls as model_view_keys
from mha_viz.features.qk import controls as qk_keys
from mha_viz.features.retrieval import controls as retrieval_keys
from mha_viz.features.similarity import controls as similarity_keys
from mha_viz.features.task import controls as task_keys
from mha_viz.features.teaching import controls as teaching_keys
from mha_viz.ui.kit import keys
from mha_viz.views import focus
from tests.app.helpers import app_page_ids, app_test, lesson_panel, open_page, shown, start_app
from tests.helpers import HEADINGS

pytestmark = pytest.mark.model

MODEL, TEXT = "toy-induction", "k d m x b f q z k d m x b f q z"  # 16 tokens, 2 layers × 4 heads
# page -> the choices a teacher makes there, none the page's default (what the test sets, and what each
# step must open on); set through session state, as the widgets' own values, before the view is added
CHOICES: dict[str, dict[str, object]] = {
    "model_view": {model_view_keys.GRID_RESCALE: False},
    "head_view": { keys.HEAD_DETAIL: "a token window", head_view_keys.HEAD_WINDOW: (2, 9),
                  head_view_keys.HEAD_RESCALE: True, shared_controls.WHY_KEY: 3, head_view_keys.LINKS_SKIP_FIRST: True},
    "focus": {shared_controls.FOCUS_TOKEN: 10, focus_keys.FOCUS_SHOW: focus.TO, focus_keys.FOCUS_SUMMARIES: True},
    "lines": {lines_keys.LINE_THRESHOLD: 0.25, lines_keys.LINE_TOKEN: 5, lines_keys.LINE_HEADS: [1, 3]},
    "compare_heads": {shared_controls.COMPARE_HEADS: ["L0H1", "L1H2", "L1H3"],
                      compare_heads_keys.COMPARE_RESCALE: True},
    "across_layers": { across_layers_keys.LAYERS_METHOD: "rollout through one head", across_layers_keys.LAYERS_HEAD: 2,
                      across_layers_keys.LAYERS_LAYER: 0},
    "generate": {generate_keys.GEN_TEMPERATURE: 0.7, generate_keys.GEN_SEED: 7, generate_keys.GEN_MAX_NEW: 5},
    "head_metrics": {head_metrics_keys.METRIC_CHOICE: "prev"},
    "similarity": {similarity_keys.SIM_ORDER: "clustered", similarity_keys.MAP_COLOUR: "pattern"},
    "composition": {composition_keys.COMP_KIND: "v", composition_keys.COMP_ABOVE: 1.5},
    "corpus": {corpus_keys.CORPUS_TOKENS: 64, corpus_keys.CORPUS_BATCH: 8},
    "examples": {examples_keys.EXAMPLES_RANK: "max_activation"},
    "compare": {compare_keys.CMP_RESCALE: True},
    "prediction": {shared_controls.PRED_WRONG: "q"},
    "circuit": {shared_controls.PRED_ANSWER: " k"},  # the pair is both pages' (its estimate and k: test_app_circuit)
    "task": {task_keys.TASK_SOURCE: "greater-than (years)", task_keys.TASK_SIZE: 7, task_keys.TASK_SEED: 3,
             task_keys.TASK_METHOD: "direct logit attribution"},
    "teaching": {teaching_keys.TEACH_PART: "What it costs"},
    "ablation": { ablation_keys.ABLATE_MODE: "replaced by their mean output on this text",
                 ablation_keys.IMP_SOURCE: "a bundled sample paragraph"},
    "qk": {qk_keys.QK_J: 4, qk_keys.QK_TRANSLATE: True},
    "retrieval": {retrieval_keys.RETRIEVAL_LENGTH: 36, retrieval_keys.RETRIEVAL_DEPTHS: [25, 75]},
    "model_facts": {},  # no control of its own
}


OFF = ["L1H0", "L1H1", "L1H2", "L1H3"]  # Switch heads off: layer 1 switched off (its own choice, not a widget's)


def _heads_off(at) -> list[str]:
    """The heads off for the model on screen, by label (the toy's rows are its layers)."""
    on = (at.session_state[keys.HEADS_ON] if keys.HEADS_ON in at.session_state else {}).get(
        at.session_state[keys.CURRENT].key.model)
    return [] if on is None else [f"L{layer}H{head}" for layer, head in zip(*(~on).nonzero())]


def _value(at, key):
    value = at.session_state[key] if key in at.session_state else None
    return list(value) if isinstance(value, tuple) else value


def _expected(value):
    return list(value) if isinstance(value, tuple) else value


def _build() -> lessons.Lesson:
    """A teacher's lesson: every page, each with its choices, one step each."""
    at = lesson_panel(start_app())
    at.selectbox(key=keys.MODEL_CHOICE).set_value(MODEL).run()
    at.text_area(key=keys.TEXT).input(TEXT).run()
    for page in app_page_ids():
        open_page(at, page)
        for key, value in CHOICES[page].items():
            at.session_state[key] = value
        at.run()
        if page == "ablation":
            at.selectbox(key=ablation_keys.HEADS_LAYER_PICK).set_value(1).run()
            at.button(key=ablation_keys.HEADS_LAYER_OFF).click().run()
            assert _heads_off(at) == OFF
        assert not at.exception, (page, at.exception)
        for key, value in CHOICES[page].items():  # the page took the choice (a valid one, not reset)
            assert _value(at, key) == _expected(value), (page, key, _value(at, key))
        at.text_area(key=keys.LESSON_NOTE).input(f"On {page}.").run()
        at.button(key=keys.LESSON_ADD).click().run()
        assert not at.exception, (page, at.exception)
    return at.session_state[keys.LESSON_DRAFT]


def test_a_lesson_built_on_every_page_opens_each_step_on_its_choices():
    lesson = _build()
    assert [s.page for s in lesson.steps] == app_page_ids()
    packed = lessons.pack(lesson)
    assert packed, "the lesson fits a link"
    at = app_test()  # a student: a fresh session, every control at its default
    at.query_params["lesson"] = packed
    at.run()
    for k, step in enumerate(lesson.steps):
        assert not at.exception, (step.page, at.exception)
        assert at.title[0].value == HEADINGS[step.page], (k, step.page)
        # nothing of the step was refused (the link's notices; a page's own word on its model may stand: no task's
        # generator can run on the toy's letters)
        assert not [w.value for w in at.warning if w.icon == ":material/link:"], (step.page, at.warning)
        assert not at.warning or step.page == "task", (step.page, [w.value for w in at.warning])
        for key, value in CHOICES[step.page].items():
            assert _value(at, key) == _expected(value), (step.page, key, _value(at, key))
        assert _heads_off(at) == (OFF if step.page == "ablation" else []), step.page
        if k + 1 < len(lesson.steps):
            at.button(key=keys.LESSON_NEXT).click().run()


def _focus_page(token: int):
    """Token focus on the toy's text with `token` picked in its token picker, as a user picks it."""
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(MODEL).run()
    at.text_area(key=keys.TEXT).input(TEXT).run()
    open_page(at, "focus")
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(token).run()
    assert not at.exception, at.exception
    return at


def test_a_shared_link_reopens_the_pages_choices():
    at = _focus_page(10)
    at.radio(key=focus_keys.FOCUS_SHOW).set_value(focus.BY).run()
    params = dict(at.query_params)
    assert (params["focus_token"], params["focus_show"]) == ("10", focus.BY)
    assert "focus_level" not in params  # a control at its default is left out of the link
    again = app_test()
    again.query_params.update(params)
    again.run()
    open_page(again, "focus")  # AppTest opens the default page: the path is e2e's
    assert not again.exception and not again.warning, [w.value for w in again.warning]
    assert again.selectbox(key=shared_controls.FOCUS_TOKEN).value == 10
    assert again.radio(key=focus_keys.FOCUS_SHOW).value == focus.BY


def test_a_tampered_choice_falls_back_to_the_default_with_a_notice():
    at = app_test()
    at.query_params.update({"model": MODEL, "text": TEXT, "focus_token": "99", "focus_show": "sideways",
                            "line_window": "3-2", "heads_off": "L9H0,L0H1", "layer": "1"})
    at.run()
    assert not at.exception, at.exception
    notices = shown(" ".join(w.value for w in at.warning))
    assert "focus_token “99” is past this run's" in notices, notices
    assert "focus_show “sideways” is not one of both, attends to, attended by" in notices, notices
    assert "line_window “3-2” is not a span start-stop with start below stop" in notices, notices
    assert "heads_off names heads toy-induction does not have (L9H0): they were left on" in notices, notices
    assert _heads_off(at) == ["L0H1"]
    assert at.session_state[keys.SEL_LAYER] == 1  # the rest of the link applies
    open_page(at, "focus")
    assert not at.exception and not at.error
    run = at.session_state[keys.CURRENT].run
    assert at.selectbox(key=shared_controls.FOCUS_TOKEN).value == run.n - 1  # the page's default: a decoder's last
    assert at.radio(key=focus_keys.FOCUS_SHOW).value == "both"


def test_a_step_restores_its_choices_after_exploring_and_a_step_without_them_opens_on_the_defaults():
    at = lesson_panel(_focus_page(10))
    at.button(key=keys.LESSON_ADD).click().run()
    at.button(key=keys.LESSON_FOLLOW).click().run()
    assert at.selectbox(key=shared_controls.FOCUS_TOKEN).value == 10
    at.selectbox(key=shared_controls.FOCUS_TOKEN).set_value(3).run()  # the student explores
    at.button(key=keys.LESSON_RESTORE).click().run()
    assert not at.exception and at.selectbox(key=shared_controls.FOCUS_TOKEN).value == 10
    # a lesson written before pages kept their choices: its focus step opens on the page's defaults,
    # whatever the student had picked
    old = lessons.Lesson(title="Old", steps=(lessons.step("focus", {"model": MODEL, "text": TEXT, "layer": "0",
                                                                    "head": "0", "dtype": "auto"}, "Look."),))
    at.file_uploader(key=keys.LESSON_FILE).set_value(("old.json", lessons.lesson_json(old).encode(),
                                                      "application/json")).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.title[0].value == HEADINGS["focus"]
    run = at.session_state[keys.CURRENT].run
    assert run.is_causal and at.selectbox(key=shared_controls.FOCUS_TOKEN).value == run.n - 1  # the default


def _lesson_on(model: str) -> lessons.Lesson:
    step = lessons.step("focus", {"model": model, "text": TEXT, "layer": "0", "head": "0", "dtype": "auto",
                                  "focus_token": "3"}, "The row of *it*: it looks at *animal*.")
    return lessons.Lesson(title="A class", steps=(step,))


def _kept(at, text: str) -> None:
    """The student's text and choices stay, no lesson is followed, and the app works."""
    assert not at.exception, at.exception
    assert at.session_state[keys.TEXT] == text
    assert keys.LESSON not in at.session_state or at.session_state[keys.LESSON] is None
    assert "Step 1 of" not in " ".join(c.value for c in at.caption)


def test_an_uploaded_lesson_on_a_model_that_cannot_load_is_refused_naming_it(tmp_path):
    empty = tmp_path / "notes"  # a folder, but no model in it
    empty.mkdir()
    at = lesson_panel(start_app())
    at.text_area(key=keys.TEXT).input("The text I was working on.").run()
    at.file_uploader(key=keys.LESSON_FILE).set_value(
        ("class.json", lessons.lesson_json(_lesson_on(str(empty))).encode(), "application/json")).run()
    message = shown(" ".join(e.value for e in at.error))
    assert f"class.json was not opened: Step 1's model “{empty}” cannot be opened on this server" in message, message
    assert "holds no model" in message
    _kept(at, "The text I was working on.")
    assert at.session_state[keys.MODEL_CHOICE] == "minilm"


def test_a_lesson_link_on_a_model_that_cannot_load_is_refused_and_the_app_opens_as_usual(tmp_path):
    missing = tmp_path / "gone"
    at = app_test()
    at.query_params["lesson"] = lessons.pack(_lesson_on(str(missing)))
    at.run()
    message = shown(" ".join(e.value for e in at.error))
    assert f"The link's lesson could not be opened: Step 1's model “{missing}” cannot be opened" in message, message
    _kept(at, "The cat sat on the mat because it was tired.")
    assert at.title[0].value == HEADINGS["model_view"]


def test_a_lesson_on_a_model_the_server_does_not_offer_is_refused_from_a_link_and_from_the_server(
        monkeypatch, tmp_path):
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_MODELS", "minilm")
    at = app_test()
    at.query_params["lesson"] = lessons.pack(_lesson_on(MODEL))
    at.run()
    message = shown(" ".join(e.value for e in at.error))
    assert f"This server does not offer the link's model “{MODEL}”" in message, message
    _kept(at, "The cat sat on the mat because it was tired.")
    # the same lesson as the server's (MHA_VIZ_LESSON): named above the page, the app works
    path = tmp_path / "class.json"
    path.write_text(lessons.lesson_json(_lesson_on(str(tmp_path / "gone"))))
    monkeypatch.delenv("MHA_VIZ_PUBLIC")
    monkeypatch.delenv("MHA_VIZ_MODELS")
    monkeypatch.setenv("MHA_VIZ_LESSON", str(path))
    at = app_test()
    at.run()
    message = shown(" ".join(e.value for e in at.error))
    assert "The server's lesson could not be opened: Step 1's model" in message and "There is no folder" in message
    _kept(at, "The cat sat on the mat because it was tired.")


def test_a_corrupted_text_too_long_for_a_link_keeps_the_view_out_of_a_lesson_and_says_why():
    """The pair's corrupted text is a control of the prediction's page (`shared_controls.PAIR`): over the
    characters a link carries, the page's view cannot be a step (the button says why); within them, it can."""
    at = lesson_panel(start_app())
    at.selectbox(key=keys.MODEL_CHOICE).set_value(MODEL).run()
    open_page(at, "prediction")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input("q " * 800).run()
    add = at.button(key=keys.LESSON_ADD)
    assert add.disabled and "The “corrupted” text has 1,600 characters, more than the 1,500" in add.help, add.help
    at.text_area(key=shared_controls.PRED_CORRUPTED).input("q " * 8).run()
    assert not at.button(key=keys.LESSON_ADD).disabled
