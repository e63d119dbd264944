"""The grid of head types (`mha_viz.features.head_metrics.type_figures`, `figures.head_types`): on a planted grid of
pattern labels each cell's colour is its class's legend colour, the legend lists the classes present
in the catalogue's order, the hover names the head and its full label, and a click's point index
names the head (layer-major)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_viz.drawing import heads as head_figures
from mha_viz.drawing.style import PATTERN_COLOURS
from mha_viz.features.head_metrics import type_figures as type_grid

PLANTED = np.array([["diagonal:prev", "sink", "broad"],
                    ["mixed:sink+prev", "diagonal:self", "sink"]])


def _colour_of(fig, code: float) -> str:
    """The colour the heatmap's discrete scale gives `code` (the middle of its band)."""
    heat = fig.data[0]
    pos = (code - heat.zmin) / (heat.zmax - heat.zmin)
    return next(colour for (lo, colour), (hi, _) in zip(heat.colorscale[::2], heat.colorscale[1::2])
                if lo <= pos <= hi)


def test_each_cell_has_its_class_colour_the_legend_and_the_hover():
    fig = type_grid.head_type_grid(PLANTED, layer_ids=[4, 7])
    legend = [t for t in fig.data[2:]]
    want = [c for c in PATTERN_COLOURS if c in {"diagonal", "sink", "broad", "mixed"}]
    assert [t.name for t in legend] == want  # the classes present, in the catalogue's order
    assert all(t.marker.color == PATTERN_COLOURS[t.name] for t in legend)
    z = np.asarray(fig.data[0].z)
    for (row, head), label in np.ndenumerate(PLANTED):
        cls = label.split(":")[0]
        assert want[int(z[row, head])] == cls
        assert _colour_of(fig, z[row, head]) == PATTERN_COLOURS[cls]
    hover = list(fig.data[1].text)
    assert hover[0] == "layer 4, head 0: diagonal:prev" and hover[3] == "layer 7, head 0: mixed:sink+prev"
    assert list(fig.data[1].customdata) == [label.split(":")[0] for label in PLANTED.ravel()]
    assert [str(t) for t in fig.layout.yaxis.ticktext] == ["4", "7"]  # rows by the model's layer numbers
    assert head_figures.grid_pick([{"curve_number": 1, "point_index": 4}], 3) == (1, 1)


def test_a_head_table_gives_the_same_grid():
    layers, heads = np.meshgrid([0, 1], [0, 1, 2], indexing="ij")
    table = pd.DataFrame({"layer": layers.ravel(), "head": heads.ravel(), "pattern": PLANTED.ravel()})
    by_table = type_grid.head_type_grid(table.sample(frac=1.0, random_state=0))  # any row order
    by_array = type_grid.head_type_grid(PLANTED)
    np.testing.assert_array_equal(np.asarray(by_table.data[0].z), np.asarray(by_array.data[0].z))
    assert list(by_table.data[1].text) == list(by_array.data[1].text)


def _lab(colour: str) -> np.ndarray:
    """CIE L*a*b* (D65) of a #RRGGBB colour, computed here from the sRGB formulas."""
    rgb = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
    rgb = np.where(rgb > 0.04045, ((rgb + 0.055) / 1.055) ** 2.4, rgb / 12.92)
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ rgb
    f = np.cbrt(xyz / np.array([0.95047, 1.0, 1.08883]))  # every colour here is far above the linear segment
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def test_every_two_classes_colours_are_far_apart():
    """ΔE*76 of at least 30 between any two classes' colours: "broad" in the palette's sky blue sat 26 from "sink"'s
    blue, and the two read as one class in a grid."""
    pairs = [(a, b) for i, a in enumerate(PATTERN_COLOURS) for b in list(PATTERN_COLOURS)[i + 1:]]
    near = [(a, b) for a, b in pairs if np.linalg.norm(_lab(PATTERN_COLOURS[a]) - _lab(PATTERN_COLOURS[b])) < 30]
    assert not near, near
