"""A hybrid's other token-mixing layers in the Model view (issue 55): on random-init Qwen3-Next (gated DeltaNet
in layers 0 and 2), LFM2 (short convolutions) and MiniMax (lightning attention), loaded as a user's folder, the
Model view draws every such layer's exact effective attention beside the softmax heads, in the model's layer
order and labelled with its kind; each thumbnail's largest |A| is the one `mha_viz.effective.effective_attention`
computes on its own. Past the capture budget the section says the length that fits (one layer at a time: a budget
that holds the largest layer's matrices but not every layer's draws the section; a layer read by rows holds blocks
of rows, so a budget under its n × n matrices draws it too), and a model without such layers has no section. The
Head view draws one layer read the same way: every cell, or past DETAIL_SIDE tokens blocks of tokens, with no
label sent a cell. The pages that read the softmax heads only say so on a hybrid. Head metrics measures every
other layer's groups on |A|, each row normalised, in the model's layer order."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.budget import capture_budget
from mha_viz.ui.kit import keys
from tests.app.helpers import chart_title, charts, open_folder, start_app
from tests.models.architectures_2026 import build

pytestmark = pytest.mark.model
TEXT = "The cat sat on the mat. The dog sat on the log."
TITLE = "Effective attention, signed"


def _open(folder: str, text: str = TEXT, page: str | None = None):
    return open_folder(folder, text, page)


@pytest.mark.parametrize("family,kind", [("qwen3_next", "gated DeltaNet"), ("lfm2", "short convolution"),
                                         ("minimax", "lightning")])
def test_the_model_view_draws_every_other_token_mixing_layer(tmp_path, family, kind):
    folder = build(family, tmp_path)
    at = _open(folder)
    grid = next(c for c in charts(at) if chart_title(c).startswith(TITLE))
    ticks = grid["layout"]["yaxis"]["ticktext"]
    assert [t.split(" · ")[0] for t in ticks] == ["L0", "L2"]  # the model's order, between the softmax layers 1, 3
    assert all(kind.lower() in t.lower() for t in ticks), ticks
    model = mha_viz.load_model(folder, device="cpu")
    eff = mha_viz.effective.effective_attention(model, TEXT)
    shown = {(int(layer), int(group)): largest for layer, group, largest in grid["data"][1]["customdata"]}
    want = {(la.layer, g): float(np.abs(m).max()) for la in eff.layers
            for g, m in enumerate(la.matrix if la.aggregated is None else la.aggregated)}
    assert shown.keys() == want.keys()
    for cell, largest in want.items():
        assert shown[cell] == pytest.approx(largest, rel=1e-5), cell
    assert grid["data"][0]["source"].startswith("data:image/png;base64,")
    shares = next(d.value for d in at.dataframe if "share of the token mixing" in d.value.columns)
    assert shares["layer"].tolist() == [0, 1, 2, 3]
    assert shares.set_index("layer").loc[[1, 3], "kind"].tolist() == ["softmax attention"] * 2
    got = [float(s.rstrip(" %")) for s in shares["share of the token mixing"]]
    want = eff.mixing_shares()
    assert [n for n, _ in want] == [0, 1, 2, 3]
    assert got == pytest.approx([100 * s for s in want.values()], abs=0.051)  # one decimal shown
    hybrid = "is a hybrid: this page reads its softmax-attention layers (1, 3)"
    assert not any(hybrid in c.value for c in at.caption)  # the Model view draws the other layers
    at.session_state[keys.GOTO] = "head_view"  # a page of softmax heads says what it leaves out
    at.run()
    assert not at.exception and not at.error
    said = next(c.value for c in at.caption if hybrid in c.value)
    assert ": 0, 2)" in said and "drawn in the Model view" in said, said


def test_past_the_budget_the_section_says_the_length_that_fits_and_a_plain_model_has_none(tmp_path, monkeypatch):
    """LFM2's short convolutions are made whole: one layer's matrices and one group's copy (pooled) at a time."""
    folder = build("lfm2", tmp_path)
    model = mha_viz.load_model(folder, device="cpu")
    eff = mha_viz.effective.effective_attention(model, TEXT)
    assert len(eff.layers) == 2 and all(la.by_rows is None for la in eff.layers)
    count = max(la.matrix.shape[0] for la in eff.layers) + 1  # a layer's channels, and one channel's copy
    n = len(eff.tokens)
    budget = 4 * count * (n - 3) ** 2  # room for n − 3 tokens, not for the text's n
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: budget)
    at = _open(folder)
    assert not any(chart_title(c).startswith(TITLE) for c in charts(at))
    said = next(i.value for i in at.info if "would hold" in i.value)
    assert f"lower the token limit to {n - 3:,} tokens" in said, said
    budget = 4 * count * n ** 2  # one layer's matrices at n (and a copy), not both layers': the section draws
    at = _open(folder)
    assert any(chart_title(c).startswith(TITLE) for c in charts(at))
    plain = start_app()
    assert not any(h.value == "The other token-mixing layers" for h in plain.subheader)


