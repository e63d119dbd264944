"""examples/quickstart.ipynb run in a fresh kernel (`executed`) and what every run of it must show
(`shows_its_figures`): test_notebook.py runs it from the repository root, test_installed_package.py from the
installed wheel."""

from __future__ import annotations

import re

import nbformat
from nbclient import NotebookClient
from plotly.offline import get_plotlyjs

from tests.helpers import ROOT

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
FIGURE = "Plotly.newPlot("
OUTSIDE = re.compile(r"""\bsrc\s*=\s*["']?\s*(https?:)?//""", re.IGNORECASE)


def _html(cell) -> list[str]:
    return [out["data"]["text/html"] for out in cell.get("outputs", [])
            if "text/html" in out.get("data", {})]


def executed(folder, **kernel) -> tuple[str, list]:
    """The notebook run in a fresh kernel started in `folder` (`kernel`: how it starts, e.g. its env),
    with a first cell that prints where `mha_viz` came from: (that path, the notebook's code cells).
    A cell that raises fails here."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import mha_viz; print(mha_viz.__file__)"))
    start_in = {"metadata": {"path": str(folder)}}
    NotebookClient(nb, timeout=600, kernel_name="python3", resources=start_in).execute(**kernel)
    where, *code = [c for c in nb.cells if c.cell_type == "code"]
    return where.outputs[0]["text"].strip(), code


def shows_its_figures(code: list) -> None:
    """No cell failed, plotly.js is in the setup cell's output, every cell that ends on a figure (at least 9) drew
    it, and no output loads anything from outside."""
    assert all(out.get("output_type") != "error" for c in code for out in c.outputs)
    setup, *rest = code
    assert any(get_plotlyjs()[:200] in h for h in _html(setup))  # plotly.js, once, in the page
    drawn = [c for c in rest if any(FIGURE in h for h in _html(c))]
    figure_cells = [c for c in rest if c.source.strip().splitlines()[-1].startswith("figures.")]
    assert len(figure_cells) >= 9 and drawn == figure_cells  # every cell ending on a figure drew it
    for cell in code:
        for h in _html(cell):
            assert not OUTSIDE.search(h), cell.source
