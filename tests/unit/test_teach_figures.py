"""The teaching page's figures: every row and column of a matrix is its own category, also when
tokens repeat ("the cat sat on the mat": two columns "the"), and the figures of every step and
demonstration carry the walkthrough's own arrays under the tokens' labels."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest

from mha_viz.drawing.style import axis_labels, label_text
from mha_viz.features.teaching import figures as teach_figures
from mha_viz.views import teaching
from tests.helpers import decode

TOK = ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]


def test_repeated_tokens_keep_their_own_rows_and_columns():
    fig = teach_figures.matrix(np.random.default_rng(0).random((8, 8)), TOK, title="A", columns=TOK,
                               probabilities=True)
    heat = fig.data[0]
    assert len(set(heat.x)) == len(set(heat.y)) == 8 and list(heat.x) == list(heat.y)
    assert [x.split("\u200b")[0] for x in heat.x] == TOK  # shown as the tokens


def _walkthrough(causal: bool, d_model: int = 60, H: int = 4, d_k: int = 5, seed: int = 0) -> teaching.Walkthrough:
    """A walkthrough of random numbers, computed as `teaching.walkthrough` does (without a model)."""
    rng = np.random.default_rng(seed)
    n = len(TOK)
    f32 = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    X, W_Q, W_K, W_V, W_O = f32(n, d_model), f32(d_model, d_k), f32(d_model, d_k), f32(d_model, d_k), f32(d_k, d_model)
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    scores = Q @ K.T
    scaled = scores / np.float32(np.sqrt(d_k))
    masked = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, scaled).astype(np.float32) if causal else scaled
    probs = teaching.softmax_rows(masked).astype(np.float32)
    z = probs @ V
    concat = np.concatenate([f32(n, d_k), z, f32(n, d_k * (H - 2))], axis=1)  # head 1 of 4
    return teaching.Walkthrough(
        tokens=TOK, layer=3, head=1, kv_head=1, num_heads=H, num_kv_heads=H, scale=1 / np.sqrt(d_k),
        is_causal=causal, rope=False, X=X, W_Q=W_Q, W_K=W_K, W_V=W_V, W_O=W_O, Q=Q, K=K, V=V, scores=scores,
        scaled=scaled, masked=masked, probs=probs, z=z, concat=concat, output=concat @ f32(H * d_k, d_model),
        head_output=z @ W_O)


def _sent(fig) -> dict:
    """The figure as Streamlit sends it (JSON, arrays decoded)."""
    return decode(json.loads(pio.to_json(fig, validate=False)))


@pytest.mark.parametrize("causal", [False, True])
def test_step_figures_carry_the_walkthroughs_arrays_under_the_tokens(causal):
    w = _walkthrough(causal)
    figs = teach_figures.step_figures(w)
    expected = ({"X", "Q", "K", "V", "scores", "scaled", "probs", "z", "concat", "output"}
                | ({"masked"} if causal else set()))
    assert set(figs) == expected
    labels = axis_labels(TOK)
    for name, fig in figs.items():
        heat = _sent(fig)["data"][0]
        values = getattr(w, name)
        shown = min(values.shape[1], teach_figures.MAX_COLUMNS)
        want = np.where(np.isneginf(values[:, :shown]), np.nan, values[:, :shown])
        np.testing.assert_array_equal(np.array(heat["z"], dtype=float), want.astype(float), err_msg=name)
        assert heat["y"] == labels, name  # one row per token, "the" twice as two rows
        square = name in {"scores", "scaled", "masked", "probs"}
        assert heat["x"] == (labels if square else list(range(shown))), name  # dimensions: their indices
    assert [label_text(x) for x in _sent(figs["probs"])["data"][0]["x"]] == TOK
    assert _sent(figs["X"])["layout"]["title"]["text"] == "X: one row per token (first 48 of 60 columns)"
    if causal:  # masked keys (j > i) are blank cells, not numbers
        z = np.array(_sent(figs["masked"])["data"][0]["z"], dtype=float)
        assert np.isnan(z[np.triu_indices(len(TOK), 1)]).all() and np.isfinite(np.tril(z)).all()
    frame = _sent(figs["concat"])["layout"]["shapes"][0]
    assert (frame["x0"], frame["x1"]) == (w.head * 5 - 0.5, (w.head + 1) * 5 - 0.5)  # head 1's 5 columns


@pytest.mark.parametrize("causal", [False, True])
def test_step_figures_of_a_group_are_those_of_every_step(causal):
    """A part of the page asks for its steps only: the same figures, nothing else built."""
    w = _walkthrough(causal)
    every = teach_figures.step_figures(w)
    part = teach_figures.step_figures(w, ("scores", "scaled", "masked", "probs"))
    assert list(part) == ["scores", "scaled"] + (["masked"] if causal else []) + ["probs"]
    for name, fig in part.items():
        assert pio.to_json(fig, validate=False) == pio.to_json(every[name], validate=False), name
    with pytest.raises(ValueError, match="no step called 'Z'"):
        teach_figures.step_figures(w, ("Z",))


def test_an_encoders_local_window_is_a_masked_step():
    """ModernBERT's local layers: an encoder whose walkthrough has a window draws the masked scores."""
    import dataclasses

    w = dataclasses.replace(_walkthrough(False), window=2)
    figs = teach_figures.step_figures(w, ("scores", "scaled", "masked", "probs"))
    assert list(figs) == ["scores", "scaled", "masked", "probs"]


