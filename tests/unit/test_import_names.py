"""Every first-party import name is a folder of that name, and each module has one name only:
`mha_viz` is mha_viz/, `mha_viz_models` is models/mha_viz_models/, and models/ itself is refused as
a package (it would load the same files again as other classes)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import mha_viz
import mha_viz_models

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "app.py", *sorted((ROOT / "mha_viz").rglob("*.py")), *sorted((ROOT / "models").rglob("*.py")),
           *sorted((ROOT / "tests").rglob("*.py")), *sorted((ROOT / "benchmarks").rglob("*.py"))]


@pytest.mark.parametrize("package, folder", [(mha_viz, ROOT / "mha_viz"),
                                             (mha_viz_models, ROOT / "models" / "mha_viz_models")])
def test_each_import_name_is_the_folder_of_that_name(package, folder):
    here = Path(package.__file__).resolve().parent
    assert here == folder and here.name == package.__name__


def test_models_folder_is_not_a_second_name_for_the_package():
    done = subprocess.run([sys.executable, "-c", "import models.mha_viz_models.attention.mha"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "import mha_viz_models" in done.stderr, done.stderr[-2000:]
    assert "models" not in sys.modules  # nothing in the test session imported it either


def test_every_module_of_the_package_imports_under_its_folder_name():
    folder = ROOT / "models" / "mha_viz_models"
    files = {".".join(p.relative_to(folder).with_suffix("").parts): p for p in folder.rglob("*.py")
             if p.stem != "__init__" and p.relative_to(folder).as_posix() != "toy/train.py"}
    assert "attention.mha" in files and "loading.loader" in files
    for name, path in sorted(files.items()):
        module = importlib.import_module(f"mha_viz_models.{name}")
        assert Path(module.__file__).resolve() == path


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((a.name, a.asname) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.module, None


def test_no_code_imports_models_or_renames_a_first_party_package():
    bad = []
    for path in SOURCES:
        for name, alias in _imports(path):
            top = name.split(".")[0]
            if top == "models" or (top in ("mha_viz", "mha_viz_models") and alias and "." not in name):
                bad.append(f"{path.relative_to(ROOT)}: import {name}{' as ' + alias if alias else ''}")
    assert not bad, bad
