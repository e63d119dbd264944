"""The *Circuit behind a prediction* page through AppTest, on toy-induction's preset: the
graph draws the top k edges of `edge_attribution` computed here (its edge markers in score order, coloured
by sign, nodes without an edge hidden), the star on the faithfulness curve is `circuit` run here, a
clicked edge shows `path_patch`'s value, the top 20 are patched for real, the JSON download opens again,
a link reopens the circuit, the pair is the one *Heads behind a prediction* shows, and a refusal is a message with
the inputs kept."""

from __future__ import annotations

import json

import numpy as np
import pytest
from streamlit.util import calc_hash

import mha_viz
from mha_viz.circuits import path_patching
from mha_viz.drawing import circuit as circuit_figures
from mha_viz.export import shared_controls
from mha_viz.features.circuit import controls as circuit_keys
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.interventions import prediction
from mha_viz.ui.kit import keys
from tests.app.helpers import app_test, chart_title, charts, open_page, shown, start_app, titled
from tests.helpers import HEADINGS

pytestmark = pytest.mark.model


def _page():
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("toy-induction").run()
    open_page(at, "circuit")
    at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def test_the_pair_is_the_one_heads_behind_a_prediction_shows():
    """A pair typed on *Heads behind a prediction* is on the circuit's page, and one typed there is back on the
    prediction's: one form under shared keys, not two copies."""
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("toy-induction").run()
    open_page(at, "prediction")
    at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
    at.text_input(key=shared_controls.PRED_ANSWER).input(" x").run()
    open_page(at, "circuit")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == prediction.INDUCTION.corrupted
    assert at.text_input(key=shared_controls.PRED_ANSWER).value == " x"
    assert circuit_keys.CIRC_GO in [b.key for b in at.button]
    at.text_area(key=shared_controls.PRED_CORRUPTED).input("a b c").run()
    open_page(at, "prediction")
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == "a b c"
    assert prediction_keys.PRED_GO in [b.key for b in at.button]


def _edge_markers(chart) -> dict:
    return next(d for d in chart["data"] if d.get("name") == circuit_figures.MIDPOINTS)


