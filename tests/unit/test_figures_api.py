"""The public figures (`mha_viz.figures`) on planted runs: each draws the arrays of what it is
given (a run, a comparison, a generation, an explanation) as the app's page does, picks the level
of detail and the window a long input needs, and refuses an option it does not know."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import plotly.graph_objects as go
import pytest

import mha_viz
from mha_viz import AttentionRun, figures, metrics
from mha_viz.drawing import heads as head_figures
from mha_viz.drawing import metrics as metric_figures


def _attention(L, H, n, seed=0, causal=False):
    rng = np.random.default_rng(seed)
    a = rng.random((L, H, n, n)) + 0.01
    if causal:
        a = np.tril(a)
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


def _run(L=2, H=3, n=6, seed=0, causal=False):
    return AttentionRun.from_array(_attention(L, H, n, seed, causal), [f"t{i}" for i in range(n)],
                                   is_causal=causal)


def test_every_public_name_is_a_documented_function_returning_a_figure():
    assert sorted(figures.__all__) == sorted([
        "head", "model_grid", "lines", "token_focus", "metric_grid", "head_types", "similarity", "head_map", "rollout",
        "links_strip", "link_distances", "exact_row", "head_scatter",
        "compare", "generation_step", "dla_grid", "estimate_grid", "restored_grid", "estimate_scatter",
        "grid", "position_grid", "head_tokens", "patched_positions", "walkthrough", "softmax_row", "kv_sharing",
        "probability_maps", "pruning_curve", "score_terms", "score_parts", "task_grid", "retrieval_grid",
        "needle_look", "role_map", "notebook"])
    for name in figures.__all__:
        fn = getattr(figures, name)
        assert callable(fn) and fn.__doc__ and len(fn.__doc__) > 80, name
        returns = {"notebook": ("None", None), "walkthrough": ("dict[str, go.Figure]",),
                   "probability_maps": ("dict[str, go.Figure]",)}.get(name, ("go.Figure", go.Figure))
        assert fn.__annotations__["return"] in returns, name


def test_the_links_figures_draw_the_heads_own_rows():
    run = _run(n=6)
    row = figures.exact_row(run, 1, 2, query=4)
    np.testing.assert_allclose(np.asarray(row.data[0].y, dtype=float), run.head(1, 2)[4], atol=1e-7)  # a key a bar
    part = figures.exact_row(run, 1, 2, query=4, keys=(2, 4))
    np.testing.assert_allclose(np.asarray(part.data[0].y, dtype=float), run.head(1, 2)[4, 2:5], atol=1e-7)
    opened = figures.exact_row(run, 1, 2)  # the section's opening query: the last that keeps keys
    np.testing.assert_allclose(np.asarray(opened.data[0].y, dtype=float), run.head(1, 2)[5], atol=1e-7)
    assert "Layer 1, head 2" in figures.links_strip(run, 1, 2).layout.title.text
    assert isinstance(figures.link_distances(run, 1, 2), go.Figure)


def test_head_opens_short_runs_on_every_token_and_long_ones_on_blocks():
    short = _run(n=6)
    fig = figures.head(short, 1, 2)
    np.testing.assert_array_equal(np.asarray(fig.data[0].z), short.head(1, 2))
    long = _run(L=1, H=1, n=300)
    assert "blocks" in figures.head(long, 0, 0).layout.title.text
    assert figures.head(long, 0, 0, window=(10, 20)).layout.title.text.endswith("tokens 10–19 of 300")
    words = figures.head(short, 0, 0, level="words")
    assert "by word" in words.layout.title.text
    with pytest.raises(ValueError, match="'tokens', 'blocks' or 'words'"):
        figures.head(short, 0, 0, level="pixels")


def test_model_grid_is_the_model_views_figure():
    run = _run()
    assert figures.model_grid(run).to_json() == head_figures.model_grid(run).to_json()


def test_lines_window_a_long_text_and_keep_only_a_focus_tokens_lines():
    run = _run(L=1, H=2, n=200)
    assert figures.lines(run, 0).layout.meta["tokens"] == 128  # the first 128 tokens only
    a = np.zeros((1, 1, 4, 4), np.float32)
    a[0, 0, :, 0] = 1.0  # every query on key 0 ...
    a[0, 0, 2] = [0.0, 0.5, 0.5, 0.0]  # ... but query 2, on keys 1 and 2
    planted = AttentionRun.from_array(a, list("abcd"))
    assert figures.lines(planted, 0).layout.meta["lines"] == 5
    assert figures.lines(planted, 0, token=2).layout.meta["lines"] == 2  # query 2's two lines
    assert figures.lines(planted, 0, token=0, side="key").layout.meta["lines"] == 3  # queries 0, 1, 3
    with pytest.raises(ValueError, match="side"):
        figures.lines(planted, 0, token=0, side="value")


def test_token_focus_rows_are_every_heads_row_or_column_of_the_token():
    run = _run()
    to = np.asarray(figures.token_focus(run, 4).data[0].z)
    np.testing.assert_allclose(to, run.attentions[:, :, 4, :].reshape(-1, run.n))
    by = np.asarray(figures.token_focus(run, 4, direction="by").data[0].z)
    np.testing.assert_allclose(by, run.attentions[:, :, :, 4].reshape(-1, run.n))
    with pytest.raises(ValueError, match="'to' or 'by'"):
        figures.token_focus(run, 4, direction="from")


def test_metric_grid_draws_the_head_tables_column_with_each_heads_pattern():
    run = _run(L=3, H=2)
    table = metrics.head_table(run)
    fig = figures.metric_grid(run, "confidence")
    np.testing.assert_allclose(np.asarray(fig.data[0].z), table["confidence"].to_numpy().reshape(3, 2))
    assert table["pattern"].iloc[3] in fig.data[1].text[3]  # layer 1, head 1
    assert fig.layout.title.text == f"{metrics.METRICS['confidence'].label}, every head"
    with pytest.raises(ValueError, match="entropy"):  # the message lists what can be drawn
        figures.metric_grid(run, "nonsense", table=table)


def test_a_one_sided_grid_has_a_tick_at_its_largest_value_that_a_note_quoting_it_finds():
    """Issue 90: a note quotes the largest value ("highest 0.873"); the colour bar tops there with that label, the
    other ticks kept clear of it. A diverging grid (symmetric about 0) keeps Plotly's own ticks."""
    from mha_viz.drawing.metrics import metric_grid

    values = np.random.default_rng(0).uniform(0.1, 0.873, size=(4, 3))
    values[2, 1] = 0.873
    bar = metric_grid(values, title="Mass").data[0].colorbar
    assert max(bar.tickvals) == pytest.approx(0.873) and f"{values.max():.3f}" in bar.ticktext
    others = [t for t in bar.tickvals if t != max(bar.tickvals)]
    assert others and all(0.873 - t > 0.04 for t in others)  # no round tick's label over the peak's
    assert metric_grid(values - 0.5, title="Change", diverging=True).data[0].colorbar.tickvals is None


