"""Heads found from two tokens on planted runs (issue 54): the ranking is the pair's weights sorted,
strongest first, ties in layer and head order; the words level is the head view's word matrix; bad
positions and counts are refused with words; the bars of the top heads show the ranking and a click
on one names its rank."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import AttentionRun
from mha_viz.drawing import focus as focus_figures
from mha_viz.views import detail, heads_from_tokens
from mha_viz.views.token_pair import HeadWeight, pair_weights


def _run(layers=3, heads=4, n=6, seed=0, tokens=None):
    rng = np.random.default_rng(seed)
    a = rng.random((layers, heads, n, n)).astype(np.float32)
    a /= a.sum(-1, keepdims=True)
    return AttentionRun.from_array(a, tokens or [f"t{i}" for i in range(n)])


def test_the_ranking_is_the_pairs_weights_strongest_first():
    run = _run()
    ranked = heads_from_tokens(run, 4, 1)
    assert len(ranked) == 12 and all(isinstance(r, HeadWeight) for r in ranked)
    by_hand = sorted(((float(run.attentions[layer, h, 4, 1]), layer, h) for layer in range(3) for h in range(4)),
                     key=lambda t: -t[0])
    assert [(r.layer, r.head, r.weight) for r in ranked] == [(layer, h, w) for w, layer, h in by_hand]
    assert heads_from_tokens(run, 4, 1, top=5) == ranked[:5]
    assert heads_from_tokens(run, 4, 1, top=100) == ranked


def test_equal_weights_keep_layer_then_head_order():
    """MiniLM's 72 heads, all equal but two: past 16 items numpy's default sort is not stable."""
    a = np.full((6, 12, 2, 2), 0.5, dtype=np.float32)
    a[3, 4, 1] = [0.1, 0.9]
    a[0, 5, 1] = [0.75, 0.25]
    ranked = heads_from_tokens(AttentionRun.from_array(a, ["a", "b"]), 1, 1)
    rest = [(layer, h) for layer in range(6) for h in range(12) if (layer, h) not in ((3, 4), (0, 5))]
    assert [(r.layer, r.head) for r in ranked] == [(3, 4), *rest, (0, 5)]


def test_the_words_level_is_the_head_views_word_matrix():
    tokens = ["[CLS]", "play", "ing", "ball", "s", "[SEP]"]
    run = _run(n=6, tokens=tokens)
    run.word_ids = [0, 1, 1, 2, 2, 3]
    w = pair_weights(run, 1, 2, words=True)
    for layer in range(3):
        for h in range(4):
            assert w[layer, h] == pytest.approx(detail.word_level(run.head(layer, h), run.word_ids)[1, 2], rel=1e-5)
    ranked = heads_from_tokens(run, 1, 2, words=True)
    assert [r.weight for r in ranked] == sorted(w.ravel().tolist(), reverse=True)
    with pytest.raises(IndexError, match="4 words"):
        heads_from_tokens(run, 4, 0, words=True)


@pytest.mark.parametrize("query, key, error, words", [
    (6, 0, IndexError, "query 6 is out of range for 6 tokens"), (0, -1, IndexError, "key -1"),
    (1.0, 0, TypeError, "query must be a position"), (True, 0, TypeError, "query must be a position")])
def test_positions_past_the_run_are_refused_with_words(query, key, error, words):
    with pytest.raises(error, match=words):
        heads_from_tokens(_run(), query, key)


@pytest.mark.parametrize("top", [0, -2, 2.5, True])
def test_a_top_below_one_is_refused(top):
    with pytest.raises(ValueError, match="top must be"):
        heads_from_tokens(_run(), 1, 0, top=top)


def test_the_bars_show_the_top_of_the_ranking_and_a_click_names_its_rank():
    run = _run()
    run.layer_ids = [2, 5, 9]  # some layers captured: the bars name the model's layers
    ranked = heads_from_tokens(run, 3, 0, top=10)
    fig = focus_figures.ranked_heads(ranked, run.layer_ids, query="3: <it>", key="0: animal", total=12)
    bars = fig.data[0]
    assert list(bars.y) == [f"L{run.layer_ids[r.layer]} H{r.head}" for r in ranked]
    np.testing.assert_allclose(bars.x, [r.weight for r in ranked])
    assert list(bars.text) == [f"{r.weight:.3f}" for r in ranked]
    assert fig.layout.yaxis.autorange == "reversed" and list(fig.layout.yaxis.tickvals) == list(bars.y)
    assert "&lt;it&gt;" in fig.layout.title.text and "top 10 of 12" in fig.layout.title.text
    assert focus_figures.ranked_pick([{"curve_number": 0, "point_index": 3}]) == 3
    assert focus_figures.ranked_pick([{"curve_number": 1, "point_index": 3}]) is None
    assert focus_figures.ranked_pick([]) is None
