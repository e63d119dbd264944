"""The summary of a hybrid's other layers read by rows (`mha_viz.effective.summarised` under
`each_reduced(by_rows=True)`, what the Model view and Head metrics show): on random-init Qwen3-Next (gated DeltaNet,
chunks of 64 rows) and MiniMax (lightning attention, blocks of 16 rows here), over a text longer than a block, each
layer's thumbnails and measures equal those of its whole matrix (`effective_attention`), and every layer came
without its matrix."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import mha_viz
from mha_viz import effective
from mha_viz.drawing import effective as effective_figures
from mha_viz.metrics.mixing_measures import effective_measures
from mha_viz_models.effective import layer as effective_layer
from tests.models.architectures_2026 import build

pytestmark = pytest.mark.model
TEXT = " ".join(["the cat sat on the mat and the dog sat on the log"] * 12)  # past one chunk of 64


@pytest.mark.parametrize("family", ["qwen3_next", "minimax"])
def test_a_summary_read_by_rows_is_the_whole_layers(tmp_path, monkeypatch, family):
    monkeypatch.setattr(effective_layer, "MIN_ROWS", 16)
    monkeypatch.setattr(effective_layer, "ROW_CELLS", 1)
    model = mha_viz.load_model(build(family, tmp_path), device="cpu")
    whole = effective.effective_attention(model, TEXT)
    assert len(whole.tokens) > 64

    def summarise(run, la):
        assert la.matrix is None and len(list(la.blocks())) > 1
        return effective.summarised(run, la)
    _run, rows = effective.each_reduced(model, TEXT, summarise, by_rows=True)
    want = effective_figures.thumbnails(whole)
    got = effective_figures.stacked([r[0] for r in rows], {})
    assert got.layers == want.layers and got.labels == want.labels
    np.testing.assert_allclose(got.pooled, want.pooled, rtol=1e-5, atol=1e-6 * np.nanmax(np.abs(want.pooled)))
    np.testing.assert_allclose(got.largest, want.largest, rtol=1e-5)
    measures = effective_measures(whole)
    got_table = pd.concat([r[1] for r in rows], ignore_index=True)
    assert got_table[["layer", "kind", "group"]].equals(measures[["layer", "kind", "group"]])
    for name in ("distance", "prev_token_score", "induction_score"):
        np.testing.assert_allclose(got_table[name], measures[name], rtol=1e-4, err_msg=name)
    # the delta rule's whole matrix is its chunks put together (the same operations): the same decay lengths; the
    # lightning blocks' products may round differently on another CPU, and a row whose weight within d keys lies
    # within that rounding of 1 − 1/e may count a key more or less (the measure is a mean of key counts)
    np.testing.assert_allclose(got_table["decay_length"], measures["decay_length"], rtol=1e-9,
                               atol=0 if family == "qwen3_next" else 1.0)
