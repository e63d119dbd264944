"""The *Retrieval heads* page (issue 56): the heads that copy a needle planted far back in a long text (Wu et al.
2024; `mha_viz.tasks.find_retrieval`). A needle sentence goes into the bundled documents at each chosen depth of a
prompt of the chosen length, a question after it; the sidebar's model answers greedily (through a long run past
the dense limit, so thousands of tokens read on a CPU); every head's score is drawn as a grid, and a click on a
head shows where it looked as the model wrote the first needle token it copied. The job has a progress bar and
Cancel; its last result stays in the session, keyed by what it was computed from."""

from __future__ import annotations

from typing import NamedTuple

import streamlit as st

import mha_viz
from mha_viz.capture import generation
from mha_viz.drawing import heads as head_figures
from mha_viz.features.retrieval import controls as retrieval_keys
from mha_viz.features.retrieval import figures as retrieval_figures
from mha_viz.features.retrieval.controls import DEFAULT_DEPTHS, DEFAULT_LENGTH, DEPTHS, MIN_LENGTH
from mha_viz.tasks import retrieval
from mha_viz.text.tokenize import InputError, token_limit
from mha_viz.ui.kit import charts, jobs, keys, notes, plans, session, shared_head
from mha_viz.ui.kit.analysis_key import ModelKey
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button, view_helpers

ROOM = 96  # tokens kept for an instruct model's chat template (about 35) and the answer (the needle's 25 and 4)


