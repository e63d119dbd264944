"""The Head metrics page's grid of head types (issue 43): every head of MiniLM in the colour of its
pattern class as the library's head table classifies it (`mha_viz.metrics.classify`), the legend
naming the classes present, each cell's hover its full label; the page's figure is the one
`mha_viz.figures.head_types` draws."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz import figures, metrics
from mha_viz.drawing.style import PATTERN_COLOURS
from tests.app.helpers import open_with_text, titled

pytestmark = pytest.mark.model
TEXT = "The keys that the old gardener left on the table are missing, said Mary to John."


def test_the_head_types_grid_colours_every_head_by_its_class():
    at = open_with_text("head_metrics", TEXT, "minilm")
    grid = titled(at, "Head types")
    model = mha_viz.load_model("minilm")
    run = mha_viz.analyze(model, TEXT, max_tokens=512)
    labels = metrics.head_table(run)["pattern"].to_numpy().reshape(run.num_layers, run.num_heads)
    classes = np.vectorize(lambda label: label.split(":")[0])(labels)
    legend = [d["name"] for d in grid["data"][2:]]
    assert legend == [c for c in PATTERN_COLOURS if (classes == c).any()] and len(legend) >= 2
    assert [d["marker"]["color"] for d in grid["data"][2:]] == [PATTERN_COLOURS[c] for c in legend]
    z = np.asarray(grid["data"][0]["z"], dtype=float)
    np.testing.assert_array_equal(np.asarray(legend)[z.astype(int)], classes)  # each cell, its class's colour
    hover = grid["data"][1]["text"]
    assert all(hover[r * run.num_heads + h] == f"layer {r}, head {h}: {labels[r, h]}"
               for r in range(run.num_layers) for h in range(run.num_heads))
    api = figures.head_types(run)
    np.testing.assert_array_equal(np.asarray(api.data[0].z, dtype=float), z)  # the notebook's figure is the page's
