"""Notes above a view about the run it draws: tokens the model cannot read, and tokens hidden by
the sidebar's *Hide tokens* (with the rows they left empty)."""

from __future__ import annotations

import streamlit as st

import mha_viz
import mha_viz_models
from mha_viz.text.tokenize import UNKNOWN_SHARE, structural_ids
from mha_viz.text.wording import plural
from mha_viz.ui.kit.text import plain
from mha_viz_models.attention.memory import memory_layouts


def unreadable(model, ids) -> tuple[int, int, str, str] | None:
    """(how many of `ids` are the model's unknown token, how many are the text's own (not the tokenizer's special
    tokens, [CLS], [SEP]…), that token, what the model reads: " It reads …." for a bundled model, else "") when
    they are at least UNKNOWN_SHARE of the text's; None when the model reads them."""
    count, unk = mha_viz.text.unknown_tokens(model, ids)
    added = structural_ids(model)
    text = sum(1 for i in ids if i not in added)
    if count == 0 or count < UNKNOWN_SHARE * text:
        return None
    bundled = mha_viz_models.BUNDLED.get(model.name)
    return count, text, unk or "unknown", f" It reads {bundled.reads}." if bundled and bundled.reads else ""


def unknown_status(cur, run) -> None:
    """A notice when the model cannot read much of the text: many tokens are its unknown token
    (toy-induction reads letters only; a WordPiece vocabulary lacks most emoji)."""
    if cur.model is None or cur.stale or not run.token_ids:
        return
    if (found := unreadable(cur.model, run.token_ids)) is None:
        return
    count, text, unk, reads = found
    st.warning(f"{count} of the text's {plural(text, 'token')} {'is' if count == 1 else 'are'} unknown to "
               f"{plain(cur.model.name)} ({plain(unk)}): it cannot read this text, so its heads have little to show."
               f"{plain(reads)}", icon=":material/help:")


def hybrid_status(model) -> None:
    """On a hybrid, what a page that reads softmax heads leaves out: its other token-mixing layers, by kind, and
    where they are drawn (issue 55: said, not hidden)."""
    other = getattr(model, "other_layers", None)
    if not other:
        return
    kinds = "; ".join(f"{kind.replace('_', ' ')}: {', '.join(map(str, numbers))}" for kind, numbers in other.items())
    st.caption(f"{plain(model.name)} is a hybrid: this page reads its softmax-attention layers "
               f"({', '.join(map(str, model.layer_ids))}). Its other token-mixing layers ({plain(kinds)}) are drawn "
               "in the Model view, as their exact effective attention, one at a time at the end of the Head view, "
               "and measured at the end of Head metrics.")


def memory_status(model) -> None:
    """On a model with compressed memory (DeepSeek-V4), that a page's rows over the tokens leave the entries and the
    sink out, and where they are drawn (issue 89)."""
    layouts = memory_layouts(getattr(getattr(model, "hf_model", None), "config", None))
    if not layouts:
        return
    st.caption(f"{plain(model.name)}'s compressed layers ({', '.join(map(str, layouts))}) spread each row over the "
               "tokens, compressed memory entries and a learned sink: the rows here are over the tokens. With every "
               "token shown, the Head view draws a layer's entries, the Model view and Model facts each head's share "
               "on them.")


def lens_status(cur) -> None:
    """What the sidebar's *Show attention as* did: the run's lens, or why the weights stay."""
    if cur.lens_note:
        st.info(plain(cur.lens_note), icon=":material/balance:")
    if cur.run is not None and cur.run.lens:
        st.caption(f"Showing contributions: {cur.run.lens} (sidebar, *Show attention as*). Each cell is how much "
                   "of what the query receives comes from that key, the weight times the size of the key's "
                   "value through this head; rows sum to 1.")


def hidden_status(cur) -> None:
    """What the sidebar's *Hide tokens* did: the label, and the rows left with no attention."""
    if cur.hide_note:
        st.info(plain(cur.hide_note), icon=":material/visibility_off:")
    hidden = cur.run.hidden
    if hidden is None:
        return
    st.caption(f"Attention {plain(hidden.label)}: {len(hidden.removed)} of {hidden.n_before} tokens hidden "
               "(sidebar, *Hide tokens*); each row is divided by the attention it keeps.")
    if hidden.num_empty:
        where = [f"L{cur.run.layer_ids[layer]} H{head}" for layer, head in zip(*hidden.empty.any(-1).nonzero())]
        st.warning(empty_rows_text(hidden.num_empty, hidden.heads_with_empty_rows, where),
                   icon=":material/do_not_disturb_on:")


NAMED_HEADS = 6  # heads named in the warning of empty rows, the rest counted


def empty_rows_text(rows: int, heads: int, names=()) -> str:
    """The warning for query rows that hiding tokens left with nothing to renormalise, naming the first NAMED_HEADS
    of the heads (`names`) that have them."""
    names = list(names)
    which = "" if not names else (" (" + ", ".join(names[:NAMED_HEADS])
                                  + (f" and {len(names) - NAMED_HEADS} more" if len(names) > NAMED_HEADS else "") + ")")
    return (f"{plural(rows, 'query row')} in {plural(heads, 'head')}{which} gave (almost) all their attention to the "
            "hidden tokens: nothing is left to renormalise, so they are shown as zeros.")
