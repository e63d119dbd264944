"""What each page of the app computes and draws, as notebook cells: `PAGES[page id](view)` gives the cells
that follow the model's load and its run (`notebook.view_notebook`), with the public API only. Each
page's cells compute what the page computed from the view's options and draw its figures in the order
the page draws them. The notebook has `model`, `TEXT`, `CAP` (the token limit) and `run` (the run as the
views draw it: *Hide tokens* and *Show attention as* applied) by then, and `LAYER`, `HEAD`."""

from __future__ import annotations

from typing import Callable

from mha_viz.export.notebook_view import NotebookView, literal, markdown_text

Cell = tuple[str, str]  # ("markdown" | "code", source)


def md(text: str) -> Cell:
    return ("markdown", text)


def code(text: str) -> Cell:
    return ("code", text.strip("\n"))


LEVELS = {"every token": "tokens", "a token window": "tokens", "all tokens, in blocks": "blocks", "words": "words",
          "tokens": "tokens", "blocks": "blocks"}


def head_view(v: NotebookView) -> list[Cell]:
    detail = v.option("detail", "every token")
    level = LEVELS.get(detail, "tokens")
    window = v.option("window") if detail == "a token window" else None
    cells = [md("## Head view\n\nOne head: queries down, keys across; each row sums to 1.")]
    if detail not in LEVELS:
        cells.append(md(f"The page showed *{markdown_text(detail)}*; the notebook draws every token."))
    args = f", level={literal(level)}, rescale={literal(bool(v.option('rescale', False)))}"
    if window is not None:
        args += f", window={literal(tuple(int(x) for x in window))}"
    cells.append(code(f"figures.head(run, LAYER, HEAD{args})"))
    cells.append(code("""
a = run.head(LAYER, HEAD)
top = a.argmax(axis=1)  # the strongest key of each query
pd.DataFrame({"query": run.tokens, "attends most to": [run.tokens[j] for j in top],
              "weight": [round(float(a[i, j]), 4) for i, j in enumerate(top)]})"""))
    return cells + _links(v) + _why_here(v)


def _links(v: NotebookView) -> list[Cell]:
    """The *Links* section: the token strip, how far the links reach and one query's exact row, as the page
    drew them (its strip's start, its query, the keys its row showed)."""
    if v.option("links_query") is None:  # the page drew no links section
        return []
    cells = [md("### Links over the whole text\n\nEach query's heaviest keys (a long run's from its scan), how "
                "far they reach, and one query's exact row over every key."),
             code(f"figures.links_strip(run, LAYER, HEAD, {literal(int(v.option('links_start', 0)))})"),
             code("figures.link_distances(run, LAYER, HEAD)")]
    shown = v.option("links_keys")
    if shown is not None:
        cells.append(code(f"figures.exact_row(run, LAYER, HEAD, {literal(int(v.option('links_query')))}, "
                          f"keys={literal(tuple(int(k) for k in shown))})"))
    return cells


def _why_here(v: NotebookView) -> list[Cell]:
    """*Why here?*: one score (or the whole head's) split into what wrote the query × what wrote the key."""
    second = v.option("second")
    query, key = v.option("query"), v.option("key")
    if v.option("whole"):
        split = "t = mha_viz.circuits.qk_pattern_terms(model, TEXT, run.layer_ids[LAYER], HEAD, max_tokens=CAP)"
    else:
        split = (f"QUERY, KEY = {literal(query) if query is not None else 'full_run.n - 1'}, "
                 f"{literal(key) if key is not None else 0}  # positions in the text (every token)\n"
                 "t = mha_viz.circuits.qk_terms(model, TEXT, run.layer_ids[LAYER], HEAD, QUERY, KEY, max_tokens=CAP)")
        if second is not None and second >= 0:
            split += (f"\nt = t.minus(mha_viz.circuits.qk_terms(model, TEXT, run.layer_ids[LAYER], HEAD, QUERY, "
                      f"{literal(second)}, max_tokens=CAP))  # why this key and not that one")
    return [md("### Why here?\n\nA score q·k splits into terms: what wrote the query × what wrote the key."),
            code(f"""
try:
    {split.replace(chr(10), chr(10) + '    ')}
except mha_viz.InputError as exc:  # a family whose scores cannot be split: the page says so too
    print(exc)
else:
    print(f"score {{t.score:+.4f}}; the terms sum to {{t.terms.sum():+.4f}} (relative error {{t.error:.1e}})")
    figures.score_terms(t).show()
    figures.score_parts(t).show()""")]


