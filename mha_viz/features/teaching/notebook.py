"""One head's computation step by step over the page's window, and the page's demonstrations, as notebook cells. The
page's notebook recipe (`mha_viz.view_notebook`): the cells after the model's load and its run, which have
`model`, `TEXT`, `CAP`, `run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, markdown_text, md

PART_STEPS = {"1–2 · Input, Q, K, V": ("X", "Q", "K", "V"), "3–6 · Scores to probabilities":
              ("scores", "scaled", "masked", "probs"), "7–9 · Output": ("z", "concat", "output")}


def cells(v: NotebookView) -> list[Cell]:
    part = v.option("part", "1–2 · Input, Q, K, V")
    start = int(v.option("start", 0) or 0)
    cells = [md("## Teaching: attention step by step\n\nOne head's computation with the model's own numbers, "
                "over a window of the text's tokens (`teaching.TEACH_TOKENS`); each row's keys outside the "
                "window are one more column, so every softmax is exact."),
             code(f"""
from mha_viz.views import teaching

# every layer's queries, keys, values and input: a long run's own, else one more forward pass
recording = teaching.recording_of(run) or teaching.record(model, TEXT, CAP)
START = {start}  # the window's first token
w = teaching.walkthrough(model, TEXT, run.layer_ids[LAYER], HEAD, recording=recording, start=START)
print(f"Layer {{w.layer}}, head {{w.head}}: tokens {{w.start}}–{{w.start + w.n - 1}} of {{w.total}}")""")]
    if part in PART_STEPS:
        cells.append(md(f"### Steps {markdown_text(part)}"))
        cells.append(code(f"for fig in figures.walkthrough(w, {literal(PART_STEPS[part])}).values():\n    fig.show()"))
        if "probs" in PART_STEPS[part]:
            row = v.option("row")
            cells.append(code(f"ROW = {literal(row) if row is not None else 'min(w.n - 1, w.n // 2)'}"
                              "  # the query row to look at\nfigures.softmax_row(w, ROW if w.n > 1 else 0)"))
    elif part == "What it costs":
        cells.append(code("""
pd.DataFrame([vars(c) for c in teaching.costs(model, run.n)])"""))
        cells.append(code("""
if 1 < model.num_kv_heads < model.num_heads or model.num_kv_heads == 1:
    figures.kv_sharing(model.num_heads, model.num_kv_heads, highlight=HEAD).show()"""))
    else:
        cells += _demonstration(v.option("demo"))
    return cells


def _demonstration(demo: str | None) -> list[Cell]:
    if demo == "Masks":
        return [code("""
maps = {"encoder: bidirectional": teaching.softmax_rows(w.scaled),
        "decoder: causal": teaching.softmax_rows(w.scaled, causal=True)}
for fig in figures.probability_maps(maps, w.tokens).values():
    fig.show()""")]
    if demo == "Why projections":
        return [code("""
maps = {"softmax(X̂ X̂ᵀ/√d), no projections": teaching.self_similarity(w.X, True),
        "this head, with W_Q and W_K": w.probs}
for fig in figures.probability_maps(maps, w.tokens).values():
    fig.show()
names, vecs = teaching.longer_neighbour_example()
maps = {"raw vectors: b looks at c": teaching.self_similarity(vecs, False),
        "normalised: b looks at itself (and c, a tie)": teaching.self_similarity(vecs, True)}
for fig in figures.probability_maps(maps, names).values():
    fig.show()""")]
    if demo == "Why several heads":
        return [code("""
patterns = mha_viz.head_table(run).query("layer == @w.layer")["pattern"].tolist()
att = teaching.layer_probabilities(model, recording, w.layer, w.start)  # (heads, n, n): the window
maps = {"the layer's heads averaged": att.mean(0)} | {f"head {h}: {patterns[h]}": att[h] for h in range(len(att))}
for fig in figures.probability_maps(maps, w.tokens).values():
    fig.show()""")]
    return [md("The page showed no demonstration.")]
