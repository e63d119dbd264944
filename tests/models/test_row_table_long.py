"""A record added to the row table (issue 87) shows in a long run too: the scan reduces each layer's blocks with the
compiled loop written from the table in force, and the long run's head table has the new measure, equal to the
dense run's (whose head table reads the whole matrices) within float32 rounding."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.metrics.row_table import RECORDS, RowMeasure, RowTable, using

pytestmark = pytest.mark.model

TEXT = "The cat sat on the mat. The cat sat on the mat, and the dog ran off to the park."
NEW = (RowMeasure("prev2", "offset", "Two back", "mean_i A_i,i−2", "looks two tokens back", "does not", param=-2,
                  beyond=True),
       RowMeasure("after2_score", "match", "Two after a copy", "Σ(A ⊙ P)/ΣA", "looks two after a copy", "does not",
                  param=2, reads="share"))


@pytest.mark.parametrize("which", ["tiny_gpt2", "minilm"])
def test_a_new_record_is_in_the_long_runs_head_table_as_in_the_dense_ones(request, which):
    model = request.getfixturevalue(which) if which == "tiny_gpt2" else mha_viz.load_model(which, device="cpu")
    with using(RowTable(RECORDS + NEW)):
        long = mha_viz.analyze(model, TEXT, dense=False)
        dense = mha_viz.analyze(model, TEXT, dense=True)
        tables = mha_viz.metrics.head_table(long), mha_viz.metrics.head_table(dense)
    assert not long.is_dense and dense.is_dense
    for name in ("prev2", "beyond_prev2", "after2_score"):
        got, want = (t[name].to_numpy(dtype=np.float64) for t in tables)
        np.testing.assert_allclose(got, want, atol=2e-5, equal_nan=True, err_msg=name)
    a = dense.attentions.astype(np.float64)  # prev2 by hand: the mean of A[i, i − 2] (0 for the first two rows)
    by_hand = np.concatenate([np.zeros(a.shape[:2] + (2,)), np.diagonal(a, -2, 2, 3)], -1).mean(-1).ravel()
    np.testing.assert_allclose(tables[0]["prev2"].to_numpy(dtype=np.float64), by_hand, atol=2e-5)