def test_similarity_and_head_map_draw_every_pair_and_every_head():
    run = _run(L=2, H=3)
    sim = metrics.head_similarity(run, "js")
    fig = figures.similarity(run)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), sim, atol=1e-6)
    assert fig.layout.title.text.endswith("6 heads (by layer)")
    clustered = figures.similarity(run, "cosine", clustered=True)
    assert clustered.layout.title.text.endswith("(clustered)") and not clustered.layout.shapes
    points = figures.head_map(run, color_by="pattern").data[0]
    assert len(points.x) == 6 and points.text[4].startswith("layer 1, head 1")


def test_rollout_is_the_last_layers_rollout_or_one_heads():
    run = _run(L=3, H=2)
    rolled = metrics.rollout(run)
    fig = figures.rollout(run)
    np.testing.assert_allclose(np.asarray(fig.data[0].z), rolled[-1], atol=1e-6)
    assert fig.layout.title.text == "Rollout to layer 2"
    one = figures.rollout(run, 1, head=1)
    expected = run.attentions[1, 1].astype(np.float64) @ rolled[0]  # A_{1,1} R_0, by hand
    np.testing.assert_allclose(np.asarray(one.data[0].z), expected, atol=1e-6)
    assert one.layout.title.text == "Layer 1, head 1, rolled out to the input"


