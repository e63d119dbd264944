"""The controls that shape each page's view, declared once by each feature (its record's `controls`, in
`mha_viz/features/<id>/controls.py`): what a shared link and a lesson step carry besides the sidebar's inputs and
the shared head (the token in focus, the metric, the window, the page's toggles…), each a widget key of `keys` and
the link parameter of that name.

`written` reads a page's controls for its link (`links.view_link`), `reset` puts every control
back to its page's default before a lesson step opens, and `restore` checks a link's values (the
control's `read`, the run's bounds) and puts them in the widgets once the run exists
(`links.apply_pending`), with a notice for each value it leaves out. A page adding a control that
shapes its view adds it to its feature's controls; `tests/app/test_app_lesson_choices.py` walks a lesson built on every
page with a choice of each page's own controls.

The heads switched off on *Switch heads off* are a control whose value is no widget's (`DERIVED`:
`heads_off`). What is left out, and why: the importance's k (computed on demand), Generate's
generation (made by a button: a step keeps its settings), a corpus' documents, and the pickers
of the shared head (the link's ``layer`` and ``head``). This module imports no page: the lesson
readers (`resources` among them) use it.
"""

from __future__ import annotations

from typing import Any, Callable

from mha_viz import catalogue
from mha_viz.export import link_params, shared_controls
from mha_viz.export import view_params as vp
from mha_viz.ui.kit import heads_off, keys, session

# each page's controls that links and lesson steps carry, from its feature's record (`features/<id>/controls.py`), in
# the navigation's order; its `vp.local` controls are its inputs that no link carries, each with why
BY_PAGE: dict[str, tuple[vp.Control, ...]] = {f.id: tuple(c for c in f.controls if c.carried)
                                              for f in catalogue.features()}
WALK_START = shared_controls.WALK_START  # the walkthrough's window: Teaching and Queries and keys share it
CONTROLS: dict[str, vp.Control] = catalogue.link_controls()  # by link parameter; one entry a control pages share
# the inputs of the sidebar and the kit's widgets that no link carries as a page control, and why (a feature's own
# are its local controls; tests/unit/test_view_params.py checks that every input widget of the UI is one or the other)
KIT_NOT_CARRIED = frozenset({
    # the sidebar's inputs: the link's own parameters (model, text, hide, mha, show, dtype), or the session's
    keys.MODEL_CHOICE, keys.MODEL_OTHER, keys.TEXT, keys.EXAMPLE, keys.TOKEN_LIMIT, keys.DEVICE, keys.PRECISION,
    keys.LOCAL_ATTENTION, keys.HIDE_SPECIAL, keys.HIDE_FIRST, keys.LENS, keys.CAPTURE_LAYERS,
    # the sidebar's chat (an instruct model's messages): not in links yet
    keys.CHAT_MODE, keys.CHAT_SYSTEM, keys.CHAT_USER, keys.CHAT_REPLY, keys.HIDE_TEMPLATE,
    # an encoder–decoder's target and part, the sidebar's too: not in links yet (a link opens its encoder)
    keys.TARGET, keys.ATTN_PART,
    # the link's own parameter: the head view's detail (detail)
    keys.HEAD_DETAIL,
    # a hybrid's other layer and group the Head view draws (issue 55): not in links yet
    keys.EFFECTIVE_LAYER_PICK, keys.EFFECTIVE_GROUP_PICK,
    # the pair's preset (the prediction's and the circuit's pages): it acts once, setting the sidebar's text and
    # the corrupted text
    keys.PRED_PRESET,
    # the downloads' settings, the Lesson panel itself
    keys.LESSON_FILE, keys.LESSON_NOTE, keys.LESSON_TITLE, keys.EXPORT_FORMAT, keys.EXPORT_SIZE, keys.EXPORT_HALF,
    keys.EXPORT_HEADS,
})
NOT_CARRIED = KIT_NOT_CARRIED | {c.name for f in catalogue.features() for c in f.controls if not c.carried}
# the controls whose value lives elsewhere than under their name: (read it for the app's current state,
# put a link's value in for the model on screen (a notice or None), put every default back)
DERIVED: dict[str, tuple[Callable, Callable, Callable]] = {
    heads_off.PARAM: (heads_off.off_labels, heads_off.apply_labels, heads_off.all_on)}


