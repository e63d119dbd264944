"""One place for mha-viz's version (`mha_viz.package_version.version`, `mha_viz.__version__`): the clone's
pyproject.toml when the package runs from one, whether or not it is installed (a notebook said "Made by
mha-viz unknown (not installed)" from a clone), and the notebook's first cell names it."""

from __future__ import annotations

import json
import tomllib
from importlib import metadata
from pathlib import Path

import mha_viz
from mha_viz import package_version
from mha_viz.package_version import clone_version, version

ROOT = Path(__file__).resolve().parents[2]


def _declared() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_a_clone_reads_its_pyproject_and_nothing_else(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mha-viz"\nversion = "9.8.7"\n')
    assert clone_version(tmp_path) == "9.8.7"
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "another"\nversion = "1.0"\n')
    assert clone_version(tmp_path) is None  # a project file, but not mha-viz's
    (tmp_path / "pyproject.toml").write_text("not = [toml")
    assert clone_version(tmp_path) is None
    assert clone_version(tmp_path / "absent") is None


def test_run_from_this_clone_uninstalled_the_version_is_the_repositorys(monkeypatch):
    def not_installed(name):
        raise metadata.PackageNotFoundError(name)
    monkeypatch.setattr(package_version.metadata, "version", not_installed)
    version.cache_clear()
    try:
        assert version() == _declared() and version()[0].isdigit()
    finally:
        version.cache_clear()
    assert mha_viz.__version__ == version() == _declared()


def test_installed_elsewhere_the_metadata_is_read(monkeypatch, tmp_path):
    monkeypatch.setattr(package_version, "__file__", str(tmp_path / "site" / "mha_viz" / "package_version.py"))
    monkeypatch.setattr(package_version.metadata, "version", lambda name: "3.2.1" if name == "mha-viz" else "")
    version.cache_clear()
    try:
        assert version() == "3.2.1"
    finally:
        version.cache_clear()


def test_the_notebook_names_the_one_version():
    view = mha_viz.export.NotebookView(page="head_view", model="minilm", text="The cat.")
    nb = json.loads(mha_viz.view_notebook(view))
    assert f"Made by **mha-viz {_declared()}**" in nb["cells"][0]["source"]
