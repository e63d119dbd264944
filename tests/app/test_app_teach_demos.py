"""The teaching page draws what is on screen: one part at a time, one demonstration at a time
(the others are drawn when picked, with the same numbers as the steps), the query row on its
own, and a change of head or layer reads the text's one recorded forward pass instead of running
the model again."""

from __future__ import annotations

import threading
from unittest import mock

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.circuits import ahead
from mha_viz.metrics.measures import PATTERN_MEANING
from tests.app.helpers import charts, open_page, open_with_text
from tests.helpers import shown

pytestmark = pytest.mark.model
TEXT = "The cat sat on the mat."


def _by_title(at) -> dict[str, dict]:
    return {c["layout"]["title"]["text"]: c for c in charts(at)}


def _z(chart: dict) -> np.ndarray:
    return np.array(chart["data"][0]["z"], dtype=float)


SCORES, DEMOS = "3–6 · Scores to probabilities", "Demonstrations"


def _part(at, part: str):
    return at.button_group(key="teach_part").set_value(part).run()


def _probs(at) -> np.ndarray:
    """Attention probabilities as the steps draw them (the page is left on that part)."""
    _part(at, SCORES)
    return _z(next(c for t, c in _by_title(at).items() if t.startswith("A: attention probabilities")))


def test_one_demonstration_at_a_time_with_the_steps_numbers():
    at = open_with_text("teaching", TEXT)
    at.selectbox(key="teach_layer").set_value(2)
    at.selectbox(key="teach_head").set_value(5).run()
    probs = _probs(at)
    _part(at, DEMOS)
    assert not charts(at)  # none until picked
    at.button_group(key="teach_demo").set_value("Why projections").run()
    titles = _by_title(at)
    assert "this head, with W_Q and W_K" in titles  # the one picked, drawn
    assert not any(t.startswith("head ") or t.startswith("encoder") for t in titles)  # the others, not
    np.testing.assert_allclose(_z(titles["this head, with W_Q and W_K"]), probs, atol=1e-6)

    at.button_group(key="teach_demo").set_value("Why several heads").run()
    assert not at.exception and not at.error
    titles = _by_title(at)
    heads = {int(t.split()[1].rstrip(":")): c for t, c in titles.items() if t.startswith("head ")}
    heads = [heads[h] for h in sorted(heads)]  # drawn three columns wide: read column by column
    assert len(heads) == 12 and "this head, with W_Q and W_K" not in titles
    maps = np.stack([_z(c) for c in heads])  # (H, n, n)
    np.testing.assert_allclose(maps[5], probs, atol=1e-5)  # head 5 is the head the steps walk through
    np.testing.assert_allclose(maps.sum(-1), 1.0, atol=1e-4)
    np.testing.assert_allclose(_z(titles["the layer's heads averaged"]), maps.mean(0), atol=1e-5)
    assert heads[0]["data"][0]["x"] == heads[0]["data"][0]["y"] and len(heads[0]["data"][0]["x"]) == len(probs)
    # the classes the titles name are each said in words, and no other
    named = {t.split(": ", 1)[1].split(":")[0] for t in titles if t.startswith("head ")}
    said = shown(" ".join(c.value for c in at.caption))  # Markdown: each class in bold
    assert named and all(f"**{c}** {PATTERN_MEANING[c]}" in said for c in named), (named, said)
    assert not [c for c in set(PATTERN_MEANING) - named if f"**{c}** {PATTERN_MEANING[c]}" in said], said

    at.button_group(key="teach_demo").set_value("Masks").run()
    titles = _by_title(at)
    encoder, decoder = _z(titles["encoder: bidirectional"]), _z(titles["decoder: causal"])
    np.testing.assert_allclose(encoder, probs, atol=1e-5)  # BERT masks nothing: its own probabilities
    n = len(probs)
    assert np.allclose(decoder[np.triu_indices(n, 1)], 0) and np.allclose(decoder.sum(1), 1, atol=1e-5)
    assert not any(t.startswith("head ") for t in titles)


