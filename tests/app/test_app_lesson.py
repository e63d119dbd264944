"""Lessons in the app: the bundled lesson walked forward and back, each step's view as saved; "Back
to the step" after exploring; a lesson built in the *Lesson* panel, followed and read back; hostile
lesson files refused with a message, losing nothing; a workshop server closed to its lesson."""

from __future__ import annotations

import json

import pytest

from mha_viz import catalogue
from mha_viz.export import lesson as lessons
from mha_viz.ui.kit import keys, page_controls
from tests.app.helpers import app_test, lesson_panel, open_page, start_app
from tests.helpers import HEADINGS, shown

BUNDLED = "attention-head-by-head"


def _bundled() -> lessons.Lesson:
    return lessons.read_lesson(lessons.bundled()[BUNDLED], pages=catalogue.ids())


def _open(lesson: str, step: int | None = None):
    at = app_test()
    at.query_params["lesson"] = lesson
    if step is not None:
        at.query_params["step"] = str(step)
    at.run()
    assert not at.exception, at.exception
    return at


def _assert_on_step(at, lesson: lessons.Lesson, k: int) -> None:
    """The page, the sidebar's inputs, the shared head and the note are step k's (from 0)."""
    step = lesson.steps[k]
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == HEADINGS[step.page], (k, [t.value for t in at.title])
    link, state = step.link, at.session_state
    assert state[keys.MODEL_CHOICE] == link.model, k
    assert state[keys.TEXT] == link.text, k
    assert (state[keys.HIDE_SPECIAL], state[keys.HIDE_FIRST]) == ("special" in link.hide, "first" in link.hide), k
    assert bool(state[keys.LOCAL_ATTENTION]) == link.ours, k
    assert (state[keys.LENS] == keys.LENS_CONTRIBUTIONS) == link.contributions, k
    assert state[keys.PRECISION] == (link.dtype or "auto"), k
    if link.layer is not None:  # the bundled models are captured whole: a row is the layer number
        assert state[keys.SEL_LAYER] == link.layer, (k, state[keys.SEL_LAYER])
    if link.head is not None:
        assert state[keys.SEL_HEAD] == link.head, (k, state[keys.SEL_HEAD])
    assert f"Step {k + 1} of {len(lesson.steps)}" in " ".join(c.value for c in at.caption)
    assert step.note.strip() in [m.value.strip() for m in at.markdown], k
    assert (at.query_params["step"], at.query_params["lesson"]) == (str(k + 1), BUNDLED)


def test_the_bundled_lesson_walks_forward_and_back_each_step_its_saved_view():
    lesson = _bundled()
    at = _open(BUNDLED)
    for k in range(len(lesson.steps)):
        _assert_on_step(at, lesson, k)
        assert at.button(key=keys.LESSON_BACK).disabled == (k == 0)
        assert at.button(key=keys.LESSON_NEXT).disabled == (k == len(lesson.steps) - 1)
        if k < len(lesson.steps) - 1:
            at.button(key=keys.LESSON_NEXT).click().run()
    for k in range(len(lesson.steps) - 2, -1, -1):
        at.button(key=keys.LESSON_BACK).click().run()
        _assert_on_step(at, lesson, k)


def test_back_to_the_step_restores_its_view_after_the_student_explored():
    lesson = _bundled()
    k = next(i for i, s in enumerate(lesson.steps) if s.page == "head_view")
    at = _open(BUNDLED, k + 1)
    _assert_on_step(at, lesson, k)
    at.text_area(key=keys.TEXT).input("My own sentence about a dog.").run()
    at.checkbox(key=keys.HIDE_FIRST).check().run()
    at.session_state[keys.SEL_HEAD] = (lesson.steps[k].link.head + 1) % 2
    assert "not this one" not in shown(" ".join(c.value for c in at.caption))  # on the step's own page
    open_page(at, "model_view")
    assert at.session_state[keys.TEXT] == "My own sentence about a dog."
    said = shown(" ".join(c.value for c in at.caption))  # the note is the step's, on another page: said so
    assert f"Step {k + 1} of {len(lesson.steps)} · Head view: this note belongs to that page, not this one " \
           "(*Back to the step* opens it)." in said, said
    at.button(key=keys.LESSON_RESTORE).click().run()
    _assert_on_step(at, lesson, k)
    assert "not this one" not in shown(" ".join(c.value for c in at.caption))


def test_a_step_link_opens_on_that_step_and_a_bad_step_number_on_the_first():
    lesson = _bundled()
    _assert_on_step(_open(BUNDLED, 3), lesson, 2)
    _assert_on_step(_open(BUNDLED, "99"), lesson, len(lesson.steps) - 1)  # clamped to the last
    at = app_test()
    at.query_params["lesson"], at.query_params["step"] = BUNDLED, "-1"
    at.run()
    _assert_on_step(at, lesson, 0)


