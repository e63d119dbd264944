"""The teaching and ablation views through AppTest: the steps show the model's own numbers,
heads switched off change what the model predicts, importance and pruning are drawn."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.features.ablation import controls as ablation_keys
from tests.app.helpers import chart_titles, charts, frame, open_box, open_with_text

pytestmark = pytest.mark.model



def _steps_shown(at) -> list[int]:
    return [int(m.value[2:m.value.index(".")]) for m in at.markdown if re.match(r"\*\*\d+\. ", m.value)]


def _formula(at, step: int) -> str:
    """The LaTeX of step `step` (the formula drawn under its heading, in the page's order)."""
    headings = [int(m.value[2:m.value.index(".")]) for m in at.markdown if re.match(r"\*\*\d+\. ", m.value)]
    return [e.value for e in at.latex][headings.index(step)]


def _biases(name: str) -> tuple[bool, bool]:
    """Whether layer 0's Q/K/V projections and its output projection add a bias, read from the Hugging Face
    module itself (its Linear layers: BERT's query/key/value and dense, Llama's q/k/v_proj and o_proj)."""
    attention = next(m for n, m in mha_viz.load_model(name, device="cpu").hf_model.named_modules()
                     if n.endswith(("layer.0.attention", "layers.0.self_attn")))
    linears = {n.rsplit(".", 1)[-1]: m for n, m in attention.named_modules() if isinstance(m, torch.nn.Linear)}
    out = linears.pop("dense" if "dense" in linears else "o_proj")
    return any(m.bias is not None for m in linears.values()), out.bias is not None


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_the_formulas_show_a_bias_only_where_the_model_has_one(name):
    qkv, out = _biases(name)
    assert (qkv, out) == ((True, True) if name == "minilm" else (False, False))  # the two cases are both planted
    at = open_with_text("teaching", "One two three four.", model=name)
    assert ("b_Q" in _formula(at, 2), "b_K" in _formula(at, 2), "b_V" in _formula(at, 2)) == (qkv,) * 3
    at.button_group(key="teach_part").set_value("7–9 · Output").run()
    assert ("b_O" in _formula(at, 9)) == out
    assert ("plus the bias" in "".join(c.value for c in at.caption)) == out


def test_teaching_steps_use_the_captured_probabilities_one_part_at_a_time():
    at = open_with_text("teaching", "The cat sat on the mat.")
    at.selectbox(key="teach_layer").set_value(2)
    at.selectbox(key="teach_head").set_value(5).run()
    assert not at.exception and not at.error
    # the page opens on steps 1-2: X, Q, K, V and nothing else is drawn
    assert _steps_shown(at) == [1, 2]
    titles = chart_titles(at)
    assert len(titles) == 4 and titles[0] == "X: one row per token (first 48 of 384 columns)"
    assert not at.dataframe and not at.table  # the costs are another part
    at.button_group(key="teach_part").set_value("3–6 · Scores to probabilities").run()
    assert _steps_shown(at) == [3, 4, 5, 6]
    run = at.session_state["_current"].run
    probs = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("A: attention probabilities"))
    shown = np.array(probs["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(shown, run.attentions[2, 5], atol=1e-5)
    assert not any(t.startswith(("X:", "z = A V")) for t in chart_titles(at))
    at.button_group(key="teach_part").set_value("7–9 · Output").run()
    assert _steps_shown(at) == [7, 8, 9]
    # head 5's block of the concatenation (columns 160–191 of 6 × 12 heads of 32) in the middle of the window
    assert chart_titles(at) == ["z = A V", "every head's z side by side (this head framed) (columns 152–199 of 384)",
                           "the layer's attention output (first 48 of 384 columns)"]
    concat = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("every head's z"))
    box = concat["layout"]["shapes"][0]
    assert [int(x) for x in concat["data"][0]["x"]] == list(range(152, 200))  # the axis: the columns' indices
    assert (round(box["x0"] + 0.5), round(box["x1"] + 0.5)) == (160, 192)
    at.button_group(key="teach_part").set_value("What it costs").run()
    assert frame(at, "variant")["variant"].tolist()[0] == "MHA (this model)"
    assert not _steps_shown(at) and not charts(at)  # an MHA model has no KV-sharing drawing


def test_teaching_on_a_gqa_decoder_draws_the_kv_sharing_and_the_causal_mask():
    at = open_with_text("teaching", "One two three four.", model="smollm2")
    at.button_group(key="teach_part").set_value("3–6 · Scores to probabilities").run()
    assert any(t.startswith("masked scores") for t in chart_titles(at))
    at.button_group(key="teach_part").set_value("What it costs").run()
    assert any("9 query heads share 3 key/value heads" in t for t in chart_titles(at))
    assert frame(at, "variant")["variant"].tolist()[1] == "GQA (this model)"


def test_switching_heads_off_changes_the_next_token_prediction():
    at = open_with_text("ablation", "The capital of France is", model="smollm2")
    preds = frame(at, "every head on")
    assert preds["every head on"][0].startswith("␣Paris")  # " Paris", its space marked as on every label
    assert preds["every head on"].tolist() == preds["with the heads off"].tolist()  # nothing off yet
    at.selectbox(key="heads_layer_pick").set_value(0)
    at.button(key="heads_layer_off").click().run()
    assert not at.exception and not at.error
    preds = frame(at, "every head on")
    assert preds["every head on"].tolist() != preds["with the heads off"].tolist()
    assert any("9 of 270 heads off" in m.value for m in at.markdown)


def test_an_embedding_model_reports_the_cosine_and_the_importance():
    at = open_with_text("ablation", "A dog runs in the park.")
    assert at.text_input(key="ablation_other").value
    at.selectbox(key="heads_layer_pick").set_value(1)
    at.button(key="heads_layer_off").click().run()
    cos = next(m for m in at.metric if m.label.startswith("cosine"))
    assert 0 < float(cos.value) < 1
    assert "imp_go" not in [b.key for b in at.button]  # in its box, built only while open
    open_box(at, ablation_keys.IMP_OPEN).button(key="imp_go").click().run()
    assert not at.exception and not at.error
    grid = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("Head importance"))
    values = np.array(grid["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(np.linalg.norm(values, axis=1), 1.0, rtol=1e-5)


def test_teaching_starts_on_the_toy_models_induction_head():
    at = open_with_text("teaching", "The cat sat on the mat.")
    at.button(key="use_toy").click().run()
    assert not at.exception and not at.error
    assert at.selectbox(key="model_choice").value == "toy-induction"
    assert at.session_state["teach_layer"] == 1  # layer 1: the induction heads
    caption = next(c.value for c in at.caption if c.value.startswith("toy-induction, layer 1"))
    assert float(re.search(r"induction score (\d+\.\d+)", caption).group(1)) > 0.35


def test_pruning_curve_on_the_toy_model():
    at = open_with_text("ablation", "q w e r t y u i o q w e r t y u i o", model="toy-induction")
    open_box(at, ablation_keys.IMP_OPEN).button(key="imp_go").click().run()
    at.button(key="prune_go").click().run()
    assert not at.exception and not at.error
    fig = next(c for c in charts(at) if c["layout"]["title"]["text"] == "Pruning heads")
    names = [t.get("name") for t in fig["data"]]
    assert "least important first" in names and "random order (mean)" in names
    curve = next(t for t in fig["data"] if t.get("name") == "least important first")
    assert len(curve["x"]) == 10 and curve["x"][0] == 0
