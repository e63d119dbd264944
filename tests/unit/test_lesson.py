"""Lesson files (`mha_viz.export.lesson`): what is written reads back exactly, and every file that is
not a lesson, or that a class should not open, is refused with a message that says why, never with
another exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mha_viz import catalogue
from mha_viz.export import lesson as lessons
from mha_viz.export import link_params

PAGES = catalogue.ids()
BUNDLED_MODELS = ("minilm", "smollm2", "toy-induction")


def _lesson(notes=("First: *look* at $\\alpha_{ij}$.", "Second, with “quotes”, \\ and <b>bold</b> as text.")):
    views = ({"model": "toy-induction", "text": 'k d m "x" \\ k d m\nx', "layer": "1", "head": "0", "dtype": "auto"},
             {"model": "minilm", "text": "Ünïcode: 猫が座った。", "layer": "5", "head": "11", "hide": "special,first",
              "mha": "ours", "show": "contributions", "dtype": "float32"})
    return lessons.Lesson(title="Ein Kurs — “heads”", description="For week 3.",
                          steps=tuple(lessons.step(page, view, note)
                                      for page, view, note in zip(("head_view", "model_view"), views, notes)))


def _raw(**step_fields) -> dict:
    step = {"page": "head_view", "view": {"model": "minilm", "text": "a b", "layer": "0", "head": "0"}, "note": "Hi."}
    step.update(step_fields)
    return {"format": lessons.FORMAT, "version": lessons.VERSION, "title": "T", "steps": [step]}


def _read(raw, **kw) -> lessons.Lesson:
    data = raw if isinstance(raw, (bytes, str)) else json.dumps(raw)
    return lessons.read_lesson(data, pages=PAGES, **kw)


def test_a_lesson_written_reads_back_exactly_from_its_file_and_from_a_link():
    lesson = _lesson()
    assert _read(lessons.lesson_json(lesson)) == lesson
    assert _read(lessons.lesson_json(lesson).encode()) == lesson
    packed = lessons.pack(lesson)
    assert packed and packed.startswith(lessons.PACKED) and len(packed) <= lessons.MAX_PACKED_CHARS
    assert _read(lessons.unpack(packed)) == lesson
    # the view is a link that parses to what the step says, with no notice
    link, notices = link_params.parse(lesson.steps[1].params)
    assert not notices and link.hide == ("special", "first") and link.ours and link.contributions
    assert lesson.models == ("toy-induction", "minilm") and lesson.pages == ("head_view", "model_view")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=200).filter(lambda t: lessons.script_in(t) is None), min_size=1, max_size=4),
       st.text(min_size=1, max_size=300))
def test_any_note_and_text_round_trip(notes, text):
    steps = tuple(lessons.step("focus", {"model": "minilm", "text": text, "layer": "2", "head": "3"}, n) for n in notes)
    lesson = lessons.Lesson(title="T", steps=steps)
    assert _read(lessons.lesson_json(lesson)) == lesson
    assert _read(lessons.unpack(lessons.pack(lesson))) == lesson


HOSTILE = {
    "not json": (b"{ steps: [", "not JSON (line 1"),
    "not text": (b"\xff\xfe\x00{", "not text"),
    "a list": (b"[1, 2]", "not an mha-viz lesson"),
    "another format": ({"format": "bertviz", "version": 1, "steps": []}, "not an mha-viz lesson"),
    "a future version": (_raw() | {"version": 2}, "version 2 is not one this app reads"),
    "no steps": (_raw() | {"steps": []}, "has no steps"),
    "unknown field": (_raw() | {"run": "rm -rf"}, "fields a lesson does not have: run"),
    "unknown page": (_raw(page="admin"), "names the page “admin”, which this app does not have"),
    "page not text": (_raw(page=["head_view"]), "names the page “list”"),
    "step not object": (_raw() | {"steps": ["head_view"]}, "Step 1 is not an object"),
    "view nested": (_raw(view={"model": "minilm", "text": {"a": 1}}), "not a set of link parameters"),
    "no model": (_raw(view={"text": "a b"}), "names no model"),
    "bad layer": (_raw(view={"model": "minilm", "layer": "1e9"}), "is not a layer number"),
    "unknown parameter": (_raw(view={"model": "minilm", "exec": "x"}), "parameters this app does not know"),
    "note not text": (_raw(note=["x"]), "note is not text"),
    "script": (_raw(note="Look <script>alert(1)</script>"), "“<script”, which could run code"),
    "script in capitals": (_raw(note="<SCRIPT src=x>"), "could run code"),
    "closing script": (_raw(note="</script >"), "could run code"),
    "event handler": (_raw(note='<img src=x onerror="alert(1)">'), "could run code"),
    "javascript link": (_raw(note="[click](javascript:alert(1))"), "could run code"),
    "iframe": (_raw(note="<iframe src=//evil>"), "could run code"),
    "svg": (_raw(note="<svg/onload=alert(1)>"), "could run code"),
    "html data url": (_raw(note="[x](data:text/html;base64,AAAA)"), "could run code"),
    "script in title": (_raw() | {"title": "<script>x</script>"}, "title holds"),
    "long note": (_raw(note="x" * (lessons.MAX_NOTE_CHARS + 1)), "more than 6,000"),
    "too many steps": (_raw() | {"steps": _raw()["steps"] * (lessons.MAX_STEPS + 1)}, "more than the 100"),
    "too large": (b" " * (lessons.MAX_BYTES + 1), "more than the 262,144"),
    "deep nesting": (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_file_is_refused_with_a_message_that_says_why(name):
    data, says = HOSTILE[name]
    with pytest.raises(lessons.LessonError) as refused:
        _read(data)
    assert says in str(refused.value), str(refused.value)


def test_a_model_outside_the_allow_list_or_a_folder_on_a_public_server_is_refused(monkeypatch):
    raw = _raw(view={"model": "gpt2", "text": "a"})
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # the Hub reachable: a hub id is loaded from it
    assert _read(raw).models == ("gpt2",)  # a local server offers any model
    with pytest.raises(lessons.LessonError, match="does not offer the link's model “gpt2”"):
        _read(raw, allowed_models=BUNDLED_MODELS, public=True)
    with pytest.raises(lessons.LessonError, match="is not a model name"):
        _read(_raw(view={"model": "/etc/passwd", "text": "a"}), public=True)


def test_a_packed_link_that_was_cut_or_tampered_with_is_refused():
    packed = lessons.pack(_lesson())
    for bad in (packed[:-7], packed[:len(lessons.PACKED) + 3], "z1-!!!!", "z2-" + packed[3:], packed + "x" * 9000):
        with pytest.raises(lessons.LessonError):
            _read(lessons.unpack(bad))


def test_a_packed_bomb_is_refused_before_it_is_inflated():
    """A small link that inflates past MAX_BYTES is damaged or too large, not read into memory."""
    import base64
    import zlib
    bomb = lessons.PACKED + base64.urlsafe_b64encode(zlib.compress(b" " * (10 * lessons.MAX_BYTES), 9)).decode()
    assert len(bomb) < lessons.MAX_PACKED_CHARS
    with pytest.raises(lessons.LessonError, match="too large"):
        lessons.unpack(bomb)


def test_a_lesson_too_long_for_a_link_is_not_packed():
    import random
    draw = random.Random(0)
    words = ["".join(draw.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(3000)]
    steps = tuple(lessons.step("head_view", {"model": "minilm", "text": " ".join(words[i * 150:(i + 1) * 150])}, "")
                  for i in range(20))
    assert lessons.pack(lessons.Lesson(title="Long", steps=steps)) is None


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                    max_leaves=30))
def test_any_json_is_a_lesson_or_refused_with_a_message(value):
    raw = value if not isinstance(value, dict) else {"format": lessons.FORMAT, "version": 1} | value
    try:
        _read(raw)
    except lessons.LessonError as exc:
        assert str(exc)


def test_the_bundled_lesson_is_a_lesson_of_8_to_12_steps_on_the_bundled_models():
    bundled = lessons.bundled()
    lesson = _read(bundled["attention-head-by-head"], allowed_models=BUNDLED_MODELS, public=True)
    assert lesson.title == "Attention, head by head"
    assert 8 <= len(lesson.steps) <= 12
    assert set(lesson.models) == set(BUNDLED_MODELS)
    assert {"teaching", "head_view", "ablation", "prediction", "head_metrics"} <= set(lesson.pages)
    assert all(len(s.note.split()) >= 20 for s in lesson.steps)  # a teacher's words, not a label


def test_a_bundled_note_names_a_control_choice_in_italics_never_in_bold_like_a_button():
    """Issue 90: step 1 said "Now open **3–6 · Scores to probabilities**", which reads as a button to press; the
    real choice sat below the fold. A choice of any page's controls named in a note is set in italics."""
    choices = {option for feature in catalogue.features() for control in feature.controls
               for option in control.options if isinstance(option, str) and len(option) > 3}
    assert "3–6 · Scores to probabilities" in choices
    for name, text in lessons.bundled().items():
        for step in json.loads(text)["steps"]:
            bold = [c for c in choices if f"**{c}**" in step.get("note", "")]
            assert not bold, (name, bold)