def test_a_lesson_built_in_the_panel_is_followed_and_reads_back_from_its_file():
    at = lesson_panel(start_app())  # the model view, MiniLM, the default text; the panel opened
    at.text_area(key=keys.LESSON_NOTE).input("Every head at once: **6 × 12**, $\\alpha$ in each cell.").run()
    at.button(key=keys.LESSON_ADD).click().run()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("toy-induction").run()
    at.text_area(key=keys.TEXT).input("k d m x k d m x").run()
    at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD] = 1, 1
    open_page(at, "head_view")
    at.text_area(key=keys.LESSON_NOTE).input("An induction head.").run()
    at.button(key=keys.LESSON_ADD).click().run()
    assert at.session_state[keys.LESSON_NOTE] == ""  # the box is ready for the next view
    draft = at.session_state[keys.LESSON_DRAFT]
    assert [s.page for s in draft.steps] == ["model_view", "head_view"]
    assert (draft.steps[1].link.model, draft.steps[1].link.text) == ("toy-induction", "k d m x k d m x")
    assert (draft.steps[1].link.layer, draft.steps[1].link.head) == (1, 1)
    # edit the first step's note, move the second up, and read the file back
    at.button(key=f"{keys.LESSON_ROW}edit_0").click().run()
    at.text_area(key=keys.LESSON_NOTE).input("The model view.").run()
    at.button(key=keys.LESSON_ADD).click().run()
    at.button(key=f"{keys.LESSON_ROW}up_1").click().run()
    draft = at.session_state[keys.LESSON_DRAFT]
    assert [(s.page, s.note) for s in draft.steps] == [("head_view", "An induction head."),
                                                        ("model_view", "The model view.")]
    assert lessons.read_lesson(lessons.lesson_json(draft), pages=catalogue.ids(),
                               controls=page_controls.CONTROLS) == draft
    at.button(key=f"{keys.LESSON_ROW}delete_1").click().run()
    assert len(at.session_state[keys.LESSON_DRAFT].steps) == 1
    # follow it: step 1 opens, on toy-induction's head view
    at.button(key=keys.LESSON_FOLLOW).click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == HEADINGS["head_view"]
    assert at.session_state[keys.MODEL_CHOICE] == "toy-induction"
    assert "An induction head." in [m.value for m in at.markdown]


def _hostile_files() -> dict[str, bytes]:
    good = json.loads(lessons.bundled()[BUNDLED])
    script = json.loads(json.dumps(good))
    script["steps"][0]["note"] = "<script>alert('x')</script>"
    page = json.loads(json.dumps(good))
    page["steps"][1]["page"] = "admin_panel"
    return {"broken.json": b'{"format": "mha-viz lesson", "steps": [', "script.json": json.dumps(script).encode(),
            "page.json": json.dumps(page).encode()}


@pytest.mark.parametrize("name", list(_hostile_files()))
def test_a_hostile_lesson_upload_gives_a_message_and_loses_nothing(name):
    at = lesson_panel(start_app())
    at.text_area(key=keys.TEXT).input("The text I was working on.").run()
    at.file_uploader(key=keys.LESSON_FILE).set_value((name, _hostile_files()[name], "application/json")).run()
    assert not at.exception, at.exception
    message = shown(" ".join(e.value for e in at.error))
    assert f"{name} was not opened" in message, message
    assert at.session_state[keys.TEXT] == "The text I was working on."
    assert keys.LESSON not in at.session_state or at.session_state[keys.LESSON] is None


def test_a_lesson_link_that_was_cut_or_names_no_lesson_gives_a_message():
    packed = lessons.pack(_bundled())
    for value, says in ((packed[:-40], "damaged"), ("no-such-lesson", "is not one of this app's lessons")):
        at = _open(value)
        assert says in shown(" ".join(e.value for e in at.error))
        assert at.title[0].value == HEADINGS["model_view"]  # the app as usual


def _workshop(monkeypatch, tmp_path, lesson_text: str) -> None:
    path = tmp_path / "class.json"
    path.write_text(lesson_text)
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_LESSON", str(path))


