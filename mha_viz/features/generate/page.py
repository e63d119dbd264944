"""The Generate page: the model continues the sidebar's text token by token (streamed, with
progress, stoppable), then the result is stepped through (slider or *Play*): the chosen token
among the 10 best, every head's attention from the query that chose it, one head's causal
matrix with that row framed, and where that head looked over the steps. *Analyse prompt +
generation* sends the whole sequence to every other page.

The last good generation stays in session_state keyed by what produced it (`GenKey`);
while one streams, each step is kept too (`generate_keys.GEN_PARTIAL`), so that a *Stop* (any widget
pressed while the script runs interrupts it) leaves the tokens generated so far.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

import streamlit as st

import mha_viz
import mha_viz_models
from mha_viz import catalogue
from mha_viz.budget import turns
from mha_viz.capture import generation
from mha_viz.drawing import chat_roles as role_figures
from mha_viz.features.generate import controls as generate_keys
from mha_viz.features.generate import figures as gfig
from mha_viz.generate_text import plan_generation
from mha_viz.text import chat
from mha_viz.text.tokenize import count_text
from mha_viz.ui.kit import charts, jobs, keys, plans, resources, seq2seq_views, session, shared_head
from mha_viz.ui.kit import text as text_kit
from mha_viz.ui.kit.analysis_key import ModelKey
from mha_viz.ui.kit.jobs import live_button
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import sidebar, state

# --- step_player: *Generate*'s step player: one generated token at a time (its slider, the shared head's pickers,
# *Play* and *Pause*), each step drawn into the same boxes: the next-token bars, every head's attention from the
# query that picked it, the head's matrix and its lines (`mha_viz.features.generate.figures.step_figures`).

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
        with turns.away():  # the pause between steps leaves the run's turn to another session's
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


MAX_NEW_TOKENS = 1024  # the widget's top; the token cap decides what fits (and says so)
SUGGESTED = ("smollm2", "toy-induction")  # decoders to offer when the model cannot generate
DEFAULTS = {generate_keys.GEN_MAX_NEW: 16, generate_keys.GEN_TEMPERATURE: 0.0, generate_keys.GEN_TOP_K: 50,
            generate_keys.GEN_TOP_P: 1.0, generate_keys.GEN_SEED: 0}
ENDED = {"eos": "the model wrote its end-of-text token", "length": "max new tokens reached", "stopped": "stopped"}
STOP_HELP = "Stop generating; the tokens so far are kept."


class GenKey(NamedTuple):
    """What one generation was computed from: the model, the prompt, the token cap and the settings."""

    model: ModelKey
    prompt: str
    cap: int
    max_new_tokens: int
    temperature: float
    top_k: int
    top_p: float
    seed: int


def generate_page() -> None:
    """The page (its controls keep their values across page switches: persist_state)."""
    st.title(catalogue.feature("generate").page_title)
    cur = state.current()
    model = cur.text_model
    _stopped_notice()
    prompt = session.get(keys.TEXT) or ""
    if not prompt.strip():
        st.info("The prompt is empty: type one in the sidebar's Sentence box, and the model continues it.",
                icon=":material/edit:")
    elif model is None:
        if cur.error:
            st.error(plain(cur.error), icon=":material/warning:")
        elif cur.notice:
            st.info(cur.notice, icon=":material/edit:")
    elif model.is_encoder_decoder:  # it writes its target in the sidebar: step through it here
        seq2seq_views.steps_view(cur, generate_keys.S2S_STEP)
        return
    elif (reason := _cannot_generate(model)) is not None:
        _offer_decoders(reason)
    else:
        wanted, buttons, plan = _controls(cur)
        if wanted is not None:
            _generate(wanted, buttons, plan)
        _result(cur, _current_key(cur))
        return
    _result(cur, None)  # the last good generation stays on screen


def _cannot_generate(model: mha_viz.LoadedModel) -> str | None:
    """Why this model cannot write text (an encoder, no language-model head), or None."""
    try:
        generation.check_decoder(model)
    except mha_viz.InputError as exc:
        return str(exc)
    return None


def _offer_decoders(reason: str) -> None:
    """The reason (which names the bundled decoders), and buttons that switch to one of them (nothing to press that
    would fail)."""
    offered = [m for m in SUGGESTED if m in mha_viz_models.BUNDLED and resources.settings().allows(m)]
    st.info(plain(reason) + (" Switch to one here:" if offered else " Pick a decoder in the sidebar's model picker."),
            icon=":material/info:")
    for col, name in zip(st.columns(max(len(offered), 1) + 2), offered):
        col.button(f"Use {name}", key=generate_keys.GEN_USE + name, on_click=_use_model, args=(name,))


def _use_model(name: str) -> None:
    sidebar.choose(model=name)

def _current_key(cur) -> GenKey:
    return GenKey(cur.model_key, cur.text, resources.token_cap(), int(session.need(generate_keys.GEN_MAX_NEW)),
                  float(session.need(generate_keys.GEN_TEMPERATURE)), int(session.need(generate_keys.GEN_TOP_K)),
                  float(session.need(generate_keys.GEN_TOP_P)), int(session.need(generate_keys.GEN_SEED)))


def _controls(cur):
    """The settings and the *Generate* / *Stop* buttons: (the key to generate when pressed, else
    None; the buttons; the generation planned, `generate_text.plan_generation`). A generation that would not fit
    (`generation.check_limits`) is refused here, while planning, with no buttons: (None, None, None)."""
    for key, value in DEFAULTS.items():
        session.setdefault(key, value)
    model = cur.text_model
    cols = st.columns(5)
    cols[0].number_input("Max new tokens", min_value=1, max_value=MAX_NEW_TOKENS, step=1,
                         key=generate_keys.GEN_MAX_NEW, persist_state=keys.KEEP,
                         help="How many tokens to generate at most; prompt and new tokens together stay "
                              "within the sidebar's token limit.")
    cols[1].number_input("Temperature", min_value=0.0, max_value=5.0, step=0.1, key=generate_keys.GEN_TEMPERATURE,
                         persist_state=keys.KEEP,
                         help="0: greedy, always the most probable token. Above 0: sample; higher is "
                              "more random.")
    cols[2].number_input("Top-k", min_value=1, max_value=1_000_000, step=1, key=generate_keys.GEN_TOP_K,
                         persist_state=keys.KEEP,
                         help="Sample only among the k most probable tokens (when the temperature is above 0).")
    cols[3].number_input("Top-p", min_value=0.01, max_value=1.0, step=0.05, key=generate_keys.GEN_TOP_P,
                         persist_state=keys.KEEP,
                         help="Sample only among the most probable tokens whose probabilities add up to p "
                         "(nucleus sampling; when the temperature is above 0).")
    cols[4].number_input("Seed", min_value=0, max_value=2**31 - 1, step=1, key=generate_keys.GEN_SEED,
                         persist_state=keys.KEEP, help="The same seed gives the same sample.")
    limit = mha_viz.text.token_limit(model, resources.token_cap())
    try:  # reads only the part of a long text that the limit needs
        prompt = mha_viz.tokenize(model, cur.text, limit)
        n, count = prompt.total, count_text(prompt.total, prompt.total_is_estimate)
    except mha_viz.InputError:  # no text yet
        prompt, n, count = None, 0, "0"
    fits = max(limit - n, 0)
    st.caption(f"The prompt is the sidebar's text: {count} tokens for {plain(model.name)}. Prompt and "
               f"generation together stay within {limit:,} tokens (the token limit and the model's positions), "
               f"so up to {fits:,} new tokens fit" + (f"; one generation writes at most {MAX_NEW_TOKENS:,} (*Max new "
                                                       "tokens*)." if fits > MAX_NEW_TOKENS else "."))
    try:  # planned once: what would not fit is said before the button, not after the work
        new = int(session.need(generate_keys.GEN_MAX_NEW))
        plan = None if prompt is None else plan_generation(model, cur.text, new, max_tokens=resources.token_cap())
    except mha_viz.InputError as exc:
        st.warning(plain(str(exc)), icon=":material/memory:")
        return None, None, None
    buttons = jobs.buttons("Generate", generate_keys.GEN_GO, cancel_key=generate_keys.GEN_STOP, cancel_label="Stop",
                           cancel_help=STOP_HELP, widths=(1, 1, 5))
    return (_current_key(cur) if buttons.pressed and plan is not None else None), buttons, plan


def _generate(key: GenKey, buttons: jobs.Buttons, plan) -> None:
    """Stream a generation for `key`, as planned (`plan`: its prompt read, checked and priced); on success it becomes
    the last good one. `buttons`: *Generate* and *Stop*, which is greyed out once done."""
    stream = st.empty()

    def work(progress: jobs.Progress):
        def on_step(gen) -> None:
            session.put(generate_keys.GEN_PARTIAL, (key, gen))  # first: the draw below is where a Stop interrupts
            stream.code(text_kit.tail(key.prompt) + gen.text, language=None, wrap_lines=True)  # a long prompt folded
        return plans.run_admitted(plan, temperature=key.temperature, top_k=key.top_k, top_p=key.top_p,
                                  seed=key.seed, progress=progress, on_step=on_step)
    # (key, None) stays under GEN_PARTIAL when this run is stopped, (key, the tokens so far) once one came
    gen, error = jobs.run(generate_keys.GEN_PARTIAL, (key, None), work, first="Starting…", what="The generation",
                          out_of_memory="This generation needs more memory than this machine has free. Ask for "
                                        "fewer new tokens, lower the token limit in the sidebar, pick a lower "
                                        "precision or a smaller model.")
    stream.empty()
    buttons.idle()
    if error:
        st.error(plain(error) + " The last generation (if any) is kept below.", icon=":material/warning:")
        return
    session.put(generate_keys.GEN_LAST, (key, gen, None))
    session.put(generate_keys.GEN_STEP, 1)


def _stopped_notice() -> None:
    """A generation that a Stop (or any other widget) interrupted: keep what it had produced."""
    partial = jobs.cancelled(generate_keys.GEN_PARTIAL)
    if partial is None:
        return
    key, gen = partial
    if gen is not None and gen.steps:
        k = len(gen.steps)
        try:  # a long generation's prompt rows: one scan of the prompt, made once, now
            with st.spinner("Reading the prompt's rows for the views (one scan of the prompt)…"):
                gen.run.rows(0, 0, 0, 1)
        except mha_viz.InputError as exc:
            st.error(plain(str(exc)) + " The last generation (if any) is kept below.", icon=":material/warning:")
            return
        session.put(generate_keys.GEN_LAST, (key, gen, f"stopped after {k} token{'s' * (k != 1)}"))
        session.put(generate_keys.GEN_STEP, 1)
        st.warning(f"Stopped after {k} token{'s' * (k != 1)}: the partial generation is below.",
                   icon=":material/stop_circle:")
    else:
        st.info("Stopped before the first token; the last generation (if any) is kept.", icon=":material/stop_circle:")


def _result(cur, wanted: GenKey | None) -> None:
    last = session.get(generate_keys.GEN_LAST)
    if last is None:
        if wanted is not None:
            st.caption("Press *Generate*: the tokens appear as the model writes them; then step through "
                       "them.")
        return
    key, gen, note = last
    st.divider()
    st.subheader("The generation")
    T, P = len(gen.steps), gen.num_prompt_tokens
    ended = note or ENDED.get(gen.stopped_by, str(gen.stopped_by))
    how = "greedy" if key.temperature == 0 else (
        f"sampled at temperature {key.temperature:g}, top-k {key.top_k}, top-p {key.top_p:g}, seed {key.seed}")
    st.caption(f"{plain(key.model.name)}: {T} new token{'s' * (T != 1)} after a {P}-token prompt, "
               f"{how}; ended: {plain(ended)}.")
    if wanted != key:
        st.caption("Made from another prompt, model or settings than the current ones: press *Generate* for "
                   "these." if wanted is not None else "The last good generation.")
    st.code(gen.text, language=None, wrap_lines=True)
    if cur.model_key == key.model and cur.text_model is not None:
        in_chat = cur.chat is not None and cur.text == key.prompt
        st.button("Analyse the chat with this reply" if in_chat else "Analyse prompt + generation",
                  key=generate_keys.GEN_ANALYSE, on_click=_analyse, args=(cur.text_model, key, gen, in_chat),
                  help="A chat: the generation becomes the assistant's reply in the sidebar (every token keeps its "
                       "role). A text: prompt + generation becomes the sidebar's text. The head view opens; every "
                       "page then reads the whole sequence.")
    told = None  # a chat's generation: the prompt's roles, then the reply's (the assistant's)
    if cur.chat is not None and cur.text == key.prompt and cur.text_model is not None:
        told = cur.chat.with_reply(P, [step.token_id for step in gen.steps],
                                   set(cur.text_model.tokenizer.all_special_ids))
    steps(gen, told)


def sequence_text(model: mha_viz.LoadedModel, prompt: str, gen, cap: int) -> str:
    """The text of prompt + generation: the one whose tokens are the generated sequence (the
    continuation may need a space before it, as with toy-induction's letters)."""
    joined = prompt + gen.text
    for text in (joined, prompt + " " + gen.text.lstrip(), getattr(gen, "full_text", "")):
        try:
            if mha_viz.tokenize(model, text, cap).ids == list(gen.run.token_ids):
                return text
        except mha_viz.InputError:
            pass
    return joined


def _analyse(model: mha_viz.LoadedModel, key: GenKey, gen, in_chat: bool = False) -> None:
    if in_chat:  # the reply, up to the turn's end the model wrote (the template writes its own)
        session.put(keys.CHAT_REPLY, chat.reply_of(model, [step.token_id for step in gen.steps]))
    else:
        sidebar.choose(text=sequence_text(model, key.prompt, gen, key.cap))  # the head view opens on the shared head
    session.put(keys.GOTO, "head_view")
