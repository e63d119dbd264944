"""examples/quickstart.ipynb cannot rot: it is committed without outputs, and it runs end to end in
a fresh kernel (minilm and smollm2, the public figures) from the repository root, every cell without an error, its
figures drawn by the plotly.js of the setup cell and nothing from outside (`notebook_run`). Its run from the
installed wheel in a folder of its own is test_installed_package.py's, which builds the wheel."""

from __future__ import annotations

import nbformat
import pytest

from tests.helpers import ROOT
from tests.models.notebook_run import NOTEBOOK, executed, shows_its_figures


def test_the_notebook_is_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


@pytest.mark.model
def test_the_notebook_runs_end_to_end_from_the_repository_root():
    where, code = executed(ROOT)  # as after cloning: `import mha_viz` finds the checkout
    assert where == str(ROOT / "mha_viz" / "__init__.py")
    shows_its_figures(code)
