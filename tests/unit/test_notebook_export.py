"""A view as a notebook (`mha_viz.view_notebook`), without a model: valid nbformat 4 whose every code
cell parses, any text a user typed (quotes, backslashes, newlines, triple quotes) arriving in the code
exactly, nothing a user typed turning into HTML or Markdown in the prose, and the version that made it
in the first cell. (That each page's notebook runs and draws the page's figures: tests/app.)"""

from __future__ import annotations

import ast
import json

import nbformat
import pytest

import mha_viz
from mha_viz import catalogue
from mha_viz.export import notebook
from mha_viz.export.notebook_view import NotebookView, literal

HOSTILE = 'He said "hi" and \'bye\'\n\\n is not a newline, \\ alone; """ and \'\'\' end nothing {TEXT} $x$ <b>'


def _cells(view) -> list[dict]:
    nb = json.loads(mha_viz.view_notebook(view))
    nbformat.validate(nbformat.from_dict(nb))
    return nb["cells"]


def _assigned(cells: list[dict], name: str):
    """The value the notebook's code gives `name`, read from its source without running it."""
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse(cell["source"])):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return ast.literal_eval(node.value)
    raise AssertionError(f"no {name} in the notebook")


@pytest.mark.parametrize("page", catalogue.ids())
def test_every_pages_cells_parse_and_carry_the_text_exactly(page):
    view = NotebookView(page=page, model="./my models/it's \"here\"", text=HOSTILE, title=f"A <script> {page}",
                                hide=("special", "first"), contributions=True, layers=(0, 1),
                                options={"corrupted": HOSTILE[::-1], "answer": " M\"a'ry", "wrong": "",
                                         "keep": [[True]], "importance": "this text", "pruning": True,
                                         "file": "notes <b>.txt"})
    cells = _cells(view)
    for cell in cells:
        if cell["cell_type"] == "code":
            ast.parse(cell["source"])  # raises on a cell that a quote broke
    assert _assigned(cells, "TEXT") == HOSTILE
    assert _assigned(cells, "MODEL") == "./my models/it's \"here\""
    if page == "prediction":
        assert _assigned(cells, "CORRUPTED") == HOSTILE[::-1]
    prose = "\n".join(c["source"] for c in cells if c["cell_type"] == "markdown")
    assert "<script>" not in prose and "<b>" not in prose and "&lt;script&gt;" in prose


def test_the_first_cell_names_the_version_and_nothing_is_installed():
    cells = _cells(mha_viz.export.NotebookView(page="head_view", model="minilm", text="The cat."))
    assert cells[0]["cell_type"] == "markdown" and f"mha-viz {notebook.version()}" in cells[0]["source"]
    assert notebook.version()[0].isdigit()
    code = "\n".join(c["source"] for c in cells if c["cell_type"] == "code")
    assert "pip" not in code and "!" not in code.replace("!=", "")
    assert "figures.notebook()" in code


def test_literal_round_trips_plain_values_and_refuses_objects():
    values = [HOSTILE, 0, -3, 1.5e-7, True, None, (1,), [[True, False]], {"a": (1, "b")}]
    for value in values:
        assert ast.literal_eval(literal(value)) == value
    with pytest.raises(TypeError):
        literal(object())


@pytest.mark.parametrize("options,make,call", [
    ({"task_source": "greater_than", "task_size": 7, "task_seed": 3, "task_method": "patch"},
     "prompts = generators.make('greater_than', 7, seed=3, tokenizer=model.tokenizer)",
     "mha_viz.patch_heads(model, prompts"),
    ({"task_file": "my 'pairs'.jsonl", "task_method": "dla"},
     "prompts = PromptSet.from_file(\"my 'pairs'.jsonl\")", "mha_viz.direct_logit(model, prompts"),
])
def test_the_task_page_makes_the_same_set_and_runs_the_same_method(options, make, call):
    view = NotebookView(page="task", model="smollm2", text="A b", options=options)
    cells = _cells(view)
    source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    assert make in source and call in source and "figures.task_grid(result, layer_ids=model.layer_ids)" in source
    for cell in cells:
        if cell["cell_type"] == "code":
            ast.parse("".join(cell["source"]))


def test_the_circuit_page_finds_the_same_circuit_on_the_same_pair():
    view = NotebookView(page="circuit", model="toy-induction", text="a b", options={
        "corrupted": "a c", "answer": " b", "wrong": "", "circuit": "eap", "k": 9})
    source = "\n".join("".join(c["source"]) for c in _cells(view) if c["cell_type"] == "code")
    assert "CORRUPTED = 'a c'" in source and "ANSWER, WRONG = ' b', None" in source
    assert "mha_viz.edge_attribution(model, TEXT, CORRUPTED, ANSWER, WRONG, method='eap', max_tokens=CAP)" in source
    assert "K = 9" in source and "mha_viz.circuit(model, TEXT, CORRUPTED, top" in source
    for cell in _cells(view):
        if cell["cell_type"] == "code":
            ast.parse("".join(cell["source"]))
    bare = NotebookView(page="circuit", model="toy-induction", text="a b", options={})
    assert "edge_attribution" not in "\n".join("".join(c["source"]) for c in _cells(bare) if c["cell_type"] == "code")
