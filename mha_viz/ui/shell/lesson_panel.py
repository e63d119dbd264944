"""The sidebar's *Lesson* panel, where a teacher builds a lesson (`mha_viz.export.lesson`): "Add
this view to the lesson" with a note, on every page; the steps listed, each moved, edited or
deleted; the lesson downloaded as JSON, followed, or shared by a link. A lesson file opens here
too (an upload, or the bundled lesson), refused with a message when it is not one.

The lesson being built lives in this session only (`keys.LESSON_DRAFT`), until it is downloaded.
"""

from __future__ import annotations

import streamlit as st

from mha_viz.export import lesson as lessons
from mha_viz.export import link_params
from mha_viz.export import view_params as vp
from mha_viz.ui.kit import boxes, keys, page_controls, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import lesson_flow, links, state
from mha_viz.ui.shell import navigation as pages

BUNDLED = "attention-head-by-head"  # the lesson the panel offers to open
DEFAULT_TITLE = "My lesson"


def draft() -> lessons.Lesson:
    """The lesson being built (no steps yet: an empty one)."""
    return session.get(keys.LESSON_DRAFT) or lessons.Lesson(title=DEFAULT_TITLE, steps=())


def _put(steps: tuple[lessons.Step, ...]) -> None:
    """The draft with these steps; the lesson followed, when it is the draft, follows the change (an edited note, a
    moved step), on the step it was on."""
    before = draft()
    session.pop(keys.LESSON_REPLACED)  # an edit of the opened lesson: putting the older one back would lose it
    title = (session.get(keys.LESSON_TITLE) or "").strip() or before.title
    lesson = lessons.Lesson(title=title, steps=steps, description=before.description)
    session.put(keys.LESSON_DRAFT, lesson)
    if lesson_flow.following() == before and before.steps:
        if steps:
            lesson_flow.follow(lesson, lessons.pack(lesson), lesson_flow.index(), open_step=False)
        else:
            lesson_flow.leave()


def view_params(page_id: str, cur: state.Current) -> tuple[dict[str, str], str | None]:
    """(the view on screen as a step's link parameters, every one spelled out; why it cannot be a
    step, or None)."""
    link, _ = links.view_link(page_id, cur)
    params = link_params.encode(link)
    if not link.model:
        return params, "Pick a model first."
    if link.text and not link_params.text_fits(link.text):
        return params, (f"The text has {len(link.text):,} characters, more than the {link_params.MAX_TEXT_CHARS:,} "
                        "a lesson step may carry.")
    for control in page_controls.BY_PAGE.get(page_id, ()):  # a page's typed text (the pair's corrupted text…)
        value = session.get(control.name)
        if not page_controls.carried_now(control):
            continue
        if control.kind == vp.TEXT and isinstance(value, str) and value.strip() and control.write(value) is None:
            return params, (f"The “{control.said}” text has {len(value):,} characters, more than the "
                            f"{int(control.high):,} a lesson step may carry.")
    return params, None


def _add(page_id: str, params: dict[str, str]) -> None:
    note = session.get(keys.LESSON_NOTE) or ""
    if bad := lessons.script_in(note):
        session.put(keys.LESSON_PANEL_MESSAGE, f"The note holds “{bad[:40]}”, which could run code in a browser: "
                                               "write it in Markdown. The note is kept.")
        return
    steps = list(draft().steps)
    editing = session.pop(keys.LESSON_EDIT, None)
    if editing is not None and 0 <= editing < len(steps):  # the step keeps its view, takes the note
        steps[editing] = lessons.step(steps[editing].page, steps[editing].params, note)
    else:
        steps.append(lessons.step(page_id, params, note))
    _put(tuple(steps))
    session.put(keys.LESSON_NOTE, "")


def _move(i: int, by: int) -> None:
    steps = list(draft().steps)
    j = i + by
    if 0 <= i < len(steps) and 0 <= j < len(steps):
        steps[i], steps[j] = steps[j], steps[i]
        _put(tuple(steps))


def _delete(i: int) -> None:
    steps = list(draft().steps)
    if 0 <= i < len(steps):
        del steps[i]
        _put(tuple(steps))
    session.pop(keys.LESSON_EDIT)


def _edit(i: int) -> None:
    """Put step `i`'s note in the box; the add button then saves it there."""
    session.put_all((keys.LESSON_EDIT, keys.LESSON_NOTE), (i, draft().steps[i].note))


def _follow() -> None:
    if draft().steps:
        lesson_flow.follow(draft(), lessons.pack(draft()))


def _replace_draft(lesson: lessons.Lesson) -> None:
    """Put an opened lesson in the panel, keeping the teacher's own lesson it replaces (one with steps, not the
    same) for one Undo (`_offer_undo`)."""
    own = draft()
    if own.steps and own != lesson:
        session.put(keys.LESSON_REPLACED, own)
    session.put_all((keys.LESSON_DRAFT, keys.LESSON_TITLE), (lesson, lesson.title))


def _restore_draft() -> None:
    own = session.pop(keys.LESSON_REPLACED)
    if own is not None:
        session.put_all((keys.LESSON_DRAFT, keys.LESSON_TITLE), (own, own.title))


def _offer_undo() -> None:
    """While the opened lesson is in the panel, one click puts back the lesson the teacher was building."""
    own = session.get(keys.LESSON_REPLACED)
    if own is None:
        return
    steps = len(own.steps)
    st.button(f"Undo: back to “{plain(own.title)}” ({steps} step{'s' if steps != 1 else ''})",
              key=keys.LESSON_REPLACED_GO, icon=":material/undo:", on_click=_restore_draft,
              help="Opening a lesson replaced the one you were building here; this puts it back in the panel.")


