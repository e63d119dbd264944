"""One head's attention, its links over the whole text and *Why here?*, as notebook cells. The page's notebook
recipe (`mha_viz.view_notebook`): the cells after the model's load and its run, which have `model`, `TEXT`,
`CAP`, `run`, `LAYER` and `HEAD`."""

from __future__ import annotations

from mha_viz.export.notebook_view import Cell, NotebookView, code, literal, markdown_text, md

LEVELS = {"every token": "tokens", "a token window": "tokens", "all tokens, in blocks": "blocks", "words": "words",
          "tokens": "tokens", "blocks": "blocks"}


def cells(v: NotebookView) -> list[Cell]:
    detail = v.option("detail", "every token")
    level = LEVELS.get(detail, "tokens")
    window = v.option("window") if detail == "a token window" else None
    cells = [md("## Head view\n\nOne head: queries down, keys across; each row sums to 1.")]
    if detail not in LEVELS:
        cells.append(md(f"The page showed *{markdown_text(detail)}*; the notebook draws every token."))
    args = f", level={literal(level)}, rescale={literal(bool(v.option('rescale', False)))}"
    if window is not None:
        args += f", window={literal(tuple(int(x) for x in window))}"
    if v.chat is not None:  # each token's role along both axes, as the page draws them
        args += ", chat=chat"
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
    """*Why here?*: one score (or the whole head's) split into what wrote the query × what wrote the key, when the
    page drew it (a box built only while open)."""
    if not v.option("why"):
        return []
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
