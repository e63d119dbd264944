"""The page *Circuit behind a prediction* in a real browser, on toy-induction's preset: the
circuit found (EAP-IG), a click on an edge's dot path-patches that edge, and the value shown is the one
`path_patch` computes for it."""

from __future__ import annotations

import re

import pytest

import mha_viz
from mha_viz.interventions import prediction

pytestmark = [pytest.mark.e2e, pytest.mark.model]
MAIN = "[data-testid=stMain]"
EDGES = ("el => { const d = el.querySelector('.js-plotly-plot')._fullData; "
         "return [d.length - 1, d[d.length - 1].hovertext]; }")


def _circuit(app, model: str, preset: prediction.Preset, timeout_s: int):
    """The circuit's page on `model` and `preset`: the circuit found; its graph (a locator)."""
    app.choose_model(model)
    app.goto("Circuit behind a prediction")
    app.choose("Preset", preset.name, scope=MAIN)
    app.wait_idle()
    app.click(app.page.locator(MAIN).get_by_role("button", name="Find the circuit", exact=True))
    assert app.wait_until(lambda: app.titled("The top 30 edges (EAP-IG)") is not None, True, timeout_s=timeout_s)
    return app.titled("The top 30 edges (EAP-IG)")


def test_a_click_on_an_edge_patches_it_for_real(shared_app):
    app = shared_app
    graph = _circuit(app, "toy-induction", prediction.INDUCTION, 120)
    graph.scroll_into_view_if_needed()
    curve, labels = graph.evaluate(EDGES)
    index = 1  # the second strongest edge
    sender, receiver = re.match(r"(.+) → (\S+) ", labels[index]).groups()
    x, y = app.point(graph, index, curve=curve)
    app.rerun(lambda: app.page.mouse.click(x, y))
    box = app.page.locator("[data-testid=stAlertContentInfo]").filter(has_text="path-patched for real")
    box.wait_for(timeout=60_000)
    text = box.inner_text()
    assert f"{sender} → {receiver}" in text
    toy = mha_viz.load_model("toy-induction", device="cpu")
    clean, corrupted = prediction.INDUCTION.clean, prediction.INDUCTION.corrupted
    want = mha_viz.circuits.path_patch(toy, clean, corrupted, sender, receiver)
    shown = float(re.search(r"for real ([+−-]\d+\.\d+)", text).group(1).replace("−", "-"))
    assert shown == pytest.approx(want, abs=1e-3)
    assert app.titled("Faithfulness of the top k edges") is not None
    graph.scroll_into_view_if_needed()
    app.shot("circuit")
    app.assert_clean()


# the circuit graph's node labels, and its plot area, in screen pixels [left, top, right, bottom]
LABELS = """el => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    return {plot: box(el.querySelector('.draglayer .nsewdrag')),
            texts: Array.from(el.querySelectorAll('.textpoint text')).filter(t => t.textContent.trim())
                .map(t => [t.textContent, ...box(t)])};
}"""


def test_the_graph_of_smollm2s_ioi_circuit_keeps_its_labels_inside_and_apart(shared_app):
    """SmolLM2's IOI circuit (30 layers, KV heads beside their query heads): at 1280 and 1366 wide, no
    node label is cut by the plot's edge ("embed" read "nbed") and no two labels meet (L19KV0, L20KV0
    and L19H2 overlapped)."""
    app = shared_app
    _circuit(app, "smollm2", prediction.IOI, 300)
    for width in (1280, 1366):
        app.page.set_viewport_size({"width": width, "height": 900})
        app.wait_idle()
        graph = app.titled("The top 30 edges (EAP-IG)")
        graph.scroll_into_view_if_needed()
        found = graph.evaluate(LABELS)
        texts, (left, top, right, bottom) = found["texts"], found["plot"]
        assert {"embed", "logits"} <= {t[0] for t in texts} and len(texts) >= 15, texts
        cut = [t[0] for t in texts if t[1] < left - 1 or t[3] > right + 1 or t[2] < top - 1 or t[4] > bottom + 1]
        assert not cut, f"at {width}: labels cut by the plot's edge: {cut}"
        meet = [(a[0], b[0]) for i, a in enumerate(texts) for b in texts[i + 1:]
                if a[1] < b[3] - 1 and b[1] < a[3] - 1 and a[2] < b[4] - 1 and b[2] < a[4] - 1]
        assert not meet, f"at {width}: labels that meet: {meet}"
    app.assert_clean()


def _random_circuit(seed: int, layers: int = 30, heads: int = 9, kv: int = 3, edges: int = 60):
    """A circuit of SmolLM2's shape: edges from the embedding, heads and MLPs into the next layers' query heads, KV
    heads, MLPs and the logits, scores of either sign."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    senders = ["embed"] + [f"L{la}H{h}" for la in range(layers - 2) for h in range(heads)] + [
        f"L{la} MLP" for la in range(layers - 2)]
    rows = []
    for _ in range(edges):
        sender = senders[rng.integers(len(senders))]
        first = 0 if sender == "embed" else int(sender[1:].split("H")[0].split(" ")[0]) + 1
        at = int(rng.integers(first, min(layers, first + 3)))
        receiver = str(rng.choice([f"L{at}H{rng.integers(heads)}.q", f"L{at}KV{rng.integers(kv)}.k",
                                   f"L{at}KV{rng.integers(kv)}.v", f"L{at} MLP", "logits"]))
        rows.append((sender, receiver, receiver.rpartition(".")[2], float(rng.normal())))
    return pd.DataFrame(rows, columns=["sender", "receiver", "input", "score"]).drop_duplicates(
        ["sender", "receiver"])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_graphs_labels_stay_apart_wherever_it_is_drawn_from_520_to_1200_px(browser, seed):
    """Issue 90: L23KV1 was drawn over L24H4. Labels are placed for a plot narrower than the main area's
    (`circuit_figures.LABELS_AT_PX`): a circuit of SmolLM2's shape drawn by plotly.js in Chromium at figure widths
    from 520 to 1,200 px has no two labels that meet."""
    from mha_viz.drawing.circuit import graph_figure

    fig = graph_figure(_random_circuit(seed), 30, 9, 3)
    page = browser.new_page()
    page.set_viewport_size({"width": 1300, "height": 900})
    try:
        for width in (520, 700, 900, 1200):
            page.set_content(fig.to_html(include_plotlyjs=True, full_html=True, default_width=f"{width}px"))
            page.wait_for_selector(".textpoint text")
            texts = page.evaluate("""() => Array.from(document.querySelectorAll('.textpoint text'))
                .filter(t => t.textContent.trim()).map(t => { const r = t.getBoundingClientRect();
                return [t.textContent, r.left, r.top, r.right, r.bottom]; })""")
            assert len(texts) >= 15, texts
            meet = [(a[0], b[0]) for i, a in enumerate(texts) for b in texts[i + 1:]
                    if a[1] < b[3] - 1 and b[1] < a[3] - 1 and a[2] < b[4] - 1 and b[2] < a[4] - 1]
            assert not meet, f"at {width} px: labels that meet: {meet}"
    finally:
        page.close()