def _open_bundled() -> None:
    try:
        lesson = lessons.read_lesson(lessons.bundled()[BUNDLED], pages=pages.lesson_ids(),
                                     allowed_models=resources.settings().models, controls=page_controls.CONTROLS)
    except lessons.LessonError as exc:  # a workshop of another lesson: its pages or models are not offered
        session.put(keys.LESSON_PANEL_MESSAGE, f"This server cannot open the bundled lesson: {exc}")
        return
    _replace_draft(lesson)
    lesson_flow.follow(lesson, BUNDLED)


def _open_upload() -> None:
    """A lesson file uploaded: followed from its first step and put in the panel to edit, or a
    message that says why not (what the session had stays)."""
    upload = session.get(keys.LESSON_FILE)
    if upload is None:
        return
    conf = resources.settings()
    try:
        lesson = lessons.read_lesson(upload.getvalue(), pages=pages.lesson_ids(),
                                     allowed_models=conf.models, public=conf.public, controls=page_controls.CONTROLS,
                                     allow_pickle=conf.allow_pickle)
    except lessons.LessonError as exc:
        session.put(keys.LESSON_PANEL_MESSAGE, f"{upload.name} was not opened: {exc}")
        return
    _replace_draft(lesson)
    lesson_flow.follow(lesson, lessons.pack(lesson))


def _steps(lesson: lessons.Lesson) -> None:
    editing = session.get(keys.LESSON_EDIT)
    for i, step in enumerate(lesson.steps):
        title = pages.BY_ID[step.page].title if step.page in pages.BY_ID else step.page
        first = lessons.summary(step.note) or "(no note)"
        mark = " (editing)" if i == editing else ""
        st.markdown(f"**{i + 1}. {plain(title)}**{mark} · {plain(step.params.get('model', ''))}  \n{plain(first)}")
        row = st.columns(4)
        for col, (op, icon, helptext, action, args, off) in zip(row, (
                ("up", ":material/arrow_upward:", "Move up", _move, (i, -1), i == 0),
                ("down", ":material/arrow_downward:", "Move down", _move, (i, 1), i + 1 == len(lesson.steps)),
                ("edit", ":material/edit:", "Edit the note (in the box above)", _edit, (i,), False),
                ("delete", ":material/delete:", "Delete the step", _delete, (i,), False))):
            col.button("", key=f"{keys.LESSON_ROW}{op}_{i}", icon=icon, help=helptext, on_click=action, args=args,
                       disabled=off)


def panel(page, cur: state.Current) -> None:
    """The *Lesson* panel in the sidebar, after the page has drawn (it saves the view on screen)."""
    page_id = pages.page_id(page)
    lesson = draft()
    box = boxes.lazy_box(st.sidebar, "Lesson", keys.LESSON_OPEN, keys.LESSON_WAS_OPEN, icon=":material/school:",
                         expanded=bool(lesson.steps))  # its inputs and buttons built and sent only while open
    if not box.open:
        return
    with box:
        if message := session.pop(keys.LESSON_PANEL_MESSAGE, None):
            st.error(plain(message), icon=":material/error:")
        st.caption("Build a lesson for a class: each step is a view (this page, model, text, head and options) "
                   "with a note in Markdown (\\$…\\$ for formulas).")
        _offer_undo()
        session.setdefault(keys.LESSON_TITLE, lesson.title)
        st.text_input("Lesson title", key=keys.LESSON_TITLE, persist_state=keys.KEEP, max_chars=lessons.MAX_TITLE_CHARS,
                      on_change=lambda: _put(draft().steps))
        editing = session.get(keys.LESSON_EDIT)
        st.text_area("Note for this view" if editing is None else f"Note of step {editing + 1}", key=keys.LESSON_NOTE,
                     persist_state=keys.KEEP, max_chars=lessons.MAX_NOTE_CHARS, height=100)
        params, why = view_params(page_id, cur)
        if editing is None:
            st.button("Add this view to the lesson", key=keys.LESSON_ADD, icon=":material/add:", on_click=_add,
                      args=(page_id, params), disabled=why is not None, help=why)
        else:
            st.button(f"Save the note of step {editing + 1}", key=keys.LESSON_ADD, icon=":material/save:",
                      on_click=_add, args=(page_id, params))
        _steps(lesson)
        if lesson.steps:
            st.download_button("Download the lesson (.json)", lambda: lessons.lesson_json(lesson).encode(),
                               file_name="lesson.json", mime="application/json", on_click="ignore",
                               key=keys.LESSON_DOWNLOAD, icon=":material/download:")
            st.button("Follow this lesson", key=keys.LESSON_FOLLOW, icon=":material/play_arrow:", on_click=_follow)
            packed = lessons.pack(lesson)
            if packed:
                st.caption("A link for students (it carries the whole lesson):")
                st.code(link_params.url(links.base_url(page.url_path), "", {"lesson": packed}), language=None,
                        wrap_lines=True)
            else:
                st.caption("This lesson is too long for a link: share the file, or serve it with MHA_VIZ_LESSON.")
        st.file_uploader("Open a lesson (.json)", type=["json"], key=keys.LESSON_FILE, on_change=_open_upload,
                         max_upload_size=1)
        if BUNDLED in lessons.bundled():
            st.button("Open the lesson “Attention, head by head”", key=keys.LESSON_BUNDLED,
                      icon=":material/menu_book:", on_click=_open_bundled)