def test_compare_draws_the_change_a_head_side_by_side_or_the_depth_spread():
    cmp = mha_viz.compare(_run(seed=0), _run(seed=1))
    np.testing.assert_allclose(np.asarray(figures.compare(cmp).data[0].z), cmp.change)
    a, b, diff, _, _ = cmp.pair(1, 2)
    panels = figures.compare(cmp, 1, 2).data
    np.testing.assert_allclose(np.asarray(panels[2].z), -diff, atol=1e-6)  # B − A drawn, as the table; pair: A − B
    other = mha_viz.compare(_run(L=2, H=3), _run(L=3, H=3, seed=2))
    assert other.change is None
    assert all(isinstance(t, go.Box) for t in figures.compare(other, metric="entropy").data)


def _generation(P=3, T=4, L=2, H=4, kv=2):
    n = P + T
    run = AttentionRun.from_array(_attention(L, H, n, causal=True), [f"w{i}" for i in range(n)],
                                  is_causal=True, num_kv_heads=kv)
    steps = [mha_viz.capture.GenerationStep(token=f"w{P + t}", token_id=t, prob=0.5,
                                            top=[(f"w{P + t}", 0.5), ("x", 0.2)], entropy=1.0) for t in range(T)]
    return mha_viz.capture.Generation(run=run, num_prompt_tokens=P, steps=steps)


def test_generation_step_draws_the_row_that_chose_the_token():
    gen = _generation()
    fig = figures.generation_step(gen, 1, layer=1)  # step 1 was chosen by row P - 1 + 1 = 3
    np.testing.assert_allclose(np.asarray(fig.data[0].z), gen.run.attentions[1, :, 3, :4])
    last = figures.generation_step(gen, -1, layer=0, head=2, view="matrix")
    assert "row 5 (step 4) framed" in last.layout.title.text  # the last step: row P - 1 + 3
    assert "w6" in str(figures.generation_step(gen, 3, view="choices").data[0].y)
    with pytest.raises(IndexError):
        figures.generation_step(gen, 4)
    with pytest.raises(ValueError, match="choices, heads, matrix, masses"):
        figures.generation_step(gen, 0, view="tokens")


def test_the_attribution_grids_draw_the_explanations_arrays():
    from mha_viz.features.prediction.figures import MARK
    from mha_viz.interventions.estimate import agreement

    rng = np.random.default_rng(0)
    per_head, restored = rng.normal(size=(2, 3)), rng.normal(size=(2, 3))
    by_position = rng.normal(size=(2, 3, 4)) / 4
    estimated = by_position.sum(-1)

    def expl(patching):
        return SimpleNamespace(dla=SimpleNamespace(per_head=per_head, label="DLA (linearised)"), answer_text=" Mary",
                               wrong_text=" <John>",
                               clean=SimpleNamespace(layer_ids=[0, 1]), estimated=estimated, patching=patching,
                               estimate=SimpleNamespace(values=by_position), no_estimate=None,
                               agreement=lambda: None if patching is None else agreement(estimated, patching.restored))
    first = expl(None)
    dla = figures.dla_grid(first)
    np.testing.assert_allclose(np.asarray(dla.data[0].z), per_head)
    assert "&lt;John&gt;" in dla.layout.title.text  # the wrong token is user text: escaped
    assert dla.layout.title.text.startswith("DLA (linearised) to")  # the attribution's own label
    np.testing.assert_allclose(np.asarray(figures.estimate_grid(first).data[0].z), estimated)
    assert len(figures.estimate_grid(first).data) == 2  # no rings before real patching
    with pytest.raises(ValueError, match="patch it for real first"):
        figures.restored_grid(first)
    both = expl(SimpleNamespace(restored=restored))
    np.testing.assert_allclose(np.asarray(figures.restored_grid(both).data[0].z), restored)
    differ = np.abs(estimated - restored) > 0.1
    ringed = figures.restored_grid(both)
    rings = next(t for t in ringed.data if t.name == MARK)
    assert sorted(zip(rings.y, rings.x)) == sorted(zip(*np.nonzero(differ)))
    assert list(ringed.data).index(rings) == 2  # after the click markers: a click's curve 1 is still a head
    assert len(ringed.data[1].x) == per_head.size
    assert head_figures.grid_pick([{"curve_number": 1, "point_index": 4}], 3) == (1, 1)
    scatter = figures.estimate_scatter(both)
    np.testing.assert_allclose(np.asarray(scatter.data[1].x), restored.ravel())
    np.testing.assert_allclose(np.asarray(scatter.data[1].y), estimated.ravel())
    r = np.corrcoef(estimated.ravel(), restored.ravel())[0, 1]
    assert f"Pearson r = {r:.3f}" in scatter.layout.title.text