def model_view(v: NotebookView) -> list[Cell]:
    return [
        md("## Model view\n\nEvery head at once: rows are layers, columns heads; each thumbnail is one head's "
           "attention (queries down, keys across)."),
        code(f"figures.model_grid(run, rescale={literal(bool(v.option('rescale', True)))})"),
        code("""
if run.lens and weights_run is not run:  # contributions: how much they change each head's picture
    js = attribution.lens_divergence(weights_run, run)
    figures.grid(js, title="JS divergence (base 2) between weights and contributions, mean over queries",
                 layer_ids=run.layer_ids).show()
if run.hidden is not None:  # tokens hidden: how much attention each head gave them
    figures.grid(run.hidden.mass, title="Attention to the hidden tokens, every head",
                 layer_ids=run.layer_ids).show()"""),
    ]


def head_metrics(v: NotebookView) -> list[Cell]:
    metric = v.option("metric", "entropy")
    copying = ("\nif weights is not None:  # the copying measure: each head's copying score (a decoder's unembedding)"
               "\n    weights = {**weights, \"copying\": torch.as_tensor(mha_viz.circuits.copying_scores(model))}"
               if metric == "copying" else "")
    imports = "import torch\n\n" if copying else ""
    return [
        md("## Head metrics\n\nEvery head's measures (`mha_viz.head_table`), one as a layers × heads grid."),
        code(f"""
{imports}weights = model.head_weights() if model.has_head_outputs else None  # for the output-norm measures{copying}
table = mha_viz.head_table(run, weights)
METRIC = {literal(metric)}
figures.metric_grid(run, METRIC, table=table)"""),
        md("Every head's type (its pattern class), and the table."),
        code("figures.head_types(run, table=table)"),
        md("Every head on two measures, coloured by a third (`\"layer\"`, `\"pattern\"` or a measure)."),
        code(f"figures.head_scatter(table, {literal(v.option('scatter_x', 'entropy'))}, "
             f"{literal(v.option('scatter_y', 'prev_token_score'))}, {literal(v.option('scatter_colour', 'layer'))})"),
        code("table"),
    ]


def ablation(v: NotebookView) -> list[Cell]:
    keep = v.option("keep")
    cells = [md("## Switch heads off\n\nHeads switched off have their output z multiplied by ξ = 0 before W_O "
                "(or replaced by their mean output on this text)."),
             code(f"""
import numpy as np
from mha_viz.interventions import ablation, ablation_outcome
from mha_viz.text import loss_inputs

KEEP = np.array({literal(keep) if keep is not None else 'np.ones((model.num_layers, model.num_heads)).tolist()'},
                dtype=bool)  # True: the head is on (layers × heads)
MEAN_ABLATION = {literal(bool(v.option('mean_ablation', False)))}
kind = loss_inputs.loss_kind(model)
print(f"{{int((~KEEP).sum())}} of {{KEEP.size}} heads off; measured: {{loss_inputs.LOSS_LABELS[kind]}}")""")]
    if v.option("kind") == "embedding":
        cells.append(code(f"""
OTHER = {literal(v.option('other', ''))}  # a second sentence to compare with
pairs = [(ablation_outcome.unablated(model, t, max_tokens=CAP).embedding,
          ablation_outcome.ablated(model, t, KEEP, mean_ablation=MEAN_ABLATION, max_tokens=CAP).embedding)
         for t in [TEXT] + ([OTHER] if OTHER.strip() else [])]
ablation_outcome.compare_embeddings(*pairs)"""))
    else:
        cells.append(code("""
base = ablation_outcome.unablated(model, TEXT, max_tokens=CAP)
off = base if KEEP.all() else ablation_outcome.ablated(model, TEXT, KEEP, mean_ablation=MEAN_ABLATION, base=base,
                                                      max_tokens=CAP)
print(f"loss {off.loss:.4f} ({off.loss - base.loss:+.4f} with the heads off)")
for p in ablation_outcome.prediction_pairs(base, off):
    print(f"Top 5, {p.position}:")
    print(pd.DataFrame({"every head on": [f"{t}  ({q:.1%})" for t, q in p.before],
                        "with the heads off": [f"{t}  ({q:.1%})" for t, q in p.after]}).to_string(index=False))"""))
    scored = v.option("importance")
    if scored is None:
        return cells
    source = "TEXT" if scored == "this text" else "ablation.SAMPLE_PARAGRAPH"
    cells += [md("### Which heads matter"), code(f"""
SCORED = {source}
imp = ablation.head_importance(model, SCORED, max_tokens=CAP)
figures.grid(imp, title="Head importance (per-layer L2-normalised)")""")]
    if v.option("pruning"):
        cells.append(code("""
fractions = ablation.PRUNE_FRACTIONS
orders = [np.argsort(imp.ravel())] + [np.random.default_rng(seed).permutation(imp.size) for seed in range(5)]
curves = ablation.pruning_curves(model, SCORED, orders, fractions, mean_ablation=MEAN_ABLATION, max_tokens=CAP)
curve = pd.DataFrame({"fraction of heads off": fractions, "importance order": curves[0],
                      "random mean": curves[1:].mean(0), "random sd": curves[1:].std(0)})
figures.pruning_curve(curve, loss_label=loss_inputs.LOSS_LABELS[kind].split(" (")[0])"""))
    return cells


