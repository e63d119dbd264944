"""Random-init models of the models tier, loaded once for the whole run (from the folders that
tests/conftest.py saves): GPT-2 with Hugging Face's attention and with ours, and BERT; and this
checkout's wheel, built and installed into a folder of its own."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import mha_viz
from tests.helpers import ROOT


@pytest.fixture(scope="session")
def tiny_gpt2(gpt2_dir):
    return mha_viz.load_model(str(gpt2_dir), device="cpu")


@pytest.fixture(scope="session")
def tiny_gpt2_ours(gpt2_dir):
    return mha_viz.load_model(str(gpt2_dir), device="cpu", local_attention=True)


@pytest.fixture(scope="session")
def tiny_bert(bert_dir):
    return mha_viz.load_model(str(bert_dir), device="cpu")


@pytest.fixture(scope="session")
def installed(tmp_path_factory):
    """The wheel of this checkout, installed (without its dependencies, which this venv has) into a
    folder of its own."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"  # a copy: building writes build/ and *.egg-info next to the sources
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "mha_viz", "models"):
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                              if (ROOT / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(source)],
                   check=True, capture_output=True, text=True, timeout=600)
    [wheel] = list((tmp / "dist").glob("mha_viz-*.whl"))
    target = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, capture_output=True, text=True, timeout=600)
    return wheel, target