def _size(control: vp.Control, cur) -> int | None:
    """The run's count that bounds `control` (its `upto`), or None when there is no run to bound it."""
    run = getattr(cur, "run", None)
    if run is None or getattr(cur, "stale", False):
        return None
    try:
        return {vp.TOKENS: vp.tokens_of(cur), vp.LAYERS: run.num_layers, vp.HEADS: run.num_heads}[control.upto]
    except (AttributeError, KeyError):  # a part of an encoder–decoder without one axis
        return None


def _default(control: vp.Control, cur) -> str | None:
    value: Any = control.default
    if callable(value):
        try:
            value = value(cur)
        except (AttributeError, TypeError, IndexError):  # no run: no default to leave out
            return None
    return None if value is None else control.write(value)


def carried_now(control: vp.Control) -> bool:
    """Whether a link of the view on screen carries `control`: always, unless it is carried only while another
    control holds one value (`only_when`: Compare's sentence B in its mode ``texts``) and that one holds another."""
    return not control.only_when or session.get(control.only_when[0]) == control.only_when[1]


def written(page_id: str, cur) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(page `page_id`'s controls as a link's (name, value) pairs, what the page opens on): each
    control that holds a value of its kind (and whose `only_when` holds), in declaration order."""
    values, defaults = [], []
    for control in BY_PAGE.get(page_id, ()):
        if not carried_now(control):
            continue
        text = control.write(DERIVED[control.name][0](cur) if control.name in DERIVED else session.get(control.name))
        if text is not None:
            values.append((control.link_name, text))
            if (default := _default(control, cur)) is not None:
                defaults.append((control.link_name, default))
    return tuple(values), tuple(defaults)


def reset() -> None:
    """Every page's controls back to their defaults (a lesson step opens the same whatever the
    student chose before): each page puts its default in when it draws."""
    for control in CONTROLS.values():
        if control.name in DERIVED:
            DERIVED[control.name][2]()
        else:
            session.pop(control.name, None)


def restore(link: link_params.Link, cur) -> list[str]:
    """Put `link`'s page values in the widgets of the run on screen `cur`; a notice for each value
    its control does not take, or the run cannot show (the page then opens on its default)."""
    notices, restored, waiting = [], set(), []
    for name, text in link.page:
        control = CONTROLS.get(name)
        if control is None:
            notices.append(f"The link's {name} is not a control of this app: it was ignored.")
            continue
        try:
            value = control.read(text)
        except ValueError as exc:
            notices.append(f"The link's {name} “{text[:40]}” {exc}: it was ignored.")
            continue
        if control.upto is not None:
            size = _size(control, cur)
            if size is None:
                waiting.append(name)
                continue
            if not control.within(value, size):
                notices.append(f"The link's {name} “{text[:40]}” is past this run's {size} {control.upto}: "
                               "the page opens on its default.")
                continue
        if control.name in DERIVED:
            if getattr(cur, "model", None) is None or getattr(cur, "stale", False):
                waiting.append(name)
            elif notice := DERIVED[control.name][1](cur, value):
                notices.append(notice)
            continue
        session.put(control.name, value)
        restored.add(control.name)
    if waiting:
        notices.append(f"The link's {', '.join(waiting)} {'was' if len(waiting) == 1 else 'were'} not applied: "
                       "its text could not be analysed.")
    session.put(keys.PAGE_RESTORED, restored)
    return notices


def just_restored(name: str) -> bool:
    """Whether a link has just put this control's value (once: a page that starts a control afresh
    with a new run keeps the link's value instead, the first time)."""
    restored = session.get(keys.PAGE_RESTORED) or set()
    if name in restored:
        restored.discard(name)
        return True
    return False