def test_circuit_graph_curve_and_real_values_match_the_api():
    at = _page()
    toy = mha_viz.load_model("toy-induction", device="cpu")
    clean, corrupted = prediction.INDUCTION.clean, prediction.INDUCTION.corrupted
    at.radio(key=circuit_keys.CIRC_METHOD).set_value("eap").run()
    at.button(key=circuit_keys.CIRC_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    want = mha_viz.edge_attribution(toy, clean, corrupted, method="eap")
    k = 12
    at.slider(key=circuit_keys.CIRC_K).set_value(k).run()
    graph = titled(at, f"The top {k} edges (EAP)")
    markers = _edge_markers(graph)
    top = want.top(k)
    assert len(markers["x"]) == k
    for text, (s, r, v) in zip(markers["hovertext"], zip(top["sender"], top["receiver"], top["score"])):
        assert text.startswith(f"{s} → {r}") and f"{v:+.4g}" in text
    colours = markers["marker"]["color"]
    assert [c == circuit_figures.NEEDED for c in colours] == [v < 0 for v in top["score"]]  # red: needed
    nodes = next(d for d in graph["data"] if d.get("mode") == "markers+text")["text"]
    assert set(nodes) == set(top["sender"]) | {r.split(".")[0] for r in top["receiver"]}  # only nodes with an edge
    # the star: the top k circuit run for real
    curve = titled(at, "Faithfulness of the top k edges")
    star = curve["data"][1]
    real = mha_viz.circuit(toy, clean, corrupted, top).faithfulness
    assert star["x"] == [k] and star["y"][0] == pytest.approx(real, abs=1e-5)
    assert f"faithfulness **{real:.3f}**" in " ".join(c.value for c in at.caption)
    points = want.scores.shape[0]
    assert curve["data"][0]["x"][-1] == points and curve["data"][0]["y"][-1] == pytest.approx(1.0, abs=1e-4)
    # a clicked edge: its estimate beside path patching for real
    # (AppTest cannot click a chart: the pick a click makes is read by edge_pick, and put here; the e2e test clicks)
    curve_number = len(graph["data"]) - 1
    assert circuit_figures.edge_pick([{"curve_number": curve_number, "point_index": 2}], curve_number) == 2
    assert circuit_figures.edge_pick([{"curve_number": 0, "point_index": 2}], curve_number) is None
    picked = (top["sender"][2], top["receiver"][2])
    key = next(iter(at.session_state[circuit_keys.CIRC_RESULTS]))
    at.session_state[circuit_keys.CIRC_PICKED] = (*key, *picked)
    at.run()
    info = shown(" ".join(i.value for i in at.info))
    value = mha_viz.circuits.path_patch(toy, clean, corrupted, *picked)
    assert f"{picked[0]} → {picked[1]}" in info and f"{value:+.4f}" in info
    graph = titled(at, f"The top {k} edges (EAP)")
    outlined = [d for d in graph["data"] if d.get("line", {}).get("color") == "black"]
    markers = _edge_markers(graph)
    assert len(outlined) == 1 and graph["data"][-1] is markers  # the clicked edge outlined, the dots still last
    (x0, x1), (y0, y1) = outlined[0]["x"], outlined[0]["y"]  # the clicked edge's dot lies on the outlined edge
    t = ((markers["x"][2] - x0) * (x1 - x0) + (markers["y"][2] - y0) * (y1 - y0)) / ((x1 - x0) ** 2 + (y1 - y0) ** 2)
    assert 0 < t < 1 and [markers["x"][2], markers["y"][2]] == pytest.approx([x0 + t * (x1 - x0), y0 + t * (y1 - y0)])
    # the top 20 for real
    at.button(key=circuit_keys.CIRC_TOP_GO).click().run()
    assert not at.exception and not at.error
    scatter = titled(at, "Estimate against real path patching, 20 edges")
    top20 = want.top(20)
    np.testing.assert_allclose(scatter["data"][1]["y"], mha_viz.circuits.path_patch_many(toy, clean, corrupted, top20),
                               atol=1e-5)
    r = np.corrcoef(top20["score"], scatter["data"][1]["y"])[0, 1]
    assert f"Pearson r = {r:.3f}" in chart_title(scatter)


def test_saved_circuit_opens_again_and_bad_files_are_messages():
    at = _page()
    at.button(key=circuit_keys.CIRC_GO).click().run()  # EAP-IG, the default
    assert not at.exception and not at.error
    (key, method), edges = next(iter(at.session_state[circuit_keys.CIRC_RESULTS].items()))
    saved = edges.to_json(k=5)
    data = json.loads(saved)
    assert data["method"] == "eap-ig" and data["clean"] == prediction.INDUCTION.clean and len(data["edges"]) == len(
        edges.scores)
    opened = mha_viz.circuits.Edges.from_json(saved)
    np.testing.assert_allclose(opened.scores["score"], edges.scores["score"])
    assert list(opened.scores["receiver"]) == list(edges.scores["receiver"])
    for bad in ('{"edges": 3}', saved.replace('"eap-ig"', '"magic"'), saved.replace('"L1H1.v"', '"L1H1.z"')):
        with pytest.raises(ValueError, match="not a circuit saved by mha-viz"):
            mha_viz.circuits.Edges.from_json(bad)

    # a fresh session on the same pair: the file opens the circuit without finding it again
    again = _page()
    assert again.radio(key=circuit_keys.CIRC_METHOD).value == "eap-ig"
    eap = mha_viz.circuits.Edges.from_json(saved)
    eap.method = "eap"  # saved by EAP: the section switches to it
    again.file_uploader(key=circuit_keys.CIRC_FILE).set_value(("circuit.json", eap.to_json().encode(),
                                                                  "application/json"))
    again.run()
    assert not again.exception and not again.error, [e.value for e in again.error]
    assert again.radio(key=circuit_keys.CIRC_METHOD).value == "eap"
    graph = titled(again, "The top 30 edges (EAP)")
    assert len(_edge_markers(graph)["x"]) == 30
    # not a circuit: a message, the page and its inputs as they were
    again.file_uploader(key=circuit_keys.CIRC_FILE).set_value(("circuit.json", b"{ not json", "application/json"))
    again.run()
    assert not again.exception
    assert "not a circuit saved by mha-viz" in shown(" ".join(e.value for e in again.error))
    assert again.text_area(key=shared_controls.PRED_CORRUPTED).value == prediction.INDUCTION.corrupted
    # another pair's circuit: offered, and its pair put on the page by the button
    other = json.loads(saved)
    other.update(clean="a b c d e f g h a b c d e f g", corrupted="m n o p q r s t m n o p q r s")
    again.file_uploader(key=circuit_keys.CIRC_FILE).set_value(("other.json", json.dumps(other).encode(),
                                                                  "application/json"))
    again.run()
    assert not again.exception and "found on another pair" in shown(" ".join(w.value for w in again.warning))
    again.button(key=circuit_keys.CIRC_OPEN_PAIR).click().run()
    assert not again.exception, again.exception
    assert again.text_area(key=keys.TEXT).value == other["clean"]
    assert again.text_area(key=shared_controls.PRED_CORRUPTED).value == other["corrupted"]
    assert not again.error, [e.value for e in again.error]  # its circuit shown at once: that pair is the page's
    assert [(k.clean, method) for k, method in again.session_state[circuit_keys.CIRC_RESULTS]] == [
        (other["clean"], "eap-ig")]
    assert titled(again, "The top 30 edges (EAP-IG)") is not None


def test_sizes_of_the_curve():
    assert path_patching.curve_sizes(81) == sorted({0, 1, 2, 4, 8, 16, 40, 81})
    assert path_patching.curve_sizes(3)[0] == 0 and path_patching.curve_sizes(3)[-1] == 3


def test_a_link_reopens_the_circuit():
    """The URL of the page with a circuit carries the pair, the estimate and k; opening it finds the circuit at once
    and draws the same k edges."""
    at = _page()
    at.radio(key=circuit_keys.CIRC_METHOD).set_value("eap").run()
    at.button(key=circuit_keys.CIRC_GO).click().run()
    at.slider(key=circuit_keys.CIRC_K).set_value(9).run()
    assert not at.exception and not at.error
    params = dict(at.query_params)
    assert params["circuit"] == "eap" and params["k"] == "9" and params["corrupted"] == prediction.INDUCTION.corrupted
    again = app_test()
    again.query_params.update({**params, "layer": params.get("layer", "1")})
    again.run()
    open_page(again, "circuit")
    assert not again.exception and not again.error, [e.value for e in again.error]
    graph = titled(again, "The top 9 edges (EAP)")
    toy = mha_viz.load_model("toy-induction", device="cpu")
    top = mha_viz.edge_attribution(toy, prediction.INDUCTION.clean, prediction.INDUCTION.corrupted, method="eap").top(9)
    assert [t.split(" — ")[0] for t in _edge_markers(graph)["hovertext"]] == [
        f"{s} → {r}" for s, r in zip(top["sender"], top["receiver"])]


def test_an_old_link_to_the_prediction_page_naming_a_circuit_opens_the_circuits_page_and_finds_it():
    """Before the circuit had a page of its own, a link to *Heads behind a prediction* carried it (``circuit``); that
    link now opens *Circuit behind a prediction* and finds the circuit there. A link carrying only the pair, which
    both pages share, stays where it opens."""
    pair = {"model": "toy-induction", "text": prediction.INDUCTION.clean, "corrupted": prediction.INDUCTION.corrupted}
    at = app_test()
    at.query_params.update({**pair, "circuit": "eap"})
    at._page_hash = calc_hash("prediction")  # noqa: SLF001 - what a browser's /prediction resolves to
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.title[0].value == HEADINGS["circuit"]
    assert titled(at, "The top") is not None  # found on opening, as the link asked
    shared = app_test()
    shared.query_params.update(pair)
    shared._page_hash = calc_hash("prediction")  # noqa: SLF001
    shared.run()
    assert not shared.exception and shared.title[0].value == HEADINGS["prediction"]


def test_a_family_that_cannot_be_split_is_a_message_and_the_inputs_stay(tmp_path):
    """A random OLMo 2 (its heads write through one norm over all of them): the circuit is refused with the reason
    before its button, and the texts and the estimate chosen stay."""
    from transformers import Olmo2Config, Olmo2ForCausalLM

    from mha_viz.ui.shell.sidebar import OTHER
    from tests.helpers import byte_bpe_tokenizer

    tok = byte_bpe_tokenizer()
    Olmo2ForCausalLM(Olmo2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 max_position_embeddings=128)).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    clean, corrupted = "the cat sat on the mat and the cat", "the cat sat on the mat and the dog"
    assert len(tok(clean)["input_ids"]) == len(tok(corrupted)["input_ids"])
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(OTHER).run()
    at.text_input(key=keys.MODEL_OTHER).input(str(tmp_path)).run()
    at.text_area(key=keys.TEXT).input(clean).run()
    open_page(at, "circuit")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(corrupted).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.radio(key=circuit_keys.CIRC_METHOD).set_value("eap").run()
    assert not at.exception
    # said before the button (the circuit's plan), not after the work: no button to press
    assert circuit_keys.CIRC_GO not in [b.key for b in at.button]
    message = shown(" ".join(w.value for w in at.warning))
    assert "cannot be split" in message and "one norm over all of them" in message
    assert at.text_area(key=keys.TEXT).value == clean
    assert at.text_area(key=shared_controls.PRED_CORRUPTED).value == corrupted
    assert at.radio(key=circuit_keys.CIRC_METHOD).value == "eap"
    assert not any(chart_title(c).startswith("The top") for c in charts(at))
