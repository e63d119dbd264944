"""The controls that shape each page's view, declared once, page by page: what a shared link and a
lesson step carry besides the sidebar's inputs and the shared head (the token in focus, the metric,
the window, the page's toggles…), each a widget key of `keys` and the link parameter of that name.

`written` reads a page's controls for its link (`links.view_link`), `reset` puts every control
back to its page's default before a lesson step opens, and `restore` checks a link's values (the
control's `read`, the run's bounds) and puts them in the widgets once the run exists
(`links.apply_pending`), with a notice for each value it leaves out. A page adding a control that
shapes its view adds it here; `tests/app/test_app_lesson_choices.py` walks a lesson built on every
page with a choice of each page's own controls.

The heads switched off on *Switch heads off* are a control whose value is no widget's (`DERIVED`:
`heads_off`). What is left out, and why: the importance's k (computed on demand), Generate's
generation (made by a button: a step keeps its settings), a corpus' documents, and the pickers
of the shared head (the link's ``layer`` and ``head``). This module imports no page: the lesson
readers (`resources` among them) use it.
"""

from __future__ import annotations

from typing import Any, Callable

from mha_viz.export import link_params
from mha_viz.export import view_params as vp
from mha_viz.figures.scatter import COLOURS, DEFAULT_X, DEFAULT_Y, LAYER
from mha_viz.metrics.cross_attention import COLUMNS as CROSS_COLUMNS
from mha_viz.metrics.measures import METRICS, SIMILARITIES
from mha_viz.ui import heads_off, keys, session
from mha_viz.ui import task_choices as task
from mha_viz.views import focus, qk

_FIRST_METRIC = next(iter(METRICS))


def _tokens(cur) -> int:
    """Every token of the run on screen, hidden ones included (positions are the model's)."""
    return (cur.full_run or cur.run).n


def _last_shown(cur) -> int:
    hidden = getattr(cur.run, "hidden", None)
    return int(hidden.kept[-1]) if hidden is not None else cur.run.n - 1


def _first_shown(cur) -> int:
    hidden = getattr(cur.run, "hidden", None)
    return int(hidden.kept[0]) if hidden is not None else 0


def _scatter(x: str, y: str, colour: str) -> tuple[vp.Control, ...]:
    """The choices of a page's heads on two measures (`ui.head_scatter_view`)."""
    return (vp.choice(x, tuple(METRICS), default=DEFAULT_X), vp.choice(y, tuple(METRICS), default=DEFAULT_Y),
            vp.choice(colour, COLOURS, default=LAYER))


# the walkthrough's window (`walk_window`): the Teaching and Queries and keys pages share it
WALK_START = vp.number(keys.TEACH_START, 0, upto=vp.TOKENS, default=0)

