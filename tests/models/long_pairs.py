"""The dense run and the long run of the same text (issue 52's fidelity tests: a long run's views against the
dense run's, where that fits): one place that loads a bundled model and analyses the sample text both ways."""

from __future__ import annotations

import mha_viz
from tests.helpers import ROOT

TEXT = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()


def dense_and_long(name: str, n: int = 600, text: str = TEXT):
    """(model, dense run, long run) of the first n tokens of `text` (fewer where the model reads fewer)."""
    model = mha_viz.load_model(name, device="cpu")
    cap = min(n, model.max_positions)
    dense = mha_viz.analyze(model, text, max_tokens=cap, dense=True)
    long = mha_viz.analyze(model, text, max_tokens=cap, dense=False)
    assert dense.is_dense and not long.is_dense and long.tokens == dense.tokens
    return model, dense, long
