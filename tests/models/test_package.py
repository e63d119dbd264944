"""mha-viz as a package: the wheel built from this checkout, installed into a folder of its own and
used from a folder that holds a `models.py` which raises on import (a common name in a user's ML
project): mha_viz imports, analyses with minilm, loads the toy model from its packaged files, and
declares the `mha-viz` command, which answers --help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest

pytestmark = pytest.mark.model

USER_CODE = """
import importlib.metadata, json, sys
import mha_viz
run = mha_viz.analyze(mha_viz.load_model("minilm", device="cpu"), "The cat sat on the mat.")
toy = mha_viz.load_model("toy-induction", device="cpu")
[dist] = list(importlib.metadata.distributions(name="mha-viz", path=[sys.argv[1]]))
print(json.dumps({
    "mha_viz": mha_viz.__file__, "models": sys.modules["mha_viz_models"].__file__,
    "shape": list(run.attentions.shape), "toy_layers": toy.num_layers,
    "scripts": {e.name: e.value for e in dist.entry_points if e.group == "console_scripts"},
    "user_models_imported": "models" in sys.modules,
}))
"""


def test_the_wheel_holds_no_top_level_models_package(installed):
    wheel, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"mha_viz", "mha_viz_models"}, tops
    assert "mha_viz_models/toy/toy_induction/model.safetensors" in names
    assert "mha_viz/ui/shell/serve.py" in names and "mha_viz/streamlit.toml" in names


def test_a_users_models_py_breaks_nothing(installed, tmp_path):
    _, target = installed
    (tmp_path / "models.py").write_text("raise RuntimeError('the user\\'s own models.py was imported')\n")
    env = dict(os.environ, PYTHONPATH=str(target), HF_HUB_OFFLINE="1")
    done = subprocess.run([sys.executable, "-c", USER_CODE, str(target)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["mha_viz"].startswith(str(target)) and out["models"].startswith(str(target))  # the installed copy
    assert out["shape"] == [6, 12, 9, 9] and out["toy_layers"] == 2
    assert out["scripts"] == {"mha-viz": "mha_viz.cli:main"}
    assert not out["user_models_imported"]
    helped = subprocess.run([sys.executable, "-m", "mha_viz", "--help"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "start the web app" in helped.stdout, helped.stderr[-2000:]