def test_layers_read_by_rows_draw_where_their_whole_matrices_would_not_fit(tmp_path, monkeypatch):
    """Qwen3-Next's gated DeltaNet is read by rows: the summary holds blocks of rows (here of 2 rows, without the
    delta rule's state, so that blocks hold less than a layer at this short text's length), so the Model view, Head
    metrics and the Head view's layer draw under a budget that one layer's n × n matrices exceed; below the blocks'
    own need the section says the length whose blocks fit."""
    from mha_viz import effective
    from mha_viz_models.effective import layer as effective_layer

    monkeypatch.setattr(effective_layer, "MIN_ROWS", 2)
    monkeypatch.setattr(effective_layer, "ROW_CELLS", 1)
    monkeypatch.setattr(effective, "ROW_STATE", 0)
    folder = build("qwen3_next", tmp_path)
    model = mha_viz.load_model(folder, device="cpu")
    eff = effective.effective_attention(model, TEXT)
    groups, n = max(la.matrix.shape[0] for la in eff.layers), len(eff.tokens)
    rows = effective.row_bytes(groups, n)
    assert rows == 4 * 2 * groups * 2 * n < effective.need_bytes(groups, n)  # two blocks of 2 rows of every group
    budget = (rows + effective.need_bytes(groups, n)) // 2
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: budget)
    seen, summarised = [], effective.summarised
    monkeypatch.setattr(effective, "summarised", lambda run, la: seen.append(la.matrix is None) or summarised(run, la))
    at = _open(folder)
    assert seen and all(seen)  # every layer came without its matrix, read by rows (the first text too)
    grid = next(c for c in charts(at) if chart_title(c).startswith(TITLE))
    shown = {(int(layer), int(group)): largest for layer, group, largest in grid["data"][1]["customdata"]}
    assert shown == pytest.approx({(la.layer, g): float(np.abs(m).max()) for la in eff.layers
                                   for g, m in enumerate(la.matrix)}, rel=1e-5)
    at.session_state[keys.GOTO] = "head_metrics"
    at.run()
    assert any("decay_length" in d.value.columns for d in at.dataframe)
    at.session_state[keys.GOTO] = "head_view"  # one layer, read by rows as the summary is: drawn too
    at.run()
    assert not at.exception and not at.error
    assert any(chart_title(c).startswith("Layer 0, group 0") for c in charts(at))
    budget = rows - 1  # not even the blocks: the section says the length whose blocks fit
    at = _open(folder)
    assert not any(chart_title(c).startswith(TITLE) for c in charts(at))
    said = next(i.value for i in at.info if "would hold" in i.value)
    fit = effective.held(model).summary_fit(budget)
    assert fit < n and f"lower the token limit to {fit:,} tokens" in said, said


@pytest.mark.parametrize("family,kind", [("qwen3_next", "gated DeltaNet"), ("lfm2", "short convolution")])
def test_head_metrics_measures_every_other_layer_on_its_absolute_weights(tmp_path, family, kind):
    folder = build(family, tmp_path)
    at = _open(folder, page="head_metrics")
    shown = next(d.value for d in at.dataframe if "decay_length" in d.value.columns)
    model = mha_viz.load_model(folder, device="cpu")
    eff = mha_viz.effective.effective_attention(model, TEXT)
    groups = [(la.layer, g) for la in eff.layers for g in range((la.matrix if la.aggregated is None
                                                                 else la.aggregated).shape[0])]
    assert list(zip(shown["layer"], shown["group"])) == groups  # every group, in the model's layer order
    assert shown["layer"].tolist()[0] == 0 and all(kind.lower() in k.lower() for k in shown["kind"])
    for row, (layer, group) in enumerate(groups):  # the prev-token score by hand: Σ_t P[t, t − 1] over live rows
        la = eff.layer(layer)
        a = np.abs((la.matrix if la.aggregated is None else la.aggregated)[group]).astype(np.float64)
        live = a.sum(axis=1) > 0
        p = a[live] / a[live].sum(axis=1, keepdims=True)
        rows = np.flatnonzero(live)
        prev = sum(p[k, t - 1] for k, t in enumerate(rows) if t >= 1) / live.sum()
        assert shown["prev_token_score"].iloc[row] == pytest.approx(prev, abs=6e-5), (layer, group)
        assert shown["distance"].iloc[row] >= 0 and shown["decay_length"].iloc[row] >= 0
    assert any("measured on |A|" in c.value for c in at.caption)


def test_model_facts_says_how_much_of_the_token_mixing_each_kind_does(tmp_path):
    folder = build("qwen3_next", tmp_path)
    at = _open(folder, page="model_facts")
    shown = next(d.value for d in at.dataframe if "share of the token mixing" in d.value.columns).set_index("kind")
    assert shown.loc["gated DeltaNet", "layers"] == "0, 2" and shown.loc["softmax attention", "layers"] == "1, 3"
    model = mha_viz.load_model(folder, device="cpu")
    shares = mha_viz.effective.effective_attention(model, TEXT).mixing_shares()
    for kind, layers in (("gated DeltaNet", (0, 2)), ("softmax attention", (1, 3))):
        got = float(shown.loc[kind, "share of the token mixing"].rstrip(" %"))
        assert got == pytest.approx(100 * sum(shares[n, kind] for n in layers), abs=0.051), kind


