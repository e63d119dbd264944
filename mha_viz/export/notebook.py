"""Any view of the app as a Jupyter notebook (`view_notebook`): the cells load the same model with the
same options, run the same text, compute what the page computed and draw the same figures with
`mha_viz.figures`, through the public API only. Nothing is installed; the bundled models run offline.

The notebook is nbformat 4 JSON, written here without nbformat (the app does not need it installed).
User text only ever enters a code cell through `notebook_view.literal` and a Markdown cell through
`notebook_view.markdown_text`."""

from __future__ import annotations

import json

from mha_viz import catalogue
from mha_viz.export.notebook_view import Cell, NotebookView, literal, main_figure, markdown_text
from mha_viz.package_version import version

KERNEL = {"display_name": "Python 3", "language": "python", "name": "python3"}


def _heading(v: NotebookView) -> str:
    hidden = " and ".join({"special": "the special tokens", "first": "the first token",
                           "template": "the chat template's tokens"}.get(h, h) for h in v.hide)
    lines = [
        f"# {markdown_text(v.title or v.page)}: {markdown_text(v.model)}",
        "",
        f"Made by **mha-viz {markdown_text(version())}** from the app's *{markdown_text(v.title or v.page)}* page. "
        "Run every cell from the top: it uses the public API of the installed `mha_viz` and installs nothing "
        "(the bundled models run offline; a hub id needs the internet once).",
        "",
        f"- Model: `{v.model.replace('`', '')}`" + (" (as given: a hub id or a folder)" if "/" in v.model else ""),
        f"- Precision: {markdown_text(v.dtype)}; compute with our MHA: {'yes' if v.local_attention else 'no'}",
        f"- Token limit: {int(v.max_tokens)}" + (f"; layers captured: {', '.join(map(str, v.layers))}"
                                                  if v.layers is not None else ""),
        f"- Hide tokens: {hidden or 'none'}; show attention as: {'contributions' if v.contributions else 'weights'}",
        f"- Layer row {int(v.layer)}, head {int(v.head)}",
    ]
    return "\n".join(lines)


def _setup() -> str:
    return """import numpy as np
import pandas as pd

import mha_viz
from mha_viz import figures
from mha_viz.interventions import attribution

figures.notebook()  # plotly.js from the installed package: the figures draw offline"""


def _load(v: NotebookView) -> str:
    load = f"""MODEL = {literal(v.model)}  # as given in the app: a bundled name, a hub id or a folder
CAP = {literal(int(v.max_tokens))}  # the sidebar's *Token limit*
model = mha_viz.load_model(MODEL, device={literal(v.device)}, dtype={literal(v.dtype)},
                           local_attention={literal(bool(v.local_attention))})"""
    if v.chat is None:
        return f"TEXT = {literal(v.text)}\n" + load
    user, system, reply = v.chat
    return load + f"""
# a chat: its messages rendered with the model's own chat template, each token's role told
from mha_viz.text.chat import Chat, roles
chat = roles(model, Chat(user={literal(user)}, system={literal(system)}, assistant={literal(reply)}))
TEXT = chat.text"""


def _run(v: NotebookView) -> str:
    layers = "" if v.layers is None else f", layers={literal([int(x) for x in v.layers])}"
    lines = [f"run = mha_viz.analyze(model, TEXT, max_tokens=CAP{layers})",
             "full_run = run  # every token, before *Hide tokens*"]
    if v.hide:
        lines += [
            "# *Hide tokens*: dropped from both axes, each row renormalised; nothing is hidden when no token, or "
            "every token, matches",
            f"mask = mha_viz.capture.hide_mask(run, special={literal('special' in v.hide)}, "
            f"first={literal('first' in v.hide)})",
            *(["mask |= chat.aligned(run)[1]  # the chat template's own tokens"]
              if "template" in v.hide and v.chat is not None else []),
            "if mask.any() and not mask.all():",
            "    run = run.drop_tokens(mask)",
        ]
    lines.append("weights_run = run  # the weights, before *Show attention as*")
    if v.contributions:
        lines += ["# *Show attention as: contributions* (a model whose value path cannot be read keeps its weights)",
                  "if run.value_norms is not None:",
                  "    run = attribution.as_contributions(run)"]
    lines += [f"LAYER, HEAD = {literal(int(v.layer))}, {literal(int(v.head))}  "
              "# a row of the run (the model's layer run.layer_ids[LAYER]) and a head",
              "print(f\"{run.model_name}: {run.num_layers} layers × {run.num_heads} heads, {run.n} tokens\")"]
    return "\n".join(lines)


def _cell(i: int, kind: str, source: str) -> dict:
    cell = {"cell_type": kind, "id": f"cell-{i}", "metadata": {}, "source": source}
    if kind == "code":
        cell |= {"execution_count": None, "outputs": []}
    return cell


def page_cells(view: NotebookView) -> list[Cell]:
    """What `view`'s page computed and drew, as the recipe of its feature (`catalogue.Feature.notebook`) writes
    it; a page with no recipe, or none known, gets the model view's grid."""
    try:
        recipe = catalogue.feature(view.page).notebook
    except KeyError:
        recipe = None
    return (recipe or main_figure(view.title or view.page, "figures.model_grid(run)"))(view)


def cells(view: NotebookView) -> list[Cell]:
    """(kind, source) of every cell of the view's notebook, in order."""
    return [("markdown", _heading(view)), ("code", _setup()), ("markdown", "## The model and the run"),
            ("code", _load(view)), ("code", _run(view)), *page_cells(view)]


def view_notebook(view: NotebookView) -> bytes:
    """The notebook (nbformat 4 JSON, UTF-8) that reproduces `view`: its first cell says which mha-viz made
    it and what the view is; then the model and the run; then what the page computed and drew
    (a feature whose record says `exact`: every figure of its page, the same arrays; the other pages:
    their main figure from the same run)."""
    nb = {"cells": [_cell(i, kind, source) for i, (kind, source) in enumerate(cells(view))],
          "metadata": {"kernelspec": KERNEL, "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    return (json.dumps(nb, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