def test_a_workshop_offers_only_its_lessons_models_and_pages(monkeypatch, tmp_path):
    steps = [{"page": "head_view", "view": {"model": "toy-induction", "text": "k d m x k d m x", "layer": "1",
                                            "head": "1", "dtype": "auto"}, "note": "One head."},
             {"page": "ablation", "view": {"model": "toy-induction", "text": "k d m x k d m x", "layer": "0",
                                           "head": "0", "dtype": "auto"}, "note": "Switch it off."}]
    _workshop(monkeypatch, tmp_path, json.dumps({"format": lessons.FORMAT, "version": 1, "title": "Class",
                                                 "steps": steps}))
    at = app_test()
    at.query_params["model"] = "minilm"  # a link to a model the workshop does not offer
    at.run()
    assert not at.exception, at.exception
    offered = at.selectbox(key=keys.MODEL_CHOICE).options
    assert len(offered) == 1 and offered[0].startswith("toy-induction"), offered
    assert at.session_state[keys.MODEL_CHOICE] == "toy-induction"
    assert "does not offer" in " ".join(w.value for w in at.warning)
    at.session_state[keys.GOTO] = "model_view"  # a page outside the lesson: not switched to
    at.run()
    assert at.title[0].value in (HEADINGS["head_view"], HEADINGS["ablation"])
    at.button(key=keys.LESSON_NEXT).click().run()
    assert at.title[0].value == HEADINGS["ablation"] and not at.exception


def test_a_server_lesson_that_is_not_one_is_named_and_the_app_works(monkeypatch, tmp_path):
    _workshop(monkeypatch, tmp_path, '{"format": "mha-viz lesson", "version": 1, "steps": [{"page": "x"}]}')
    at = app_test()
    at.run()
    assert not at.exception, at.exception
    assert "The server's lesson could not be opened" in shown(" ".join(e.value for e in at.error))
    assert at.title[0].value == HEADINGS["model_view"]
    assert len(at.selectbox(key=keys.MODEL_CHOICE).options) == 3  # the allow-list, not closed to nothing


def test_the_opened_lesson_lists_its_steps_as_words_and_follows_an_edit_of_a_note():
    """Issue 90: *Open the lesson* listed its steps in raw Markdown ("**What one head computes.**") and its edit
    buttons changed the panel's copy, not the lesson being followed. The list shows each note's first words without
    Markdown's marks; a note edited and saved is the note above the view on that step."""
    at = start_app()
    lesson_panel(at)
    at.button(key=keys.LESSON_BUNDLED).click().run()
    assert not at.exception and not at.error
    listed = [shown(m.value) for m in at.sidebar.markdown if m.value.startswith("**1. ")]
    assert listed and "What one head computes. We start with a toy model" in listed[0], listed
    assert "*" not in listed[0].split("\n", 1)[1]  # the note's words, no Markdown marks shown
    at.button(key=f"{keys.LESSON_ROW}edit_0").click().run()
    at.text_area(key=keys.LESSON_NOTE).input("**Look first.** A note the teacher rewrote for this class.").run()
    at.button(key=keys.LESSON_ADD).click().run()
    assert not at.exception and not at.error
    assert "**Look first.** A note the teacher rewrote for this class." in [m.value.strip() for m in at.markdown]
    assert lessons.summary(_bundled().steps[1].note) in " ".join(shown(m.value) for m in at.sidebar.markdown)
    at.button(key=keys.LESSON_NEXT).click().run()  # the rest of the lesson as it was
    assert _bundled().steps[1].note.strip() in [m.value.strip() for m in at.markdown]


def test_opening_a_lesson_over_the_teachers_own_offers_it_back():
    """Issue 90's walk: opening the bundled lesson replaced a two-step lesson the teacher was building, with no
    warning and no way back. Undo puts the teacher's lesson (its title and steps) back in the panel; an edit of the
    opened lesson takes the offer away."""
    at = start_app()
    lesson_panel(at)
    at.text_input(key=keys.LESSON_TITLE).input("Pronouns and attention").run()
    for note in ("First, the head view.", "Then, the same view again."):
        at.text_area(key=keys.LESSON_NOTE).input(note).run()
        at.button(key=keys.LESSON_ADD).click().run()
    own = at.session_state[keys.LESSON_DRAFT]
    assert len(own.steps) == 2
    at.button(key=keys.LESSON_BUNDLED).click().run()
    assert at.session_state[keys.LESSON_DRAFT].title == "Attention, head by head"
    undo = at.button(key=keys.LESSON_REPLACED_GO)
    assert "Pronouns and attention" in undo.label and "2 steps" in undo.label
    undo.click().run()
    assert not at.exception and at.session_state[keys.LESSON_DRAFT] == own
    assert at.text_input(key=keys.LESSON_TITLE).value == "Pronouns and attention"
    assert not [b for b in at.button if b.key == keys.LESSON_REPLACED_GO]
    at.button(key=keys.LESSON_BUNDLED).click().run()
    at.button(key=f"{keys.LESSON_ROW}down_0").click().run()  # the opened lesson edited: nothing to undo now
    assert not [b for b in at.button if b.key == keys.LESSON_REPLACED_GO]