def test_falcon_h1s_layers_show_their_attention_and_their_mamba_side_by_side(tmp_path):
    """Falcon-H1 runs attention heads and Mamba-2 heads in every layer: the Model view draws the Mamba-2 of each layer
    beside the softmax grid, its shares table has a row for each mixer of a layer, and Model facts adds them by
    kind."""
    folder = build("falcon_h1", tmp_path)
    at = _open(folder)
    grid = next(c for c in charts(at) if chart_title(c).startswith(TITLE))
    assert [t.split(" · ")[0] for t in grid["layout"]["yaxis"]["ticktext"]] == ["L0", "L1", "L2", "L3"]
    shares = next(d.value for d in at.dataframe if "share of the token mixing" in d.value.columns)
    assert shares["layer"].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert shares["kind"].tolist()[:2] == ["softmax attention", "Mamba-2 (SSD)"]
    model = mha_viz.load_model(folder, device="cpu")
    want = mha_viz.effective.effective_attention(model, TEXT).mixing_shares()
    got = [float(s.rstrip(" %")) for s in shares["share of the token mixing"]]
    assert got == pytest.approx([100 * s for s in want.values()], abs=0.051)
    at.session_state[keys.GOTO] = "model_facts"
    at.run()
    assert not at.exception and not at.error
    kinds = next(d.value for d in at.dataframe if "share of the token mixing" in d.value.columns).set_index("kind")
    assert kinds.loc["softmax attention", "layers"] == kinds.loc["Mamba-2 (SSD)", "layers"] == "0, 1, 2, 3"
    for kind in ("softmax attention", "Mamba-2 (SSD)"):
        got = float(kinds.loc[kind, "share of the token mixing"].rstrip(" %"))
        assert got == pytest.approx(100 * sum(s for (_, k), s in want.items() if k == kind), abs=0.051), kind
    at.session_state[keys.GOTO] = "composition"  # read off the weights of the softmax heads alone: it says why not
    at.run()
    said = [w.value for w in at.warning]
    assert any("cannot be split into what wrote them" in w for w in said), said
    assert not any("UnsupportedArchitecture" in w or "failed" in w for w in said), said


def test_the_head_view_draws_one_other_layers_group_every_cell_signed(tmp_path):
    folder = build("qwen3_next", tmp_path)
    at = _open(folder, page="head_view")
    at.selectbox(key=keys.EFFECTIVE_LAYER_PICK).set_value(2).run()
    at.number_input(key=keys.EFFECTIVE_GROUP_PICK).set_value(3).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    fig = next(c for c in charts(at) if chart_title(c).startswith("Layer 2, group 3"))
    model = mha_viz.load_model(folder, device="cpu")
    want = mha_viz.effective.effective_attention(model, TEXT).layer(2).matrix[3]
    heat = fig["data"][0]
    np.testing.assert_allclose(np.asarray(heat["z"], dtype=np.float64), want, rtol=1e-5, atol=1e-7)
    span = float(np.abs(want).max())
    assert heat["zmid"] == 0 and heat["zmin"] == pytest.approx(-span) and heat["zmax"] == pytest.approx(span)
    assert "gated DeltaNet" in chart_title(fig)


def test_past_its_side_the_head_view_draws_blocks_of_tokens_and_sends_no_label_a_cell(tmp_path, monkeypatch):
    """With DETAIL_SIDE at 8 cells, the text's tokens are drawn in 8 × 8 blocks: each cell the signed value of largest
    |A| of its block (PyTorch's adaptive max-pooling of A and of −A), the axes at each block's first token, and the
    hover built from the axes (no text or customdata a cell)."""
    import torch

    from mha_viz.drawing import effective as effective_figures

    monkeypatch.setattr(effective_figures, "DETAIL_SIDE", 8)
    folder = build("qwen3_next", tmp_path)
    at = _open(folder, page="head_view")
    at.selectbox(key=keys.EFFECTIVE_LAYER_PICK).set_value(2).run()
    at.number_input(key=keys.EFFECTIVE_GROUP_PICK).set_value(1).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    heat = next(c for c in charts(at) if chart_title(c).startswith("Layer 2, group 1"))["data"][0]
    model = mha_viz.load_model(folder, device="cpu")
    eff = mha_viz.effective.effective_attention(model, TEXT)
    x = torch.as_tensor(eff.layer(2).matrix[1])[None, None]
    top = torch.nn.functional.adaptive_max_pool2d(x, 8)[0, 0].numpy()
    bottom = -torch.nn.functional.adaptive_max_pool2d(-x, 8)[0, 0].numpy()
    np.testing.assert_allclose(np.asarray(heat["z"], dtype=np.float64), np.where(top >= -bottom, top, bottom),
                               rtol=1e-5, atol=1e-7)
    n = len(eff.tokens)
    assert n > 8 and list(heat["x"]) == list(heat["y"]) == [i * n // 8 for i in range(8)]
    assert "text" not in heat and "customdata" not in heat
    assert any("each cell is a block of tokens" in c.value for c in at.caption)
