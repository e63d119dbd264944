"""Notebooks as the app downloads them, run and read back: `execute` runs one with nbclient in a kernel
of this environment (offline), `figures_of` reads every Plotly figure it drew from its outputs (the
JSON inside the HTML that `mha_viz.figures.notebook()`'s renderer writes), `same_figures` compares them
with a page's charts: the same traces, the same arrays, the same titles."""

from __future__ import annotations

import json
import os
import re

import nbformat
import numpy as np
import torch
from nbclient import NotebookClient

from tests.helpers import decode

NEW_PLOT = re.compile(r"Plotly\.newPlot\(\s*")
KERNEL_SECONDS = 600  # one cell at most (a model's first load, patching every head)


def execute(data: bytes, where) -> nbformat.NotebookNode:
    """The notebook `data` (.ipynb bytes) after running every cell in `where` (a folder) with the
    `python3` kernel of this environment and the hub offline; raises on the first cell that fails."""
    nb = nbformat.reads(data.decode("utf-8"), as_version=4)
    nbformat.validate(nb)
    os.environ["HF_HUB_OFFLINE"] = "1"  # the kernel inherits it: nothing reaches the hub
    # on as many PyTorch threads as this process (one in `make test`, tests/conftest.py): float32 sums split the
    # same way, so the kernel's figures equal the app's drawn here (a gradient's importance differed by 2e-3 on
    # one thread against two)
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads())}
    NotebookClient(nb, timeout=KERNEL_SECONDS, kernel_name="python3",
                   resources={"metadata": {"path": str(where)}}).execute(env=env)
    return nb


def execute_together(datas: list[bytes], folders: list) -> list[nbformat.NotebookNode]:
    """The notebooks `datas` after running them one after the other in one kernel (`execute`), each in its
    folder of `folders` with the kernel's names cleared before it (`%reset -f`): no notebook can use a name
    another defined, while the kernel's start, its imports and the models they load are paid once."""
    notebooks = [nbformat.reads(data.decode("utf-8"), as_version=4) for data in datas]
    joined, spans = nbformat.v4.new_notebook(), []
    for nb, folder in zip(notebooks, folders):
        nbformat.validate(nb)
        joined.cells.append(nbformat.v4.new_code_cell(f"%reset -f\nimport os\nos.chdir({str(folder)!r})"))
        spans.append((len(joined.cells), len(joined.cells) + len(nb.cells)))
        joined.cells += nb.cells
    ran = execute(nbformat.writes(joined).encode("utf-8"), folders[0])
    for nb, (start, stop) in zip(notebooks, spans):
        nb.cells = ran.cells[start:stop]
    return notebooks


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in " \t\r\n,":
        i += 1
    return i


def _from_html(html: str) -> list[dict]:
    """The figures of one output: `Plotly.newPlot("id", data, layout, config)` calls, read as JSON."""
    found, decoder = [], json.JSONDecoder()
    for match in NEW_PLOT.finditer(html):
        try:
            div, i = decoder.raw_decode(html, match.end())
            data, i = decoder.raw_decode(html, _skip(html, i))
            layout, i = decoder.raw_decode(html, _skip(html, i))
        except json.JSONDecodeError:  # plotly.js's own source, in the setup cell's output
            continue
        if isinstance(div, str) and isinstance(data, list):
            found.append({"data": decode(data), "layout": decode(layout)})
    return found


def figures_of(nb: nbformat.NotebookNode) -> list[dict]:
    """Every figure the executed notebook drew, in order (the setup cell's plotly.js left out)."""
    figs = []
    for cell in nb.cells[2:]:
        for out in cell.get("outputs", []):
            html = out.get("data", {}).get("text/html")
            if html:
                figs += _from_html("".join(html) if isinstance(html, list) else html)
    return figs


def _clicks_removed(fig: dict) -> list[dict]:
    """A figure's traces without the page's click targets (the transparent markers a click on a
    cell selects: they carry the same values as the heatmap under them)."""
    return [t for t in fig["data"] if "<extra>click" not in str(t.get("hovertemplate", ""))]


def _same(a, b, where: str) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), f"{where}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), f"{where}: {len(a)} against {len(b)} values"
        try:
            x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
        except (TypeError, ValueError):
            for i, (u, v) in enumerate(zip(a, b)):
                _same(u, v, f"{where}[{i}]")
            return
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=where)
    elif isinstance(a, float) or isinstance(b, float):
        np.testing.assert_allclose(float(a), float(b), rtol=1e-5, atol=1e-6, err_msg=where)
    else:
        assert a == b, f"{where}: {str(a)[:120]!r} != {str(b)[:120]!r}"


def title(fig: dict) -> str:
    t = fig["layout"].get("title", "")
    return t.get("text", "") if isinstance(t, dict) else str(t)


def same_figures(page: list[dict], notebook: list[dict], what: str) -> None:
    """The notebook drew the page's figures, in its order: each trace's every field (its arrays
    compared to float32 precision) and each title."""
    titles = [title(f) for f in notebook], [title(f) for f in page]
    assert titles[0] == titles[1], f"{what}: the notebook's {titles[0]} against the page's {titles[1]}"
    for i, (p, n) in enumerate(zip(page, notebook)):
        _same(_clicks_removed(p), _clicks_removed(n), f"{what}, figure {i} ({title(p)[:60]})")
