"""Following a lesson (`mha_viz.export.lesson`): the sidebar's "Step k of N" with Back and Next, the
step's note above the view, and "Back to the step", which restores the step's view after the
student has explored from it.

A lesson opens from a link (``lesson`` names a bundled lesson or carries one packed, ``step``
counts from 1), from the server's MHA_VIZ_LESSON on a session's first run, or from the *Lesson*
panel (`lesson_panel`: an upload, the bundled lesson, the lesson being built). Opening a step puts
its view in the sidebar's inputs exactly (`links.open_view`) and switches to its page; the rest of
the app is as usual, so the student may explore within the step.
"""

from __future__ import annotations

import streamlit as st

from mha_viz.export import lesson as lessons
from mha_viz.ui.kit import keys, page_controls, resources, session
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import links
from mha_viz.ui.shell import navigation as pages


def following() -> lessons.Lesson | None:
    """The lesson this session follows, if any."""
    return session.get(keys.LESSON)


def index() -> int:
    """The step this session is on (from 0)."""
    return int(session.get(keys.LESSON_STEP) or 0)


def follow(lesson: lessons.Lesson, source: str | None, at: int = 0, *, open_step: bool = True) -> None:
    """Follow `lesson` (`source`: what a link's ``lesson`` says to open it again, None when a link
    cannot), on step `at` (clamped), whose view opens unless `open_step` is False."""
    session.put_all((keys.LESSON, keys.LESSON_SOURCE), (lesson, source))
    at = min(max(at, 0), len(lesson.steps) - 1)
    if open_step:
        go(at)
    else:
        session.put(keys.LESSON_STEP, at)


def go(at: int) -> None:
    """Open step `at` of the lesson followed: its view in the inputs, exactly, and its page next."""
    lesson = following()
    if lesson is None or not 0 <= at < len(lesson.steps):
        return
    step = lesson.steps[at]
    session.put(keys.LESSON_STEP, at)
    links.open_view(step.link, exact=True)
    session.put(keys.GOTO, step.page)


def leave() -> None:
    """Stop following the lesson (the view stays as it is)."""
    for key in (keys.LESSON, keys.LESSON_STEP, keys.LESSON_SOURCE):
        session.pop(key)


def _step_number(value: str | None) -> int:
    """A link's ``step`` (from 1) as an index; 0 when it is not a step number."""
    value = (value or "").strip()
    return int(value) - 1 if value.isdigit() and 0 < len(value) <= 4 else 0


def _from_link(value: str) -> tuple[lessons.Lesson | None, str | None]:
    """(the lesson a link's ``lesson`` value names or carries, why it cannot be opened)."""
    conf = resources.settings()
    bundled = lessons.bundled()
    try:
        if lessons.is_name(value):
            if value not in bundled:
                return None, (f"The link's lesson “{value[:40]}” is not one of this app's lessons "
                              f"({', '.join(bundled)}).")
            data = bundled[value]
        else:
            data = lessons.unpack(value)
        return lessons.read_lesson(data, pages=pages.lesson_ids(), allowed_models=conf.models,
                                   public=conf.public, controls=page_controls.CONTROLS,
                                   allow_pickle=conf.allow_pickle), None
    except lessons.LessonError as exc:
        return None, f"The link's lesson could not be opened: {exc}"


def read_link() -> None:
    """On the session's first run, before the sidebar draws: the link's lesson, else the server's
    (MHA_VIZ_LESSON), on the link's step. The step's view opens unless the link carries a view of
    its own (a student's link after exploring: `links.read` opens that)."""
    if session.get(keys.LESSON_READ):
        return
    session.put(keys.LESSON_READ, True)
    params = st.query_params.to_dict()
    value = params.get("lesson")
    if value:
        lesson, why = _from_link(value)
        source = value
    else:
        (lesson, why), source = resources.server_lesson(), None
    if why:
        session.put(keys.LESSON_MESSAGE, why)
    if lesson is not None:
        follow(lesson, source, _step_number(params.get("step")), open_step=not links.has_view())


def url_params() -> dict[str, str]:
    """The lesson and step this session follows, as a link's parameters (none when it follows none)."""
    lesson = following()
    if lesson is None:
        return {}
    source = session.get(keys.LESSON_SOURCE)
    return ({"lesson": source} if source else {}) | {"step": str(index() + 1)}


def bar() -> None:
    """The lesson's controls, pinned at the foot of the main area (`st.bottom`), in sight however far the page is
    scrolled: title, "Step k of N", Back, Next, "Back to the step" and "Leave the lesson"; nothing when no lesson is
    followed. (Raw CSS to make a bar stick would be raw HTML, which the app draws nowhere.)"""
    lesson = following()
    if lesson is None:
        return
    at, total = index(), len(lesson.steps)
    with st.bottom.container(key=keys.LESSON_BAR):  # pinned under the main area: in sight as the page scrolls
        where, back, forward, restore, leave_it = st.columns((3, 1, 1, 1.4, 1.4), vertical_alignment="center")
        where.markdown(f"**{plain(lesson.title)}** · Step {at + 1} of {total}")
        back.button("Back", key=keys.LESSON_BACK, icon=":material/arrow_back:", disabled=at == 0,
                    on_click=go, args=(at - 1,), width="stretch")
        forward.button("Next", key=keys.LESSON_NEXT, icon=":material/arrow_forward:", disabled=at + 1 >= total,
                       on_click=go, args=(at + 1,), width="stretch", type="primary")
        restore.button("Back to the step", key=keys.LESSON_RESTORE, icon=":material/restart_alt:", on_click=go,
                       args=(at,), width="stretch",
                       help="Open this step's view again, as the lesson set it (page, model, text, head "
                            "and options), after exploring from it.")
        leave_it.button("Leave the lesson", key=keys.LESSON_LEAVE, icon=":material/logout:", on_click=leave,
                        width="stretch", help="Stop following the lesson; the view stays as it is.")


def note(page_id: str | None = None) -> None:
    """Above the view: a message about a lesson that could not be opened (once), and the note of
    the step followed (Markdown as written; raw HTML is shown as text, formulas in $…$). On another page than the
    step's (`page_id`, the page on screen: the student explored, or a link's step names another page's), the
    caption says whose page the note is and how to go back to it."""
    why = session.pop(keys.LESSON_MESSAGE, None)
    if why:  # it quotes the file or the link: shown as typed
        st.error(plain(why), icon=":material/error:")
    lesson = following()
    if lesson is None:
        return
    at = index()
    step = lesson.steps[at]
    with st.container(border=True, key=keys.LESSON_NOTE_BOX):
        title = pages.BY_ID[step.page].title if step.page in pages.BY_ID else step.page
        elsewhere = page_id is not None and page_id != step.page
        st.caption(f"Step {at + 1} of {len(lesson.steps)} · {plain(title)}" + (
            ": this note belongs to that page, not this one (*Back to the step* opens it)."
            if elsewhere else ""))
        if step.note.strip():
            st.markdown(step.note)
