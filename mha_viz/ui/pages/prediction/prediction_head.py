"""*Heads behind a prediction*'s one-head panel: the head the pages share, opened in the page's
explanation (its attention in the clean and corrupted runs, its value-weighted attention, the tokens
its write promotes and suppresses, and patching it one position at a time beside the estimate), each
result computed once for the page's pair and kept (`prediction_keys.PRED_EXTRA`)."""

from __future__ import annotations

import dataclasses
from typing import Hashable

import streamlit as st

import mha_viz
from mha_viz import needs
from mha_viz.drawing import heads as head_figures
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction import figures as attribution_figures
from mha_viz.features.prediction import need as prediction_need
from mha_viz.interventions import attribution, prediction
from mha_viz.ui.kit import charts, keys, resources, session, shared_head
from mha_viz.ui.kit.text import plain
from mha_viz.ui.shell import notebook_button


def _extra(model, key: Hashable, what: str, layer: int, head: int, compute):
    """A result of the one-head panel, kept for this pair (each costs a forward)."""
    store = session.setdefault(prediction_keys.PRED_EXTRA, {})
    k = (key, layer, head, what)
    if k not in store:
        def held():
            with resources.slots().hold(need=prediction_need.patching(model, needs.tokens(model, key.clean, key.cap))):
                return compute()
        result, error = resources.attempt(held, what="This head's panel", out_of_memory=(
            "This head's panel ran out of memory: use shorter texts or a smaller model."))
        if error:
            raise mha_viz.InputError(error)
        store[k] = result
    return store[k]


def one_head(cur, key: Hashable, expl: prediction.Explanation) -> None:
    """The panel of the shared head (`shared_head`) in the explanation `expl` of `key` (the page's
    PredKey): its attention in both runs, its value-weighted attention, the tokens it promotes and
    suppresses, and real patching of it position by position beside the estimate."""
    model, run = cur.model, expl.clean
    st.subheader("One head")
    cols = st.columns([1, 1, 3])
    layer, head = shared_head.pick_head(run.layer_ids, run.num_heads, prediction_keys.PRED_LAYER,
                                        prediction_keys.PRED_HEAD, where=cols[:2])
    notebook_button.record(layer=layer, head=head, corrupted=key.corrupted, answer=key.answer, wrong=key.wrong,
                           patched=expl.patching is not None, position_layer=session.get(keys.PRED_POS_LAYER))
    parts = [f"{expl.dla.label} {float(expl.dla.per_head[layer, head]):+.3f}"]
    if expl.estimate is not None:
        parts.append(f"estimated restored fraction {float(expl.estimated[layer, head]):.3f}")
    if expl.patching is not None:
        parts.append(f"patched for real {float(expl.patching.restored[layer, head]):.3f}")
    cols[2].caption("; ".join(parts) + ".")
    left, right = st.columns(2)
    charts.show(head_figures.head_heatmap(expl.clean, layer, head), key=prediction_keys.PRED_CLEAN_HEAD, where=left,
                name="clean-attention")
    charts.show(head_figures.head_heatmap(expl.corrupted, layer, head), key=prediction_keys.PRED_CORRUPTED_HEAD,
                where=right, name="corrupted-attention")
    left.caption("Clean run.")
    right.caption("Corrupted run.")
    st.caption("Below: the clean run's value-weighted attention (what each key moves through this head, each row "
               "normalised), and the tokens this head's write at the last position promotes and suppresses through "
               "the final norm and the unembedding (a logit lens of the write).")
    left, right = st.columns(2)
    if expl.clean.value_norms is not None:
        run = expl.clean  # weighted one layer only: the panel draws one head
        row = dataclasses.replace(run, attentions=run.attentions[layer:layer + 1], head_outputs=None,
                                  value_norms=run.value_norms[layer:layer + 1], layer_ids=[run.layer_ids[layer]])
        charts.show(head_figures.head_heatmap(attribution.as_contributions(row), 0, head),
                    key=prediction_keys.PRED_WEIGHTED_HEAD, where=left, name="clean-value-weighted")
    else:
        left.info(f"The value path of {plain(model.name)} cannot be read: no value-weighted attention.")
    answer, wrong = expl.dla.target, expl.dla.wrong
    try:
        promoted, suppressed = _extra(model, key, "tokens", layer, head, lambda: attribution.head_tokens(
            model, key.clean, layer, head, k=8, max_tokens=key.cap))
        charts.show(attribution_figures.token_bars(promoted, suppressed, f"Layer {layer}, head {head}: tokens its "
                                                   "write promotes and suppresses"),
                    key=prediction_keys.PRED_TOKENS, where=right, name="head-tokens")
        by_pos = _extra(model, key, "positions", layer, head, lambda: attribution.patch_positions(
            model, key.clean, key.corrupted, layer, head, answer, wrong, max_tokens=key.cap))
    except mha_viz.InputError as exc:
        st.warning(plain(str(exc)), icon=":material/warning:")
        return
    charts.show(attribution_figures.position_bars(by_pos.values, expl.corrupted.tokens,
                                                  f"Layer {layer}, head {head} patched at one position at a time",
                                                  estimate=None if expl.estimate is None else
                                                  expl.estimate.values[layer, head]),
                key=prediction_keys.PRED_POSITIONS, name="restored-by-position")
    st.caption("Each filled bar: the corrupted run with this head's clean output at that position only, patched for "
               "real; each outlined bar: the estimate of the same. The positions where the texts differ, and the last "
               "one (where the answer is read), usually carry it.")