BY_PAGE: dict[str, tuple[vp.Control, ...]] = {
    "model_view": (vp.flag(keys.GRID_RESCALE, default=True),),
    "head_view": (
        vp.flag(keys.HEAD_RESCALE),
        vp.span(keys.HEAD_WINDOW, default=lambda cur: (0, min(cur.run.n, 96))),
        vp.flag(keys.SUBSET_PICK),
        vp.span(keys.SUBSET_QUERIES, default=lambda cur: (0, min(cur.run.n, 96))),
        vp.span(keys.SUBSET_KEYS, default=lambda cur: (0, min(cur.run.n, 96))),
        vp.picks(keys.SUBSET_QUERY_LIST, upto=vp.TOKENS),
        vp.picks(keys.SUBSET_KEY_LIST, upto=vp.TOKENS),
        vp.flag(keys.WHY_PATTERN),
        vp.number(keys.WHY_QUERY, 0, upto=vp.TOKENS, default=_last_shown),
        vp.number(keys.WHY_KEY, 0, upto=vp.TOKENS, default=_first_shown),
        vp.number(keys.WHY_SECOND, -1, upto=vp.TOKENS, default=-1),
        # the Links section (head_links_view): positions of the run on screen, clamped by the section
        vp.number(keys.LINKS_STRIP, 0, default=0),
        vp.flag(keys.LINKS_SKIP_FIRST),
    ),
    "focus": (
        vp.number(keys.FOCUS_TOKEN, 0, upto=vp.TOKENS, default=lambda cur: min(1, cur.run.n - 1)),
        vp.choice(keys.FOCUS_LEVEL, ("tokens", "words"), default="tokens"),
        vp.choice(keys.FOCUS_SHOW, ("both", focus.TO, focus.BY), default="both"),
        vp.flag(keys.FOCUS_RESCALE),
        vp.flag(keys.FOCUS_SUMMARIES),
        vp.number(keys.FOCUS_KEY, 0, upto=vp.TOKENS),
        # an encoder–decoder's cross-attention (the sidebar's part *Cross*)
        vp.choice(keys.CROSS_FOCUS_SIDE),
        vp.number(keys.CROSS_FOCUS_TOKEN, 0, default=0),
        vp.flag(keys.CROSS_FOCUS_RESCALE),
    ),
    "lines": (
        vp.number(keys.LINE_LAYER, 0, upto=vp.LAYERS),
        vp.picks(keys.LINE_HEADS, upto=vp.HEADS, default=lambda cur: list(range(cur.run.num_heads))),
        vp.number(keys.LINE_THRESHOLD, 0, 1, integer=False, default=0.0),
        vp.choice(keys.LINE_SIDE, ("query", "key"), default="query"),
        vp.number(keys.LINE_TOKEN, -1, upto=vp.TOKENS, default=-1),
        vp.span(keys.LINE_WINDOW, default=(0, 128)),
    ),
    "compare_heads": (vp.picks(keys.COMPARE_HEADS, text=True), vp.flag(keys.COMPARE_RESCALE, default=None)),
    "across_layers": (
        vp.choice(keys.LAYERS_METHOD, ("rollout", "rollout through one head", "flow"), default="rollout"),
        vp.number(keys.LAYERS_LAYER, 0, upto=vp.LAYERS, default=lambda cur: cur.run.num_layers - 1),
        vp.number(keys.LAYERS_HEAD, 0, upto=vp.HEADS, default=0),
    ),
    "generate": (
        vp.number(keys.GEN_MAX_NEW, 1, 1024, default=16),
        vp.number(keys.GEN_TEMPERATURE, 0, 5, integer=False, default=0.0),
        vp.number(keys.GEN_TOP_K, 1, 1_000_000, default=50),
        vp.number(keys.GEN_TOP_P, 0.01, 1, integer=False, default=1.0),
        vp.number(keys.GEN_SEED, 0, 2**31 - 1, default=0),
        vp.number(keys.GEN_STEP, 1, 1_000_000),
        vp.flag(keys.GEN_RESCALE),
        vp.number(keys.S2S_STEP, 1, 1_000_000, default=1),  # an encoder–decoder's steps
    ),
    "head_metrics": (vp.choice(keys.METRIC_CHOICE, tuple(METRICS), default=_FIRST_METRIC),
                     vp.choice(keys.CROSS_METRIC_CHOICE, tuple(CROSS_COLUMNS), default=next(iter(CROSS_COLUMNS))),
                     *_scatter(keys.SCATTER_X, keys.SCATTER_Y, keys.SCATTER_COLOUR)),
    "similarity": (
        vp.choice(keys.SIM_KIND, tuple(SIMILARITIES)),
        vp.choice(keys.SIM_ORDER, ("by layer", "clustered"), default="by layer"),
        vp.choice(keys.MAP_COLOUR, ("layer", "pattern"), default="layer"),
        vp.flag(keys.DIV_BASELINE, default=None),
    ),
    "composition": (
        vp.choice(keys.COMP_KIND, ("q", "k", "v"), default="q"),
        vp.number(keys.COMP_ABOVE, 0, 5, integer=False, default=2.0),
    ),
    "corpus": (
        vp.choice(keys.CORPUS_METRIC, tuple(METRICS), default=_FIRST_METRIC),
        vp.number(keys.CORPUS_TOKENS, 2, 512, default=128),
        vp.number(keys.CORPUS_FIRST, 0, default=0),
        vp.choice(keys.CORPUS_BATCH, (8, 16, 32), default=16),
        *_scatter(keys.CORPUS_SCATTER_X, keys.CORPUS_SCATTER_Y, keys.CORPUS_SCATTER_COLOUR),
    ),
    "examples": tuple(vp.choice(key) for key in (keys.EXAMPLES_X, keys.EXAMPLES_Y, keys.EXAMPLES_RANK)),
    "compare": (vp.flag(keys.CMP_RESCALE), vp.choice(keys.CMP_METRIC, tuple(METRICS), default=_FIRST_METRIC)),
    # its pair and circuit are the link's own parameters (corrupted, answer, wrong, circuit, k); a task's choices
    "prediction": (
        vp.choice(keys.PRED_TASK, task.TASKS, default=task.TASKS[0]),
        vp.choice(keys.TASK_SOURCE, tuple(task.SOURCES), default=next(iter(task.SOURCES))),
        vp.number(keys.TASK_SIZE, 2, task.MAX_PAIRS, default=task.DEFAULTS[keys.TASK_SIZE]),
        vp.number(keys.TASK_SEED, 0, 2**31 - 1, default=0),
        vp.choice(keys.TASK_METHOD, tuple(task.METHODS), default=next(iter(task.METHODS))),
        vp.number(keys.TASK_K, 1, task.MAX_DRAWN, default=task.DEFAULT_DRAWN),  # a task's circuit: edges drawn
    ),
    "teaching": (
        vp.choice(keys.TEACH_PART, ("1–2 · Input, Q, K, V", "3–6 · Scores to probabilities", "7–9 · Output",
                                    "What it costs", "Demonstrations"), default="1–2 · Input, Q, K, V"),
        vp.choice(keys.TEACH_DEMO, ("Why projections", "Why several heads", "Masks")),
        vp.number(keys.TEACH_ROW, 0, 63, upto=vp.TOKENS, default=lambda cur: min(_tokens(cur), 64) // 2),
        WALK_START,
    ),
    "ablation": (
        vp.choice(keys.ABLATE_MODE, ("zeroed (ξ = 0)", "replaced by their mean output on this text"),
                  default="zeroed (ξ = 0)"),
        vp.choice(keys.ABLATION_OTHER, default="A cat is resting on a rug."),
        vp.choice(keys.IMP_SOURCE, ("this text", "a bundled sample paragraph"), default="this text"),
        vp.picks(heads_off.PARAM, text=True, default=[]),
    ),
    "qk": (
        vp.number(keys.QK_I, 0, upto=vp.TOKENS, default=lambda cur: min(_tokens(cur), 64) // 2),
        vp.number(keys.QK_J, 0, upto=vp.TOKENS, default=0),
        vp.choice(keys.QK_METHOD, qk.METHODS, default=qk.METHODS[0]),
        vp.flag(keys.QK_TRANSLATE),
        vp.number(keys.QK_TOP, 1, 10, default=lambda cur: min(3, _tokens(cur))),
        WALK_START,
    ),
    "model_facts": (),
}
CONTROLS: dict[str, vp.Control] = {c.name: c for controls in BY_PAGE.values() for c in controls}
# the pages' input widgets that no link carries as a page control, and why (tests/unit/test_view_params.py
# checks that every input widget of the UI is declared in BY_PAGE or here)
NOT_CARRIED = frozenset({
    # the sidebar's inputs: the link's own parameters (model, text, hide, mha, show, dtype), or the session's
    keys.MODEL_CHOICE, keys.MODEL_OTHER, keys.TEXT, keys.EXAMPLE, keys.TOKEN_LIMIT, keys.DEVICE, keys.PRECISION,
    keys.LOCAL_ATTENTION, keys.HIDE_SPECIAL, keys.HIDE_FIRST, keys.LENS, keys.CAPTURE_LAYERS,
    # an encoder–decoder's target and part, the sidebar's too: not in links yet (a link opens its encoder)
    keys.TARGET, keys.ATTN_PART,
    # the link's own parameters: the head view's detail, Compare's run B, the prediction's pair and circuit
    keys.HEAD_DETAIL, keys.CMP_MODE, keys.CMP_TEXT_B, keys.CMP_MODEL_B, keys.CMP_OTHER_B, keys.CMP_LOCAL_B,
    keys.PRED_CORRUPTED, keys.PRED_ANSWER, keys.PRED_WRONG, keys.CIRC_METHOD, keys.CIRC_K,
    # presets that act once (they set other inputs); a head a button opens or switches off
    keys.CMP_PAIR, keys.PRED_PRESET, keys.SUBSET_PRESET, keys.GRID_LAYER, keys.GRID_HEAD, keys.HEADS_LAYER_PICK,
    # the layer of the estimate by position follows the chosen head; the importance's k waits for the importance
    keys.PRED_POS_LAYER, keys.IMP_K,
    # the Links section's query opens on one of this head's that keeps keys, and its row's keys follow the query
    keys.LINKS_QUERY, keys.LINKS_ROW_KEYS,
    # a hybrid's other layer and group the Head view draws (issue 55): not in links yet
    keys.EFFECTIVE_LAYER_PICK, keys.EFFECTIVE_GROUP_PICK,
    # a corpus' documents and how its statistics are computed (importance: set afresh for each model, by its cost)
    keys.CORPUS_SOURCE, keys.CORPUS_PATH, keys.CORPUS_COLUMN, keys.CORPUS_FILE, keys.CORPUS_ENGINE,
    keys.CORPUS_IMPORTANCE,
    # uploads, the downloads' settings, the Lesson panel itself
    keys.CIRC_FILE, keys.TASK_FILE, keys.LESSON_FILE, keys.LESSON_NOTE, keys.LESSON_TITLE, keys.EXPORT_FORMAT,
    keys.EXPORT_SIZE,
    keys.EXPORT_HALF, keys.EXPORT_HEADS,
})
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
        return {vp.TOKENS: _tokens(cur), vp.LAYERS: run.num_layers, vp.HEADS: run.num_heads}[control.upto]
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


def written(page_id: str, cur) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """(page `page_id`'s controls as a link's (name, value) pairs, what the page opens on): each
    control that holds a value of its kind, in declaration order."""
    values, defaults = [], []
    for control in BY_PAGE.get(page_id, ()):
        text = control.write(DERIVED[control.name][0](cur) if control.name in DERIVED else session.get(control.name))
        if text is not None:
            values.append((control.name, text))
            if (default := _default(control, cur)) is not None:
                defaults.append((control.name, default))
    return tuple(values), tuple(defaults)


def reset() -> None:
    """Every page's controls back to their defaults (a lesson step opens the same whatever the
    student chose before): each page puts its default in when it draws."""
    for name in CONTROLS:
        if name in DERIVED:
            DERIVED[name][2]()
        else:
            session.pop(name, None)


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
        if name in DERIVED:
            if getattr(cur, "model", None) is None or getattr(cur, "stale", False):
                waiting.append(name)
            elif notice := DERIVED[name][1](cur, value):
                notices.append(notice)
            continue
        session.put(name, value)
        restored.add(name)
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