def _swatches_are_the_marks(fig: go.Figure) -> None:
    """The legend's swatches are the marks' colours: a trace the legend lists draws in one colour (a list of colours
    would be drawn with its first as the swatch: issue 90's blue swatch over red and blue bars), and every colour of
    a trace kept out of the legend is one of the legend's swatches."""
    def colours(trace) -> set:
        colour = getattr(getattr(trace, "marker", None), "color", None)
        return set() if colour is None else {colour} if isinstance(colour, str) else set(colour)
    listed = [t for t in fig.data if t.showlegend is not False]
    swatches = set()
    for trace in listed:
        assert len(colours(trace)) <= 1, (trace.name, colours(trace))
        swatches |= colours(trace)
    for trace in fig.data:
        if trace.showlegend is False:
            assert colours(trace) <= swatches, (trace.name, colours(trace) - swatches)


def test_one_heads_positions_draw_each_sign_in_its_legends_colour():
    """*Patched at one position at a time*: every bar is drawn in the colour of its sign's legend entry (restores,
    works against), in one slot a position beside the estimate."""
    from mha_viz.features.prediction.figures import NEGATIVE, POSITIVE

    values, estimate = np.array([0.5, -0.25, 0.0, -0.1]), np.array([0.4, -0.2, 0.1, 0.0])
    expl = SimpleNamespace(corrupted=SimpleNamespace(tokens=["When", " Mary", " and", " John"]),
                           estimate=SimpleNamespace(values=estimate[None, None]))
    fig = figures.patched_positions(values, expl, 0, 0)
    _swatches_are_the_marks(fig)
    legend = {t.name: t.marker.color for t in fig.data if t.showlegend is not False}
    assert legend == {"patched for real: restores": POSITIVE, "patched for real: works against": NEGATIVE,
                      "estimate": "rgba(0,0,0,0)"}
    bars = next(t for t in fig.data if t.name == "patched for real")
    np.testing.assert_allclose(bars.y, values)
    assert list(bars.marker.color) == [POSITIVE, NEGATIVE, POSITIVE, NEGATIVE]
    assert {t.offsetgroup for t in fig.data if t.name.startswith("patched")} == {"patched"}
    np.testing.assert_allclose(next(t for t in fig.data if t.name == "estimate").y, estimate)
    # the legend hangs from the figure's foot, under the turned token labels, in a margin that holds both (it was
    # drawn over them: "hen", "ary", "ohn")
    from mha_viz.drawing import margins
    assert (fig.layout.legend.yref, fig.layout.legend.y, fig.layout.legend.yanchor) == ("container", 0, "bottom")
    turned = margins.text_px(" John") * np.sin(np.radians(60))  # the longest token label, turned by 60°
    assert margins.room(fig)["b"] >= turned + margins.LEGEND_ROW_PX


def test_the_page_helpers_keep_the_titles_the_app_shows():
    run = _run()
    sim = metrics.head_similarity(run, "cosine")
    assert metric_figures.similarity_figure(sim, "cosine", run).layout.title.text == \
        f"{metrics.SIMILARITIES['cosine'].label}, 6 heads (by layer)"
    assert metric_figures.ACROSS_LAYERS["flow"].format(layer=3, head=None) == "Flow to layer 3"


def test_the_needles_heaviest_key_is_labelled_inward_at_either_end():
    """Issue 90: the heaviest key's label at position 0 ("<|im_start|>") was centred on it, half cut off at the
    left edge; near an end it is written inward."""
    from mha_viz.features.retrieval import figures as retrieval_figures
    from mha_viz.tasks.retrieval import Look

    n = 50
    for top, side in ((0, "top right"), (25, "top center"), (49, "top left")):
        rows = np.full((1, 1, n), 0.01, dtype=np.float32)
        rows[0, 0, top] = 0.9
        look = Look([f"t{i}" for i in range(n)], (10, 14), "t11", 0, rows, 64, 0.5)
        marker = retrieval_figures.look_figure(look, 0, 0, "L0 H0").data[1]
        assert marker.x[0] == top and marker.textposition == side
