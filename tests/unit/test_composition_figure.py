"""Head composition's matrix labels its axes so that no two labels overlap (issue 90: MiniLM's 72 heads, labelled one
by one on a 760-px figure, overlapped): one label a head while they fit at LABEL_PX each, else one a layer, at the
middle of its block, every k-th layer when even those would not fit."""

from __future__ import annotations

import numpy as np

from mha_viz.features.composition import figures as composition_figures


def _figure(L: int, H: int):
    scores = np.random.default_rng(0).random((L, H, L, H))
    return composition_figures.composition_figure(scores, "q", baseline=0.1)


def test_few_heads_are_labelled_one_by_one():
    axis = _figure(2, 4).layout.yaxis
    assert list(axis.ticktext) == [f"L{layer}H{h}" for layer in range(2) for h in range(4)]


def test_minilm_s_72_heads_are_labelled_by_layer_and_every_label_has_its_room():
    for L, H in ((6, 12), (30, 9), (80, 4)):
        axis = _figure(L, H).layout.yaxis
        labels = list(axis.ticktext)
        assert len(labels) * composition_figures.LABEL_PX <= composition_figures.PLOT_PX, (L, H, len(labels))
        assert labels[0] == "L0" and all(t.startswith("L") and "H" not in t for t in labels)
        rows = [int(v.split("H")[1]) for v in axis.tickvals]  # each at the middle of its layer's block
        assert set(rows) == {H // 2}
