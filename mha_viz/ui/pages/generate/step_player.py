"""*Generate*'s step player: one generated token at a time (its slider, the shared head's pickers, *Play* and
*Pause*), each step drawn into the same boxes: the next-token bars, every head's attention from the query that
picked it, the head's matrix and its lines (`mha_viz.features.generate.figures.step_figures`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import streamlit as st

from mha_viz.drawing import chat_roles as role_figures
from mha_viz.features.generate import controls as generate_keys
from mha_viz.features.generate import figures as gfig
from mha_viz.ui.kit import charts, keys, session, shared_head
from mha_viz.ui.kit.jobs import live_button
from mha_viz.ui.kit.text import plain

PLAY_DELAY_S = 0.6  # seconds between steps of *Play*


@dataclass
class _Boxes:
    """Where one step is drawn; *Play* redraws them in place."""

    header: object
    bars: object
    heads: object
    matrix: object
    lines: object


def _clamp(key: str, low: int, high: int, default: int) -> None:
    session.settle(key, min(max(int(session.get(key, default)), low), high))


def steps(gen, roles: tuple | None = None) -> None:
    """The generation `gen` step by step, from the step the slider holds; *Play* walks on from it. roles: (role,
    template) of each of its tokens, a chat's (`ChatText.with_reply`): drawn along the token axes."""
    run, T = gen.run, len(gen.steps)
    if T == 0:
        st.info("No token was generated: the model ended the text at once.", icon=":material/info:")
        return
    nxt = session.pop(generate_keys.GEN_STEP_NEXT, None)
    # Play reached nxt[0]; the slider was not moved
    if nxt is not None and session.get(generate_keys.GEN_STEP) == nxt[1]:
        session.put(generate_keys.GEN_STEP, nxt[0])
    _clamp(generate_keys.GEN_STEP, 1, T, 1)
    st.subheader("Step by step")
    if not run.is_dense:
        st.caption(f"{run.n} tokens: each view reads only the rows it draws, the matrix {gfig.MAX_MATRIX} at most.")
    cols = st.columns([4, 1, 1, 1])
    step = cols[0].slider("Step", 1, T, key=generate_keys.GEN_STEP, persist_state=keys.KEEP) if T > 1 else 1
    layer, head = shared_head.pick_head(run.layer_ids, run.num_heads, generate_keys.GEN_LAYER, generate_keys.GEN_HEAD,
                                   where=(cols[1], cols[2]))
    play = live_button(cols[3], "Play", generate_keys.GEN_PLAY, live=T > 1, help="Step through every token.")
    live_button(cols[3], "Pause", generate_keys.GEN_PAUSE, live=play, help="Stop playing at this step.")
    rescale = st.toggle("Rescale colours to the shown maximum", key=generate_keys.GEN_RESCALE, persist_state=keys.KEEP)
    header = st.empty()
    top = st.columns([2, 3])
    bottom = st.columns([3, 2])
    boxes = _Boxes(header, top[0].empty(), top[1].empty(), bottom[0].empty(), bottom[1].empty())
    if roles is not None:
        st.caption(role_figures.CAPTION)
    if not play:
        _draw(boxes, gen, step - 1, layer, head, rescale, roles)
        return
    for t in range(step if step < T else 0, T):  # from the next step (from the first at the end)
        _draw(boxes, gen, t, layer, head, rescale, roles)
        # a Pause (any widget) interrupts: the slider stays here
        session.put(generate_keys.GEN_STEP_NEXT, (t + 1, step))
        time.sleep(PLAY_DELAY_S)
    st.rerun()  # the slider shows the last step


def _draw(boxes: _Boxes, gen, t: int, layer: int, head: int, rescale: bool, roles: tuple | None = None) -> None:
    """Step t (0-based) into the boxes; `roles` (a chat's, of every token) along the context's and the matrix's
    token axes."""
    run, s, T = gen.run, gen.steps[t], len(gen.steps)
    q = gfig.query_row(gen.num_prompt_tokens, t)
    boxes.header.markdown(
        f"**Step {t + 1} of {T}**: the model picked “{plain(s.token)}” with probability {s.prob:.3f} "
        f"(entropy {s.entropy:.2f} nats), reading from “{plain(run.tokens[q])}” at position {q}.")
    figs = gfig.step_figures(gen, t, layer, head, rescale=rescale)
    if roles is not None:
        role, template = roles
        start, stop = gfig.matrix_window(run.n, q)
        figs["heads"] = role_figures.with_roles(figs["heads"], role[:q + 1], template[:q + 1], queries=False)
        figs["matrix"] = role_figures.with_roles(figs["matrix"], role[start:stop], template[start:stop])
    for view, where in zip(gfig.STEP_VIEWS, (boxes.bars, boxes.heads, boxes.matrix, boxes.lines)):
        charts.show(figs[view], where=where)