def room(limit: int) -> int:
    """The tokens kept for the answer out of a model's `limit`: ROOM, or a quarter of a small model's."""
    return min(ROOM, max(12, limit // 4))


FOUND = "Found for these choices: change the length, a depth, the needle or the question to search again."
MAX_NEEDLE_TOKENS = 4096  # read of a needle and question when checking that the model can read them


class RetrievalKey(NamedTuple):
    """What one search was computed from: the model, the prompt's length, the depths, the needle and question."""

    model: ModelKey
    length: int
    depths: tuple[int, ...]
    needle: str
    question: str


def retrieval_page() -> None:
    cur = view_helpers.start_on_model("retrieval", "This page uses the sidebar's model: fix the message above first.",
                                      sentence_notes=False)  # it reads its own text, not the sidebar's
    if cur is None:
        return
    model = cur.model
    if model.is_encoder_decoder:
        st.info(f"{plain(model.name)} is an encoder–decoder: retrieval heads are read from a decoder's answer to a "
                "long text. Pick a decoder in the sidebar's model picker (smollm2, toy-induction).",
                icon=":material/info:")
        return
    try:
        generation.check_decoder(model)
        retrieval.check_model(model)
    except InputError as exc:
        st.info(plain(str(exc)) + " Retrieval heads are found by letting the model answer.", icon=":material/info:")
        return
    top = token_limit(model, None) - room(token_limit(model, None))
    if top < MIN_LENGTH:
        st.info(f"{plain(model.name)} reads {token_limit(model, None)} tokens at most: too few for a needle, a text "
                "around it and an answer.", icon=":material/info:")
        return
    st.caption("A needle sentence is planted in the bundled documents at each depth, a question after it, and the "
               "model answers greedily. At each token of its answer that is a token of the needle, a head *copies* "
               "it when its heaviest key is that token in the needle. A head's score is the share of the needle's "
               "tokens it copied, averaged over the depths: 1 copies every token the model reproduces, 0 never.")
    key = _controls(cur, top)
    if jobs.cancelled(retrieval_keys.RETRIEVAL_RUNNING) is not None:
        st.warning("The search was cancelled; nothing was kept.", icon=":material/stop_circle:")
    found = session.get(retrieval_keys.RETRIEVAL_FOUND)
    if key is not None and found is not None and found[0] == key:
        jobs.finished(st, "Find the retrieval heads", FOUND)
    elif key is not None and (planned := _planned(model, key)) is None:
        pass  # why it cannot run is said before the button, not after the work
    elif key is not None:
        buttons = jobs.buttons("Find the retrieval heads", retrieval_keys.RETRIEVAL_GO, ran=FOUND,
                               cancel_key=retrieval_keys.RETRIEVAL_CANCEL,
                               cancel_help="Stop the search; nothing is kept.")
        if buttons.pressed:
            result, error = jobs.run(retrieval_keys.RETRIEVAL_RUNNING, key,
                                     lambda progress: _find(planned, progress), first="Planting the needle…",
                                     what="The search", time_left=True,
                                     out_of_memory="The search ran out of memory: choose a shorter length.")
            if error is not None:
                buttons.idle()
                st.error(plain(error), icon=":material/warning:")
            else:
                buttons.done()
                session.put(retrieval_keys.RETRIEVAL_FOUND, (key, result))
                found = (key, result)
                best = result.table.sort_values("score", ascending=False, kind="stable").iloc[0]
                shared_head.choose_head_in(list(model.layer_ids), int(best["layer"]), int(best["head"]))  # its top
    if found is None or found[0].model != cur.model_key:
        return
    if key is not None and found[0] != key:
        st.caption("Below: the last search, with other choices than those above.")
    _result(cur, found[0], found[1])


def _controls(cur, top: int) -> RetrievalKey | None:
    """The length, depths, needle and question; the key of the search they ask for (None: no depth chosen)."""
    session.setdefault(retrieval_keys.RETRIEVAL_LENGTH, min(DEFAULT_LENGTH, top))
    session.setdefault(retrieval_keys.RETRIEVAL_DEPTHS, list(DEFAULT_DEPTHS))
    session.setdefault(retrieval_keys.RETRIEVAL_NEEDLE, retrieval.NEEDLE[0])
    session.setdefault(retrieval_keys.RETRIEVAL_QUESTION, retrieval.NEEDLE[1])
    if int(session.get(retrieval_keys.RETRIEVAL_LENGTH)) > top:  # another model's choice, or a link's: this one's top
        session.put(retrieval_keys.RETRIEVAL_LENGTH, top)
    cols = st.columns([1, 2])
    length = int(cols[0].number_input("Prompt length (tokens)", MIN_LENGTH, top, step=256 if top > 2048 else 16,
                                      key=retrieval_keys.RETRIEVAL_LENGTH,
                                      persist_state=keys.KEEP,
                                      help=f"Up to {top:,}: the model's {token_limit(cur.model, None):,} less room "
                                           "for the answer."))
    depths = cols[1].pills("Needle depth (% of the text before it)", DEPTHS, selection_mode="multi",
                           format_func=lambda d: f"{d} %", key=retrieval_keys.RETRIEVAL_DEPTHS, persist_state=keys.KEEP)
    cols = st.columns([3, 2])
    needle = cols[0].text_input("Needle", key=retrieval_keys.RETRIEVAL_NEEDLE, persist_state=keys.KEEP)
    question = cols[1].text_input("Question after the text", key=retrieval_keys.RETRIEVAL_QUESTION,
                                  persist_state=keys.KEEP)
    notebook_button.record(length=length, depths=sorted(int(d) for d in depths or ()),
                           needle=[needle, question])
    if not depths:
        st.info("Choose at least one depth for the needle.", icon=":material/info:")
        return None
    if not needle.strip() or not question.strip():
        st.info("Write a needle sentence and a question about it.", icon=":material/edit:")
        return None
    if why := _unreadable(cur.model, needle, question):
        st.info(why, icon=":material/help:")
        return None
    return RetrievalKey(cur.model_key, length, tuple(sorted(int(d) for d in depths)), needle.strip(),
                        question.strip())


def _unreadable(model, needle: str, question: str) -> str | None:
    """Why the model cannot be searched with this needle and question (None: it can): too many of their tokens are
    its unknown token (toy-induction reads letters only), so no answer could copy the needle."""
    ids = mha_viz.tokenize(model, f"{needle} {question}", MAX_NEEDLE_TOKENS).ids
    if (found := notes.unreadable(model, ids)) is None:
        return None
    count, text, unk, reads = found
    return plain(f"{count} of the {text} tokens of the needle and question are unknown to {model.name} "
                 f"({unk}): no answer of its could copy the needle.{reads} Write both in what it reads, "
                 "or pick a model that reads English in the sidebar (smollm2).")


def _planned(model, key: RetrievalKey):
    """The search of `key`, planned (`retrieval.plan_search`); None after saying why it cannot run (the longest
    length that fits)."""
    planned, why = plans.try_plan(lambda: retrieval.plan_search(model, (key.needle, key.question), key.length,
                                                               [d / 100 for d in key.depths]))
    if why is not None:
        st.warning(why, icon=":material/memory:")
    return planned


def _find(planned, progress) -> retrieval.Retrieval:
    return plans.run_admitted(planned, progress=progress)


def _result(cur, key: RetrievalKey, found: retrieval.Retrieval) -> None:
    table = found.table
    ids = list(cur.model.layer_ids)
    L, H = int(table["layer"].max()) + 1, int(table["head"].max()) + 1
    ids = ids[:L] if len(ids) >= L else list(range(L))
    copied, size, trials = (int(table.attrs.get(k, 0)) for k in ("copied", "needle_tokens", "trials"))
    if copied == 0:
        st.warning(f"The model reproduced none of the needle's {size // max(trials, 1)} tokens in its answers, so no "
                   "head copied one: try a shorter length, another depth, or a needle and question it answers.",
                   icon=":material/warning:")
    else:
        st.caption(f"The model's answers reproduced {copied} of the needle's tokens over {trials} "
                   f"{'trial' if trials == 1 else 'trials'} ({size // max(trials, 1)} tokens in each needle).")
    charts.show(retrieval_figures.retrieval_grid(found, layer_ids=ids), key=retrieval_keys.RETRIEVAL_GRID,
                selection_mode="points", on_select=lambda: _on_grid(ids, H), name="retrieval-scores")
    best = table.sort_values("score", ascending=False, kind="stable").head(5)
    ranked = ", ".join(f"L{ids[int(r.layer)]}H{int(r.head)} {r.score:.2f}" for r in best.itertuples())
    st.caption(f"The highest scores: {ranked}. Click a head to see where it looked.")
    if found.look is None:
        return
    cols = st.columns([1, 1, 4])
    layer, head = shared_head.pick_head(ids, H, retrieval_keys.RETRIEVAL_LAYER, retrieval_keys.RETRIEVAL_HEAD,
                                        where=cols[:2])
    look = found.look
    notebook_button.record(layer=layer, head=head)
    cols[2].caption(f"Layer {ids[layer]}, head {head}: score {float(table.iloc[layer * H + head]['score']):.2f}. "
                    f"The step drawn: the model writing {plain(look.copied)} (answer token {look.step + 1}), the "
                    f"needle at {look.depth:.0%} of a prompt asked at {look.length:,} tokens and read as "
                    f"{len(look.tokens):,} (a chat template adds tokens; unknown ones read back as fewer).")
    title = f"Layer {ids[layer]}, head {head}"
    charts.show(retrieval_figures.look_figure(look, layer, head, title), key=retrieval_keys.RETRIEVAL_LOOK,
                name=f"retrieval-look-{ids[layer]}-{head}")


def _on_grid(layer_ids: list[int], num_heads: int) -> None:
    picked = charts.clicked(retrieval_keys.RETRIEVAL_GRID, lambda points: head_figures.grid_pick(points, num_heads))
    if picked is not None and picked[0] < len(layer_ids):
        shared_head.choose_head_in(layer_ids, *picked)
