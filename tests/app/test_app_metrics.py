"""The metric views through AppTest: they render for MiniLM and SmolLM2, show the numbers the
core computes, draw layer boundaries, compare picked heads, and refuse flow for long inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

import mha_viz
from mha_viz import metrics
from mha_viz.circuits import composition
from mha_viz.ui.kit import keys
from tests.app.helpers import chart_title, charts, frame, open_page, open_with_text, shown, start_app

pytestmark = pytest.mark.model
TEXT = "The keys to the old cabinet are missing. They were here."


def _page(page_id: str, text: str = TEXT, model: str | None = None):
    return open_with_text(page_id, text, model)


@pytest.fixture(scope="module")
def minilm_run():
    model = mha_viz.load_model("minilm", device="cpu")
    return model, mha_viz.analyze(model, TEXT, max_tokens=512)


def test_metric_grid_shows_the_chosen_metric_of_every_head(minilm_run):
    model, run = minilm_run
    at = _page("head_metrics")
    at.selectbox(key="metric_choice").set_value("prev_token_score").run()
    assert not at.exception
    grid, types, _scatter = charts(at)  # the metric's grid, the head types' (test_app_head_types.py), the scatter
    assert chart_title(types).startswith("Head types")
    z = np.array(grid["data"][0]["z"], dtype=float)
    expected = metrics.head_table(run)["prev_token_score"].to_numpy().reshape(6, 12)
    np.testing.assert_allclose(z, expected, atol=1e-6)
    assert len(grid["data"][1]["x"]) == 72  # one click marker a head
    assert any("Σ(A ⊙ P)/ΣA" in m.value for m in at.markdown)  # the formula is shown
    assert any("High:" in c.value for c in at.caption)
    df = frame(at, "induction_score")
    assert len(df) == 72 and {"pattern", "output_norm", "mean_output_norm"} <= set(df.columns)
    assert at.get("download_button")


def test_similarity_matrix_ordered_by_layer_and_clustered(minilm_run):
    model, run = minilm_run
    at = _page("similarity")
    matrix = charts(at)[0]
    z = np.array(matrix["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, metrics.head_similarity(run, "js"), atol=1e-6)
    assert len(matrix["layout"]["shapes"]) == 2 * 5  # a horizontal and a vertical line per boundary
    at.radio(key="sim_order").set_value("clustered").run()
    assert not at.exception
    clustered = charts(at)[0]
    assert not clustered["layout"].get("shapes")
    assert sorted(clustered["data"][0]["x"]) == sorted(matrix["data"][0]["x"])  # a permutation
    assert clustered["data"][0]["x"] != matrix["data"][0]["x"]


@pytest.mark.parametrize("kind", ["qk", "ov", "cka", "residual", "seed_r", "cosine"])
def test_every_similarity_kind_renders_with_a_baseline(kind):
    at = _page("similarity")
    at.selectbox(key="sim_kind").set_value(kind).run()
    assert not at.exception and not at.error
    assert any(metrics.SIMILARITIES[kind].label in m.value for m in at.markdown)
    div = frame(at, "D")
    assert list(div["heads"])[-1] == "all heads" and len(div) == 7
    assert ((div["D"] >= 0) & (div["D"] <= 1)).all()
    assert ((div["D_random_init"] >= 0) & (div["D_random_init"] <= 1)).all()
    head_map = charts(at)[1]
    assert len(head_map["data"][0]["x"]) == 72


def test_pattern_diversity_is_far_above_random_init():
    """Random-init heads attend almost uniformly (all alike); trained MiniLM heads differ."""
    at = _page("similarity")
    div = frame(at, "D")
    row = div[div["heads"] == "all heads"].iloc[0]
    assert row["D"] > 10 * row["D_random_init"]


@pytest.mark.parametrize("kind", ["js", "qk"])
def test_a_similaritys_baseline_computes_no_copying_scores_of_its_twin(monkeypatch, kind):
    """No similarity reads the copying scores: the random-init baseline of a pattern measure (JS) runs the twin on the
    text, and that of a weight measure (QK cosine) reads the twin's W_Q and W_K, and neither computes the twin's
    copying scores (on SmolLM2 they were 2 of the 9 CPU-s of opening the page). The page's head table, for the real
    model, still asks for them."""
    asked = []
    real = composition.copying_scores
    monkeypatch.setattr(composition, "copying_scores", lambda model: asked.append(model) or real(model))
    at = _page("similarity", f"A sentence of its own, so that its {kind} baseline is computed in this test.")
    at.selectbox(key="sim_kind").set_value(kind).run()
    assert not at.exception and not at.error
    assert frame(at, "D")["D_random_init"].between(0, 1).all()  # the baseline ran
    model = at.session_state[keys.CURRENT].model
    assert asked and all(m is model for m in asked), [m.name for m in asked]


def test_map_coloured_by_pattern_has_a_legend():
    at = _page("similarity")
    at.radio(key="map_colour").set_value("pattern").run()
    assert not at.exception
    head_map = charts(at)[1]
    names = {t.get("name") for t in head_map["data"][1:]}
    assert names and names <= {"heterogeneous", "broad", "diagonal", "vertical", "block", "sink", "mixed"}


def test_compare_heads_across_layers(minilm_run):
    model, run = minilm_run
    at = _page("compare_heads")
    at.multiselect(key="compare_heads").set_value(["L0H3", "L2H5", "L5H11"]).run()
    assert not at.exception
    heatmaps = [c for c in charts(at) if c["data"][0]["type"] == "heatmap"]
    assert [c["layout"]["title"]["text"][:16] for c in heatmaps] == ["Layer 0, head 3", "Layer 2, head 5",
                                                                    "Layer 5, head 11"]
    pairs = frame(at, "heads")
    assert list(pairs["heads"]) == ["L0H3 · L2H5", "L0H3 · L5H11", "L2H5 · L5H11"]
    js = metrics.head_similarity(run, "js")
    assert pairs.iloc[0][metrics.SIMILARITIES["js"].label] == pytest.approx(js[3, 2 * 12 + 5], abs=1e-4)
    # their metrics, computed for the picked heads alone, are the whole table's rows (every column the head's own)
    whole = metrics.head_table(run, composition.table_weights(model)).iloc[[3, 2 * 12 + 5, 5 * 12 + 11]]
    shown_rows = frame(at, "pattern")
    assert list(shown_rows.columns) == list(whole.columns) and len(shown_rows) == 3
    for column in whole.columns:
        if whole[column].dtype.kind == "f":
            np.testing.assert_allclose(shown_rows[column].to_numpy(float), whole[column].to_numpy(float), rtol=1e-5,
                                       atol=1e-6, equal_nan=True, err_msg=column)
        else:
            assert list(shown_rows[column]) == list(whole[column]), column
    # a short text opens on the shared 0..1 scale; the toggle scales each head to its own maximum
    assert at.toggle(key="compare_rescale").value is False
    assert all(c["data"][0]["zmax"] == 1 for c in heatmaps)
    at.toggle(key="compare_rescale").set_value(True).run()
    tops = [c["data"][0]["zmax"] for c in charts(at) if c["data"][0]["type"] == "heatmap"]
    assert tops == pytest.approx([float(run.attentions[layer, h].max()) for layer, h in ((0, 3), (2, 5), (5, 11))],
                                 rel=1e-5)
    # with the first token hidden (the sink measures read what was hidden), the rows are Head metrics' rows
    at.checkbox(key="hide_first").check().run()
    hidden_rows = frame(at, "pattern")
    open_page(at, "head_metrics")
    table = frame(at, "pattern").set_index(["layer", "head"]).loc[[(0, 3), (2, 5), (5, 11)]].reset_index()
    assert list(hidden_rows["sink"]) == pytest.approx(list(table["sink"]), rel=1e-5, abs=1e-6)
    assert list(hidden_rows["pattern"]) == list(table["pattern"])


def test_rollout_rows_sum_to_one_and_flow_for_short_text():
    at = _page("across_layers")
    z = np.array(charts(at)[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z.sum(1), 1.0, atol=1e-5)
    at.radio(key="layers_method").set_value("flow").run()
    assert not at.exception and not at.warning
    z = np.array(charts(at)[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z.sum(1), 1.0, atol=1e-5)
    at.radio(key="layers_method").set_value("rollout through one head").run()
    assert not at.exception and charts(at)


def test_flow_refused_for_long_text_with_a_reason():
    at = _page("across_layers", text="word " * 80)
    at.radio(key="layers_method").set_value("flow").run()
    assert not at.exception
    assert any("at most 64" in w.value and "Rollout" in w.value for w in at.warning)
    assert at.text_area(key="text").value == "word " * 80


def test_smollm2_grouped_query_note_and_weight_cosines():
    at = _page("similarity", model="smollm2")
    at.selectbox(key="sim_kind").set_value("ov").run()
    assert not at.exception and not at.error
    assert any("Grouped-query attention" in c.value for c in at.caption)
    z = np.array(charts(at)[0]["data"][0]["z"], dtype=float)
    assert z.shape == (270, 270) and np.allclose(np.diag(z), 1.0, atol=1e-5)
    assert math.isclose(float(np.abs(z).max()), 1.0, abs_tol=1e-5)


def test_metric_views_with_our_attention_match_hugging_face(minilm_run):
    """With "Compute with our MHA" on, the importance columns (from our z) equal HF's."""
    model, run = minilm_run
    at = start_app()
    at.toggle(key="local_attention").set_value(True).run()
    at.text_area(key="text").input(TEXT).run()
    open_page(at, "head_metrics")
    assert not at.exception and not at.error
    ours = frame(at, "induction_score")
    expected = metrics.head_table(run, model.head_weights())
    np.testing.assert_allclose(ours["output_norm"], expected["output_norm"], rtol=1e-4)
    open_page(at, "similarity")
    at.selectbox(key="sim_kind").set_value("cka").run()
    assert not at.exception and not at.error
    z = np.array(charts(at)[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z, metrics.head_similarity(run, "cka"), atol=1e-4)


def test_head_view_long_text_opens_on_blocks_then_words_and_window():
    """Past 256 tokens the head view starts downsampled; words and a window are one click away."""
    # about 325 tokens (past the 256 of full detail) but 225 words (under it)
    at = _page("head_view", text="The cat sat on the unbelievably comfortable mat. " * 25)
    assert at.radio(key="head_detail").value == "all tokens, in blocks"
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    assert "blocks (block max)" in spec["layout"]["title"]["text"]
    assert len(spec["data"][0]["z"]) <= 128
    at.radio(key="head_detail").set_value("words").run()
    assert not at.exception
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    labels = spec["data"][0]["x"]
    assert "unbelievably" in " ".join(labels) and "by word" in spec["layout"]["title"]["text"]
    z = np.array(spec["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(z.sum(1), 1.0, atol=1e-4)
    at.radio(key="head_detail").set_value("a token window").run()
    assert not at.exception
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    assert len(spec["data"][0]["x"]) == 96 and "tokens 0–95" in spec["layout"]["title"]["text"]


def test_head_view_switches_to_blocks_when_the_text_becomes_long():
    at = _page("head_view")
    assert at.radio(key="head_detail").value == "every token"
    at.text_area(key="text").input("word " * 400).run()
    assert not at.exception
    assert at.radio(key="head_detail").value == "all tokens, in blocks"


def test_capture_over_the_memory_budget_is_refused_before_computing(monkeypatch):
    """A capture larger than the budget gets a message with its cost; the text stays and the
    token limit can be lowered."""
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")  # 1 MiB: MiniLM at 86 tokens needs 6·12·86²·4 B
    text = "The cat sat on the mat. " * 12
    at = start_app()
    at.text_area(key="text").input(text).run()
    assert any("at 86 tokens would hold 2.0 MiB" in shown(e.value) for e in at.error), [e.value for e in at.error]
    assert at.text_area(key="text").value == text
    at.number_input(key="token_limit").set_value(32).run()
    assert not at.exception and not at.error
    assert any("first 32" in w.value for w in at.warning)


def test_over_the_budget_some_layers_can_be_captured(monkeypatch):
    """Over the budget, the sidebar offers as many layers as fit; the views then show the
    model's own layer numbers, and rollout says why it needs every layer from the first."""
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")  # one MiniLM layer at 86 tokens: 12·86²·4 B = 0.34 MiB
    at = start_app()
    at.text_area(key="text").input("The cat sat on the mat. " * 12).run()
    assert any("Pick up to 2 layers" in e.value for e in at.error), [e.value for e in at.error]
    picker = at.multiselect(key="capture_layers")
    assert picker.options == [str(layer) for layer in range(6)] and picker.max_selections == 2
    picker.set_value([5, 2]).run()
    assert not at.exception and not at.error
    assert any("layers 2, 5 of 6" in c.value for c in at.caption), [c.value for c in at.caption]
    grid = next(c for c in charts(at) if c["data"][0]["type"] == "image")
    assert grid["layout"]["yaxis"]["ticktext"] == ["L2", "L5"]
    at.selectbox(key="grid_layer").set_value(1)  # the second row: layer 5
    at.button(key="open_head").click().run()
    spec = next(s for s in charts(at) if s["data"][0]["type"] == "heatmap")
    assert spec["layout"]["title"]["text"].startswith("Layer 5, head 0")
    open_page(at, "head_metrics")
    assert not at.exception and not at.error
    assert sorted(set(at.dataframe[0].value["layer"])) == [2, 5]
    open_page(at, "across_layers")
    assert not at.exception and any("holds layers 2, 5 of 6 only" in i.value for i in at.info)


def test_cka_is_listed_as_unavailable_for_three_tokens():
    at = _page("similarity", text="a")  # [CLS] a [SEP]
    options = at.selectbox(key="sim_kind").options  # the labels shown
    assert metrics.SIMILARITIES["js"].label in options
    assert metrics.SIMILARITIES["cka"].label not in options
    assert any("at least 4 tokens" in c.value for c in at.caption)


def test_similarity_opens_on_cosine_when_js_would_be_slow():
    """At 512 tokens MiniLM's JS takes about a second; SmolLM2's 270 heads would take long:
    the page then opens on the pattern cosine and says what JS would cost."""
    at = _page("similarity", model="smollm2", text="word " * 400)
    assert at.selectbox(key="sim_kind").value == "cosine"


def test_a_long_rollout_opens_brightened_to_its_bulk_and_a_short_one_to_its_maximum():
    """Issue 90: on a long run, Across layers opened on the rollout to the last layer, a pale square (the first
    token's column holds the largest cells). Past the full-detail length it opens with colours up to the 99th
    percentile of the matrix drawn, computed here from the library's rollout; the toggle puts the maximum back,
    which a short text opens on."""
    from mha_viz.drawing import metrics as metric_figures
    from mha_viz.views import detail

    text = " ".join(mha_viz.corpus.read_texts("sample"))[:2400]
    model = mha_viz.load_model("minilm", device="cpu")
    rolled = metrics.rollout(mha_viz.analyze(model, text, max_tokens=512))[-1]
    assert len(rolled) > detail.FULL_DETAIL_TOKENS
    at = _page("across_layers", text=text)
    assert at.toggle(key="layers_bulk").value is True

    def top(at) -> float:
        return float(next(d for d in charts(at)[0]["data"] if d.get("type") == "heatmap")["zmax"])
    want = float(np.quantile(rolled.ravel()[::max(1, rolled.size // metric_figures.BULK_SAMPLE)], 0.99))
    assert top(at) == pytest.approx(want, rel=1e-5) and top(at) < 0.5 * rolled.max()
    assert any("the 99th percentile" in c.value for c in at.caption)
    at.toggle(key="layers_bulk").set_value(False).run()
    assert top(at) == pytest.approx(float(rolled.max()), rel=1e-5)
    short = _page("across_layers")
    assert short.toggle(key="layers_bulk").value is False
    z = np.array(charts(short)[0]["data"][0]["z"], dtype=float)
    assert charts(short)[0]["data"][0]["zmax"] == pytest.approx(z.max(), rel=1e-5)


def test_a_rollout_of_some_seconds_says_so_while_it_runs(monkeypatch):
    """Issue 90: the first visit to Across layers on SmolLM2's 8,192 tokens took 16.1 s with nothing but a spinner
    (under the 20 s that ask first). A rollout stated at 3 s or more says its cost above the figure."""
    from mha_viz.features.across_layers import page as page

    monkeypatch.setattr(page, "rollout_seconds", lambda run, layers: 16.0)
    at = _page("across_layers")
    assert any("About 16 s on 2 CPU cores the first time" in c.value for c in at.caption)
    monkeypatch.setattr(page, "rollout_seconds", lambda run, layers: 0.5)
    assert not any("the first time" in c.value for c in _page("across_layers").caption)