PART_STEPS = {"1–2 · Input, Q, K, V": ("X", "Q", "K", "V"), "3–6 · Scores to probabilities":
              ("scores", "scaled", "masked", "probs"), "7–9 · Output": ("z", "concat", "output")}


def teaching(v: NotebookView) -> list[Cell]:
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


def prediction(v: NotebookView) -> list[Cell]:
    cells = [md("## Heads behind a prediction\n\nA clean text (the run's) and a corrupted one: each head's direct "
                "logit attribution and the share of the gap between the runs its clean output restores.")]
    if v.option("corrupted") is None:
        return cells + [md("The page showed no result: its model is an encoder (no next-token prediction to "
                           "explain) or its heads' outputs cannot be read, or *Find the heads* had not run. With a "
                           "decoder, set a corrupted text and call `prediction.explain(model, TEXT, corrupted)`.")]
    return cells + _prediction_cells(v, v.option("corrupted"))


def _prediction_cells(v: NotebookView, corrupted: str) -> list[Cell]:
    answer, wrong = v.option("answer") or None, v.option("wrong") or None
    patched = "\ne = prediction.patch(model, e, TEXT, CORRUPTED, max_tokens=CAP)  # every head patched for real" \
        if v.option("patched") else ""
    pos_layer = v.option("position_layer")
    return [code(f"""
from mha_viz.interventions import prediction

CORRUPTED = {literal(corrupted)}
ANSWER, WRONG = {literal(answer)}, {literal(wrong)}  # None: the clean run's and the corrupted run's predictions
e = prediction.explain(model, TEXT, CORRUPTED, ANSWER, WRONG, max_tokens=CAP){patched}
print(f"m = logit({{e.answer_text!r}}) - logit({{e.wrong_text!r}}) at the last token: {{e.m_clean:+.2f}} clean, "
      f"{{e.m_corrupted:+.2f}} corrupted")"""),
            code("""
# as the page: the estimate beside real patching (one colour scale) once both exist, then direct logit
# attribution and the scatter of the two; before real patching, direct logit attribution beside the estimate
if e.estimate is not None and e.patching is not None:
    grids = [figures.estimate_grid(e), figures.restored_grid(e), figures.dla_grid(e), figures.estimate_scatter(e)]
else:
    grids = [figures.dla_grid(e)]
    if e.estimate is not None:
        grids.append(figures.estimate_grid(e))
    if e.patching is not None:
        grids.append(figures.restored_grid(e))
for fig in grids:
    fig.show()"""),
            md("### Where each head reads it: the estimate by position"),
            code(f"""
POSITION_LAYER = {literal(pos_layer) if pos_layer is not None else 'len(e.clean.layer_ids) - 1'}  # a row of e.clean
if e.estimate is not None:
    figures.position_grid(e, POSITION_LAYER).show()"""),
            md("### One head: its attention in both runs, what it moves, what it promotes, where it is read"),
            code("""
figures.head(e.clean, LAYER, HEAD, level="tokens").show()
figures.head(e.corrupted, LAYER, HEAD, level="tokens").show()
if e.clean.value_norms is not None:
    figures.head(attribution.as_contributions(e.clean), LAYER, HEAD, level="tokens").show()
promoted, suppressed = attribution.head_tokens(model, TEXT, LAYER, HEAD, k=8, max_tokens=CAP)
figures.head_tokens(promoted, suppressed, LAYER, HEAD).show()
by_position = attribution.patch_positions(model, TEXT, CORRUPTED, LAYER, HEAD, e.dla.target, e.dla.wrong,
                                          max_tokens=CAP)
figures.patched_positions(by_position, e, LAYER, HEAD).show()""")]


