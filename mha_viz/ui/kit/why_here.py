"""The Head view's *Why here?* section: the score of the clicked cell (or of a query and key picked in it)
split into query-side × key-side parts (`mha_viz.circuits.qk_terms`), a second key to ask "why this key and not
that one", and the whole head's pattern-weighted terms (`mha_viz.circuits.qk_pattern_terms`)."""

from __future__ import annotations

import streamlit as st

from mha_viz.circuits import score_terms as circuits
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import why as why_figures
from mha_viz.export import shared_controls
from mha_viz.ui.kit import analysis, charts, keys, resources, session
from mha_viz.ui.kit.text import plain

TOY = "toy-induction"
NONE = -1  # no second key


def positions(run) -> list[int]:
    """The model's positions of the run's shown tokens (*Hide tokens* drops some)."""
    hidden = getattr(run, "hidden", None)
    return [int(p) for p in hidden.kept] if hidden is not None else list(range(run.n))


def on_cell(run, offset: int, shown: int) -> None:
    """The head heatmap's on_select: a clicked cell becomes the section's query and key."""
    picked = charts.clicked(keys.HEAD_HEATMAP, lambda points: head_figures.cell_pick(points, shown, offset))
    if picked is not None:
        where = positions(run)
        session.put(shared_controls.WHY_QUERY, where[picked[0]])
        session.put(shared_controls.WHY_KEY, where[picked[1]])
        session.put(shared_controls.WHY_PATTERN, False)


def _compute(what: str, build):
    """build() (admitted for its plan's need inside: `analysis.qk_terms`) in turn, or why it failed."""
    return resources.attempt(build, what=what, out_of_memory=(
        "Splitting the score ran out of memory: use a shorter text or a smaller model."))


def why_here(cur, layer: int, head: int, clickable: bool = True, heading: bool = True) -> None:
    """The section, under the head's heatmap; `layer` is the run's row; `clickable`: the heatmap's cells are;
    `heading`: its own subheader (not inside a box that has its title)."""
    run = cur.run
    if heading:
        st.subheader("Why here?")
    model = cur.model
    if model is None or cur.stale or cur.key is None:
        st.info("Run the model on the current text to see why this head looks where it looks.", icon=":material/info:")
        return
    text_key = cur.key.with_text(cur.key.text)
    model_layer = int(run.layer_ids[layer])
    where = positions(run)
    full = cur.full_run or run
    tokens, n = full.tokens, full.n
    for name_, fallback, allowed in ((shared_controls.WHY_QUERY, where[-1], where),
                                     (shared_controls.WHY_KEY, where[0], where),
                                     (shared_controls.WHY_SECOND, NONE, [NONE, *where])):
        if session.get(name_, fallback) not in allowed:
            session.settle(name_, fallback)
        session.setdefault(name_, fallback)
    how = ("Click a cell of the heatmap, or pick a query and a key." if clickable else
           "Pick a query and a key (cells can be clicked with *Detail: every token* or a window, up to "
           f"{head_figures.CLICKABLE_TOKENS} tokens shown).")
    st.caption(how + " A score q·k splits into terms: what wrote the query (the embeddings, each earlier head, "
               "each MLP, the biases) × what wrote the key. " + circuits.FROZEN)

    def name(i: int) -> str:
        return f"{i}: {tokens[i]}" if 0 <= i < n else "none"
    cols = st.columns([3, 3, 3, 2])
    whole = cols[3].toggle("Whole head", key=shared_controls.WHY_PATTERN, persist_state=keys.KEEP,
                           help="The terms of every query–key pair, each weighted by the head's attention to it: "
                                "Σ_i Σ_j A_ij · T_ij / n, what drives this head's pattern on this text.")
    query = cols[0].selectbox("Query", where, key=shared_controls.WHY_QUERY, format_func=name, disabled=whole)
    key = cols[1].selectbox("Key", where, key=shared_controls.WHY_KEY, format_func=name, disabled=whole)
    second = cols[2].selectbox("…and not this key", [NONE, *where], key=shared_controls.WHY_SECOND, format_func=name,
                               disabled=whole, help="Why this key and not that one: the difference of the two "
                                                    "keys' terms, which is what the softmax compares.")
    if whole:
        t, error = _compute("Why here?", lambda: analysis.qk_pattern_terms(text_key, model_layer, head, model))
        st.caption("Each term summed over every query–key pair, weighted by the head's attention. A part that "
                   "adds the same to every key of a query (a bias, often) moves no weight: the softmax of a row "
                   "ignores what its scores share.")
    else:
        t, error = _compute("Why here?", lambda: analysis.qk_terms(text_key, model_layer, head, query, key, model))
        if t is not None and second != NONE:
            other, error = _compute("Why here?", lambda: analysis.qk_terms(text_key, model_layer, head, query,
                                                                             second, model))
            t = None if other is None else t.minus(other)
    if error:
        st.warning(plain(error), icon=":material/warning:")
        return
    _show(t, model, second if not whole else NONE)


def _show(t: circuits.QKTerms, model, second: int) -> None:
    what = ("pattern-weighted score Σ A·s / n" if t.pattern else
            "score difference s(key) − s(second key)" if second != NONE else "score q·k × scale")
    notes = [f"**{what} = {t.score:+.4f}**; the terms sum to {t.terms.sum():+.4f} "
             f"(relative error {t.error:.1e})."]
    if t.softcap is not None:
        notes.append(f"This model caps scores after this: tanh(s / {t.softcap:g}) · {t.softcap:g}.")
    if not t.visible:
        notes.append("The mask hides " + ("one of the two keys" if second != NONE else "this key") +
                     " from this query: the softmax never sees its score.")
    st.markdown(" ".join(notes))
    charts.show(why_figures.terms_heatmap(t), key=keys.WHY_TERMS, name="why-terms")
    charts.show(why_figures.terms_bars(t), key=keys.WHY_BARS, name="why-parts")
    if model.name == TOY:
        st.info("On toy-induction, pick the induction head of layer 1, a repeated letter as the query and the token "
                "after that letter's first occurrence as the key: the key's largest part is the layer-0 "
                "previous-token head (it wrote 'the token before me was …' into that position), and the query's "
                "is the embeddings (the current letter). That is K-composition.", icon=":material/school:")
