"""A sparse-attention model in the app (issue 89), a random-init DeepSeek-V3.2 loaded as a user's folder: Model facts
shows, for each indexed layer, the dense softmax's mass on the indexer's picks and their overlap with its heaviest
keys, equal to `mha_viz.metrics.sparse_selection` on the same text; the Head view marks the picks on every cell of
the layer shown (its cells with weight are among them); past the capture budget the section names the length that
fits; a model without indexed layers has neither."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.drawing.sparse_picks import NAME
from mha_viz.export import shared_controls
from mha_viz.metrics import sparse_selection
from tests.app.helpers import charts
from tests.app.helpers import open_folder as _open
from tests.models.architectures_2026 import build

pytestmark = pytest.mark.model
TEXT = "The cat sat on the mat. The dog sat on the log, and the cat ran off."
TITLE = "Sparse attention: what the indexer keeps"


def test_model_facts_show_what_the_indexer_keeps(tmp_path):
    folder = build("deepseek_v32", tmp_path)
    at = _open(folder, TEXT, page="model_facts")
    assert any(s.value == TITLE for s in at.subheader)
    shown = next(d.value for d in at.dataframe if "kept_mass (mean over heads)" in d.value.columns)
    want = sparse_selection(mha_viz.load_model(folder, device="cpu"), TEXT).table()
    by_layer = want.groupby("layer")[["kept_mass", "overlap"]].mean()
    assert shown["layer"].tolist() == by_layer.index.tolist()
    np.testing.assert_allclose(shown["kept_mass (mean over heads)"], by_layer["kept_mass"], atol=1e-4)
    np.testing.assert_allclose(shown["overlap (mean over heads)"], by_layer["overlap"], atol=1e-4)
    assert (shown["kept_mass (mean over heads)"] < 1).all()


def test_past_the_budget_the_section_names_the_length_and_a_plain_model_has_none(tmp_path, monkeypatch):
    """A budget that holds the section's need three tokens shorter than the text (the analysis itself fits: a long
    run, one layer at a time)."""
    from mha_viz.budget import capture_budget
    from mha_viz.metrics.indexer_picks import need_bytes

    folder = build("deepseek_v32", tmp_path / "sparse")
    model = mha_viz.load_model(folder, device="cpu")
    n = len(mha_viz.tokenize(model, TEXT).ids)
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: need_bytes(model, n - 3))
    at = _open(folder, TEXT, page="model_facts")
    said = next(i.value for i in at.info if "Measuring the picks" in i.value)
    assert f"lower the token limit to {n - 3:,} tokens" in said, said
    assert not any(d for d in at.dataframe if "kept_mass (mean over heads)" in d.value.columns)
    monkeypatch.undo()
    at = _open(build("olmo2", tmp_path / "plain"), TEXT, page="model_facts")
    assert not any(s.value == TITLE for s in at.subheader)


def _marks(at) -> tuple[set[tuple[str, str]], dict]:
    """The Head view heatmap's marked (query, key) cells, and the heatmap."""
    heat = next(c for c in charts(at) if c["data"][0]["type"] == "heatmap")
    marks = [t for t in heat["data"] if t.get("name") == NAME]
    cells = {(y, x) for t in marks for x, y in zip(t["x"], t["y"])}  # the axis labels, a repeated token's made unique
    return cells, heat


def test_the_head_view_marks_the_layers_picks(tmp_path):
    folder = build("deepseek_v32", tmp_path)
    at = _open(folder, TEXT, page="head_view")  # on layer 0, head 0
    cells, heat = _marks(at)
    assert heat["layout"]["title"]["text"].startswith("Layer 0, head 0")
    want = sparse_selection(mha_viz.load_model(folder, device="cpu"), TEXT)
    tokens = list(heat["data"][0]["x"])
    assert len(set(tokens)) == len(tokens)
    picked = {(tokens[q], tokens[k]) for q, k in zip(*np.nonzero(want.picked[want.layers.index(0)]))}
    assert cells == picked and len(cells) < len(tokens) * (len(tokens) + 1) // 2  # fewer than every visible key
    z = np.asarray(heat["data"][0]["z"], dtype=float)
    weighted = {(tokens[q], tokens[k]) for q, k in zip(*np.nonzero(z > 0))}
    assert weighted <= cells  # every key with weight was picked
    assert any("keys this layer's indexer picked" in c.value for c in at.caption)
    plain = _open(build("olmo2", tmp_path / "plain"), TEXT, page="head_view")
    assert not _marks(plain)[0]