def test_probability_maps_keep_each_title_and_its_matrix():
    w = _walkthrough(False)
    maps = {"encoder": teaching.softmax_rows(w.scaled), "decoder": teaching.softmax_rows(w.scaled, causal=True)}
    figs = teach_figures.probability_maps(maps, TOK)
    assert list(figs) == ["encoder", "decoder"]
    for title, fig in figs.items():
        sent = _sent(fig)
        assert sent["layout"]["title"]["text"] == title
        heat = sent["data"][0]
        np.testing.assert_allclose(np.array(heat["z"], dtype=float), maps[title])
        assert heat["x"] == heat["y"] == axis_labels(TOK) and (heat["zmin"], heat["zmax"]) == (0, 1)


def test_float32_matrices_are_sent_as_float32():
    z = np.random.default_rng(1).random((8, 8)).astype(np.float32)
    heat = json.loads(pio.to_json(teach_figures.matrix(z, TOK, title="A"), validate=False))["data"][0]
    assert heat["z"]["dtype"] == "f4"  # half the bytes of float64 on the wire
    ints = _sent(teach_figures.matrix(np.eye(3, dtype=int), ["a", "b", "c"], title="I"))["data"][0]
    np.testing.assert_array_equal(ints["z"], np.eye(3))
    assert ints["zmin"] == -1 and ints["zmax"] == 1  # diverging, centred on 0


def test_softmax_row_blanks_masked_keys():
    scores = np.array([1.0, 2.0, -np.inf, -np.inf])
    probs = teaching.softmax_rows(scores[None, :])[0]
    bars, line = _sent(teach_figures.softmax_bars(scores, probs, ["a", "b", "a", "c"], title="Row 1"))["data"]
    assert bars["type"] == "bar" and line["type"] == "scatter"
    assert np.isnan(np.array(bars["y"], dtype=float)[2:]).all() and bars["y"][:2] == [1.0, 2.0]
    np.testing.assert_allclose(line["y"], [1 / (1 + np.e), np.e / (1 + np.e), 0, 0])
    assert len(set(bars["x"])) == 4  # the repeated "a" keeps its own bar


def test_kv_sharing_joins_each_query_head_to_its_group():
    fig = _sent(teach_figures.kv_sharing(9, 3, highlight=4))
    lines = [t for t in fig["data"] if t["mode"] == "lines"]
    assert len(lines) == 9
    dark = [i for i, t in enumerate(lines) if t["line"]["color"] == "#08306b"]
    assert dark == [3, 4, 5]  # head 4 reads KV head 1, shared with heads 3 and 5
    assert [t["x"][1] for t in lines] == [1.0] * 3 + [4.0] * 3 + [7.0] * 3  # the centre of each group


@pytest.mark.parametrize("head", [0, 1, 3])
def test_a_block_wider_than_the_window_is_framed_inside_it(head):
    """A head of 64 values (GPT-2, SmolLM2) is wider than the window of MAX_COLUMNS: the window lies inside its
    block, and the frame is the window's own columns, never reaching past the columns drawn."""
    d_v, H = 64, 4
    concat = np.random.default_rng(head).standard_normal((len(TOK), d_v * H)).astype(np.float32)
    start, stop = head * d_v, (head + 1) * d_v
    fig = _sent(teach_figures.matrix(concat, TOK, title="every head's z", highlight=(start, stop)))
    xs, frame = fig["data"][0]["x"], fig["layout"]["shapes"][0]
    assert start <= xs[0] and xs[-1] < stop and len(xs) == teach_figures.MAX_COLUMNS  # the window in the block
    assert (frame["x0"], frame["x1"]) == (xs[0] - 0.5, xs[-1] + 0.5)


def test_a_framed_window_on_labelled_columns_counts_from_the_window():
    """With labels, the axis is categories, numbered from the window's first column: the frame follows."""
    cols = [f"c{j}" for j in range(80)]
    values = np.random.default_rng(2).standard_normal((len(TOK), 80)).astype(np.float32)
    fig = _sent(teach_figures.matrix(values, TOK, title="labelled", columns=cols, highlight=(60, 65)))
    labels, frame = fig["data"][0]["x"], fig["layout"]["shapes"][0]
    left, right = int(frame["x0"] + 0.5), int(frame["x1"] + 0.5)  # category positions in the window
    assert [label_text(x) for x in labels[left:right]] == cols[60:65]


@pytest.mark.parametrize("head", [0, 7, 15])
def test_the_concatenation_shows_the_chosen_heads_columns_framed(head):
    """Past MAX_COLUMNS columns (16 heads of 5 here: 80), step 8 draws a window that holds the chosen
    head's block, framed where its z lies, and its title says which columns it shows."""
    rng = np.random.default_rng(head)
    n, d_k, H = len(TOK), 5, 16
    concat = rng.standard_normal((n, d_k * H)).astype(np.float32)
    start, stop = head * d_k, (head + 1) * d_k
    fig = _sent(teach_figures.matrix(concat, TOK, title="every head's z", highlight=(start, stop)))
    heat, frame = fig["data"][0], fig["layout"]["shapes"][0]
    first = int(heat["x"][0])
    assert [int(x) for x in heat["x"]] == list(range(first, first + teach_figures.MAX_COLUMNS))
    np.testing.assert_array_equal(np.array(heat["z"], dtype=float), concat[:, first:first + 48].astype(float))
    left, right = int(frame["x0"] + 0.5), int(frame["x1"] + 0.5)  # the frame's columns (the axis: their indices)
    assert (left, right) == (start, stop) and first <= left and right <= first + teach_figures.MAX_COLUMNS
    np.testing.assert_array_equal(np.array(heat["z"], dtype=float)[:, left - first:right - first],
                                  concat[:, start:stop].astype(float))
    title = fig["layout"]["title"]["text"]
    assert title.endswith("(first 48 of 80 columns)" if first == 0 else f"(columns {first}–{first + 47} of 80)")