def test_the_query_row_shows_that_row_of_the_probabilities():
    at = open_with_text("teaching", TEXT)
    _part(at, SCORES)
    at.slider(key="teach_row").set_value(2).run()
    assert not at.exception and not at.error
    row = next(c for t, c in _by_title(at).items() if t.startswith("Row 2 ("))
    line = next(t for t in row["data"] if t["type"] == "scatter")
    np.testing.assert_allclose(np.array(line["y"], dtype=float), _probs(at)[2], atol=1e-6)
    # the lesson quotes a row's peak ("0.992 of the attention"): each axis has a tick there, labelled with it
    # (issue 90: ticks only at 0.224 and 0.706)
    bars = next(t for t in row["data"] if t["type"] == "bar")
    for axis, values in (("yaxis2", line["y"]), ("yaxis", bars["y"])):
        peak = np.nanmax(np.array(values, dtype=float))
        ticks = dict(zip(row["layout"][axis]["tickvals"], row["layout"][axis]["ticktext"]))
        at_peak = min(ticks, key=lambda v: abs(v - peak))
        assert at_peak == pytest.approx(peak) and ticks[at_peak] == f"{peak:.3f}", (axis, ticks)


def test_switching_heads_and_layers_runs_no_model():
    at = open_with_text("teaching", TEXT, model="smollm2")
    first = _probs(at)
    # every forward pass of every model starts at its token embeddings; the thread that computes a model's
    # weights-only results ahead (`circuits.ahead`: its copying scores probe the readout once) is not the page's
    threads: list[str] = []
    real = torch.nn.Embedding.forward

    def forward(self, input):
        threads.append(threading.current_thread().name)
        return real(self, input)

    with mock.patch.object(torch.nn.Embedding, "forward", forward):
        at.selectbox(key="teach_head").set_value(4).run()
        at.selectbox(key="teach_layer").set_value(3).run()
    assert not at.exception and not at.error
    assert [t for t in threads if not t.startswith(ahead.THREAD_PREFIX)] == []  # the recorded pass is read again
    probs = _probs(at)
    assert probs.shape == first.shape and not np.allclose(probs, first)
    assert np.allclose(probs[np.triu_indices(len(probs), 1)], 0)  # causal
    assert "masked scores (blank: −∞)" in _by_title(at)


def test_the_part_on_screen_is_kept_across_pages():
    at = open_with_text("teaching", TEXT)
    _part(at, DEMOS)
    open_page(at, "model_facts")
    open_page(at, "teaching")
    assert at.button_group(key="teach_part").value == DEMOS
    assert not charts(at)  # the demonstrations, none picked: no step is drawn


@pytest.mark.parametrize("text", [TEXT, "The animal didn't cross the street because it was too tired."])
def test_why_projections_shows_the_diagonal_its_words_claim(text):
    """*Why projections* says every token attends most to itself without projections (issue 90): on MiniLM its
    map with unit rows scored at most 1/√384 and drew a uniformly pale square (diagonal 0.080, the rest 0.076 to
    0.079). The map as drawn: each row's largest weight is its diagonal, by a margin seen on the 0–1 scale, and it
    is softmax(X̂X̂ᵀ/√d) of the layer's input X with every row scaled to length √d, computed here."""
    at = open_with_text("teaching", text)
    at.selectbox(key="teach_layer").set_value(0).run()
    _part(at, DEMOS)
    at.button_group(key="teach_demo").set_value("Why projections").run()
    drawn = _z(_by_title(at)["softmax(X̂ X̂ᵀ/√d), no projections"])
    n = len(drawn)
    off = np.where(np.eye(n, dtype=bool), -np.inf, drawn)
    assert (np.diag(drawn) - off.max(1) > 0.2).all()  # every row: its diagonal stands out by a fifth of the scale
    minilm = mha_viz.load_model("minilm", device="cpu")  # BERT's first layer reads the embeddings' output
    with torch.no_grad():
        x = minilm.hf_model(**minilm.tokenizer(text, return_tensors="pt"), output_hidden_states=True
                            ).hidden_states[0][0].double().numpy()
    d = x.shape[1]
    x = np.sqrt(d) * x / np.linalg.norm(x, axis=1, keepdims=True)
    scores = x @ x.T / np.sqrt(d)
    want = np.exp(scores - scores.max(1, keepdims=True))
    np.testing.assert_allclose(drawn, want / want.sum(1, keepdims=True), atol=1e-5)