# --- the other pages: their main figure, from the same run (not every option of the page) --------------

def _simple(title: str, source: str) -> Callable[[NotebookView], list[Cell]]:
    def cells(v: NotebookView) -> list[Cell]:
        return [md(f"## {title}\n\nThe page's main figure from the same run; the page's own options beyond the "
                   "head are not carried over."), code(source)]
    return cells


def corpus(v: NotebookView) -> list[Cell]:
    name = v.option("file")
    where = (md(f"Put the corpus file **{markdown_text(name)}** in the same folder as this notebook (the app read "
                "it as an upload), or change `CORPUS` to its path.") if name else
             md("`CORPUS = \"sample\"`: the bundled sample of documents."))
    return [md("## Corpus\n\nEvery head's measures over many documents (`mha_viz.head_statistics`)."), where, code(f"""
CORPUS = {literal(name or 'sample')}
stats = mha_viz.head_statistics(model, CORPUS, max_tokens=CAP)
stats.table""")]


PAGES: dict[str, Callable[[NotebookView], list[Cell]]] = {
    "head_view": head_view, "model_view": model_view, "head_metrics": head_metrics, "ablation": ablation,
    "teaching": teaching, "prediction": prediction, "corpus": corpus,
    "focus": _simple("Token focus", "figures.token_focus(run, 0)  # the first token; the page's token may differ"),
    "lines": _simple("Line view", "figures.lines(run, LAYER, heads=[HEAD])"),
    "compare_heads": _simple("Compare heads", "figures.head(run, LAYER, HEAD)"),
    "across_layers": _simple("Across layers", "figures.rollout(run)"),
    "similarity": _simple("Head similarity", "figures.similarity(run, \"js\")"),
    "composition": _simple("Head composition", "scores = mha_viz.circuits.composition_scores(model)  # q, k, v\n"
                                               "figures.grid(mha_viz.circuits.copying_scores(model), "
                                               "title=\"Copying score of each head\")"),
    "examples": _simple("Head examples", "ex = mha_viz.corpus.head_examples(model, \"sample\", max_tokens=CAP)\n"
                                         "ex.top(LAYER, HEAD)"),
    "compare": _simple("Compare texts or models", "figures.model_grid(run)  # the first run; the page's second "
                                                  "text or model is not carried over"),
    "generate": _simple("Generate", "gen = mha_viz.generate(model, TEXT, max_new_tokens=32)\n"
                                    "figures.generation_step(gen, -1, layer=LAYER, head=HEAD)"),
    "qk": _simple("Queries and keys", "t = mha_viz.circuits.qk_terms(model, TEXT, run.layer_ids[LAYER], HEAD, "
                                      "run.n - 1, 0, max_tokens=CAP)\nt.score, t.error"),
    "model_facts": _simple("Model facts", "model.facts()"),
}
EXACT = ("head_view", "model_view", "head_metrics", "ablation", "teaching", "prediction")  # every figure, as drawn


def cells_for(view: NotebookView) -> list[Cell]:
    """The page's cells; a page with no recipe gets the model view's grid."""
    return PAGES.get(view.page, _simple(view.title or view.page, "figures.model_grid(run)"))(view)