def _overlay(at) -> list[tuple[str, str]]:
    """The (x, y) of every pick mark on the page's charts."""
    return [(x, y) for c in charts(at) for t in c["data"] if t.get("name") == NAME for x, y in zip(t["x"], t["y"])]


def test_token_focus_and_the_line_view_mark_the_picks(tmp_path):
    """Token focus: on every head of each indexed layer, the keys the token in focus kept (attends to) and the
    queries that kept it (is attended by), exactly the picks; the line view, focused on a query, rings the keys it
    kept, exactly those."""
    from mha_viz.drawing import sparse_picks as sparse_figures
    from mha_viz.features.lines import controls as lines_keys
    from mha_viz.ui.kit import keys
    from tests.app.helpers import open_page

    folder = build("deepseek_v32", tmp_path)
    want = sparse_selection(mha_viz.load_model(folder, device="cpu"), TEXT)
    at = _open(folder, TEXT, page="focus")
    query = 20
    at.session_state[shared_controls.FOCUS_TOKEN] = query
    at.run()
    assert not at.exception and not at.error
    grids = [c for c in charts(at) if c["data"][0]["type"] == "heatmap" and any(t.get("name") == NAME
                                                                                 for t in c["data"])]
    assert len(grids) == 2 and sparse_figures.FOCUS_CAPTION in [c.value for c in at.caption]
    heads = at.session_state[keys.CURRENT].run.num_heads
    for grid, picked in zip(grids, ([p[query] for p in want.picked], [p[:, query] for p in want.picked])):
        xs, ys = grid["data"][0]["x"], grid["data"][0]["y"]
        marks = {(x, y) for t in grid["data"] if t.get("name") == NAME for x, y in zip(t["x"], t["y"])}
        expected = {(xs[k], ys[want.layers[s] * heads + h]) for s, row in enumerate(picked)
                    for k in np.flatnonzero(row) for h in range(heads)}
        assert marks == expected and expected
    open_page(at, "lines")
    at.session_state[lines_keys.LINE_SIDE] = "query"
    at.session_state[lines_keys.LINE_TOKEN] = query
    at.run()
    assert not at.exception and not at.error
    line = next(c for c in charts(at) if any(t.get("name") == "key tokens" for t in c["data"]))
    keys_trace = next(t for t in line["data"] if t.get("name") == "key tokens")
    rings = {y for t in line["data"] if t.get("name") == NAME for y in t["y"]}
    layer = at.session_state[lines_keys.LINE_LAYER]
    kept = np.flatnonzero(want.picked[want.layers.index(layer)][query])
    assert rings == {keys_trace["y"][k] for k in kept} and sparse_figures.LINES_CAPTION in [c.value for c in at.caption]


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa"])  # GLM-5's shared layers: the picks handed them
def test_a_long_run_keeps_the_picks_as_indices_and_marks_them(family, tmp_path, monkeypatch):
    """`sparse_picks`: every indexed layer's picks as indices (n × k a layer, not n × n), each layer's rows and
    columns equal to `sparse_selection`'s n × n picks; a long run (MHA_VIZ_DENSE_MB=0: no layer's array held) marks
    them on the Head view as a short one does."""
    from mha_viz.metrics import sparse_picks
    from mha_viz.ui.kit import keys
    from tests.models.architectures_2026 import SPARSE_TOP_K

    folder = build(family, tmp_path)
    model = mha_viz.load_model(folder, device="cpu")
    picks, want = sparse_picks(model, TEXT), sparse_selection(model, TEXT)
    n = picks.n
    assert picks.layers == want.layers and picks.keys.shape == (len(want.layers), n, SPARSE_TOP_K)
    for s, number in enumerate(picks.layers):
        rows = picks.rows(number, 0, n)
        np.testing.assert_array_equal(rows, want.picked[s])
        np.testing.assert_array_equal(picks.rows(number, 5, 9), rows[5:9])
        for key in (0, n // 2, n - 1):
            np.testing.assert_array_equal(picks.column(number, key), rows[:, key])
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    at = _open(folder, TEXT, page="head_view")
    assert not at.session_state[keys.CURRENT].run.is_dense
    cells, heat = _marks(at)
    tokens = list(heat["data"][0]["x"])
    assert cells == {(tokens[q], tokens[k]) for q, k in zip(*np.nonzero(want.picked[want.layers.index(0)]))}
