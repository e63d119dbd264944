"""examples/quickstart.ipynb cannot rot: it is committed without outputs, and it runs end to end in
a fresh kernel (minilm and smollm2, the public figures), from the repository root and from the
installed wheel in a folder of its own, every cell without an error, its figures drawn by the
plotly.js of the setup cell and nothing from outside."""

from __future__ import annotations

import os
import re

import nbformat
import pytest
from nbclient import NotebookClient
from plotly.offline import get_plotlyjs

from tests.helpers import ROOT

NOTEBOOK = ROOT / "examples" / "quickstart.ipynb"
FIGURE = "Plotly.newPlot("
OUTSIDE = re.compile(r"""\bsrc\s*=\s*["']?\s*(https?:)?//""", re.IGNORECASE)


def _html(cell) -> list[str]:
    return [out["data"]["text/html"] for out in cell.get("outputs", [])
            if "text/html" in out.get("data", {})]


def test_the_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def _executed(folder, **kernel) -> tuple[str, list]:
    """The notebook run in a fresh kernel started in `folder` (`kernel`: how it starts, e.g. its env),
    with a first cell that prints where `mha_viz` came from: (that path, the notebook's code cells).
    A cell that raises fails here."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell("import mha_viz; print(mha_viz.__file__)"))
    start_in = {"metadata": {"path": str(folder)}}
    NotebookClient(nb, timeout=600, kernel_name="python3", resources=start_in).execute(**kernel)
    where, *code = [c for c in nb.cells if c.cell_type == "code"]
    return where.outputs[0]["text"].strip(), code


def _shows_its_figures(code: list) -> None:
    assert all(out.get("output_type") != "error" for c in code for out in c.outputs)
    setup, *rest = code
    assert any(get_plotlyjs()[:200] in h for h in _html(setup))  # plotly.js, once, in the page
    drawn = [c for c in rest if any(FIGURE in h for h in _html(c))]
    figure_cells = [c for c in rest if c.source.strip().splitlines()[-1].startswith("figures.")]
    assert len(figure_cells) >= 9 and drawn == figure_cells  # every cell ending on a figure drew it
    for cell in code:
        for h in _html(cell):
            assert not OUTSIDE.search(h), cell.source


@pytest.mark.model
def test_the_notebook_runs_end_to_end_from_the_repository_root():
    where, code = _executed(ROOT)  # as after cloning: `import mha_viz` finds the checkout
    assert where == str(ROOT / "mha_viz" / "__init__.py")
    _shows_its_figures(code)


@pytest.mark.model
def test_the_notebook_runs_from_the_installed_package(installed, tmp_path):
    _, target = installed  # the wheel of this checkout (tests/models/conftest.py), in a folder of its own
    where, code = _executed(tmp_path, env=dict(os.environ, PYTHONPATH=str(target), HF_HUB_OFFLINE="1"))
    assert where.startswith(str(target))
    _shows_its_figures(code)