def test_the_page_ids_a_lesson_is_checked_against_are_the_pages_the_app_registers():
    from mha_viz.ui.shell import navigation as pages
    assert tuple(p.id for p in pages.PAGES) == catalogue.ids()


def test_a_step_on_a_retired_page_reads_where_its_successor_is_offered_and_is_refused_where_not():
    raw = _raw(page="whole_text")
    assert "whole_text" in catalogue.with_retired(catalogue.ids())
    lesson = lessons.read_lesson(json.dumps(raw), pages=catalogue.with_retired(catalogue.ids()))
    assert lesson.steps[0].page == "whole_text"  # opened on catalogue.retired()'s successor, the Head view
    offered = [i for i in catalogue.ids() if i != catalogue.retired()["whole_text"]]
    assert "whole_text" not in catalogue.with_retired(offered)
    with pytest.raises(lessons.LessonError):
        lessons.read_lesson(json.dumps(raw), pages=catalogue.with_retired(offered))


def _model_step(model: str, **view) -> dict:
    return _raw(view={"model": model, "text": "a b", "layer": "0", "head": "0", **view})


def test_a_model_this_machine_cannot_load_is_refused_naming_it(tmp_path, monkeypatch):
    """Checked cheaply when the lesson is read (no model is loaded): a folder that holds no model, a
    path that is not there, a hub id while the Hub cannot be reached and it is not cached, model B too."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    empty, missing = tmp_path / "notes", tmp_path / "gone"
    empty.mkdir()
    for spec, says in ((str(empty), "holds no model"), (str(missing), "There is no folder"),
                       ("someone/never-downloaded-model", "the Hugging Face Hub cannot be reached")):
        with pytest.raises(lessons.LessonError) as refused:
            _read(_model_step(spec))
        message = str(refused.value)
        assert message.startswith(f"Step 1's model “{spec}” cannot be opened on this server:"), message
        assert says in message, message
    with pytest.raises(lessons.LessonError, match="Step 1's model B “someone/never-downloaded-model”"):
        _read(_raw(page="compare", view={"model": "minilm", "text": "a", "compare": "models",
                                         "model_b": "someone/never-downloaded-model"}))
    assert _read(_model_step(str(empty)), check_models=False).models == (str(empty),)  # the caller's choice


def test_a_folder_with_a_model_a_bundled_name_and_a_reachable_hub_id_are_accepted(tmp_path, monkeypatch):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    steps = [_model_step(m)["steps"][0] for m in (str(folder), "toy-induction", "someone/a-model")]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    lesson = _read(_raw() | {"steps": steps})
    assert lesson.models == (str(folder), "toy-induction", "someone/a-model")
    # pickled weights only where the server allows them
    (folder / "model.safetensors").unlink()
    (folder / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(lessons.LessonError, match="only pickled weights"):
        _read(_raw() | {"steps": steps})
    assert _read(_raw() | {"steps": steps}, allow_pickle=True).models[0] == str(folder)


def test_each_model_is_checked_once_a_lesson(monkeypatch):
    checked = []
    monkeypatch.setattr(lessons, "check_spec", lambda spec, allow_pickle=False: checked.append(spec))
    steps = [_model_step(m)["steps"][0] for m in ("minilm", "toy-induction", "minilm", "toy-induction")]
    _read(_raw() | {"steps": steps})
    assert checked == ["minilm", "toy-induction"]


@pytest.mark.parametrize(("note", "listed"), [
    ("**What one head computes.** Then more", "What one head computes. Then more"),
    (r"$\alpha_{ij} = \mathrm{softmax}(q_i k_j^T/\sqrt{d})$ row by row", r"\alpha_{ij} = \mathrm{softmax}(q_i "
                                                                           r"k_j^T/\sqrt{d}) row by row"),
    ("_Look_ at `W_Q` and *this* (__bold__)", "Look at W_Q and this (bold)"),
    ("## A heading\nthe next line", "A heading"),
    ("> a quoted *word*", "a quoted word"),
])
def test_a_steps_summary_drops_markdowns_marks_and_keeps_a_words_own_underscores(note, listed):
    """The lesson panel lists each step by its note's first line as plain words: emphasis, code, formula, heading
    and quote marks go, an underscore inside a word or formula stays (the preview read α{ij} and qi for α_{ij} and
    q_i)."""
    assert lessons.summary(note, chars=200) == listed
