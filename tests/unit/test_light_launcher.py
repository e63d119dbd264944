"""The `mha-viz` launcher starts and watches the app's servers and needs none of the libraries they compute with:
it reads its options, the bundled lessons and models' names and the precisions, and imports neither PyTorch nor
transformers (until stop 115 it held 0.43 GB for that, and took about 3 CPU-s to start). The package faces that make
this possible import their names on first use (`mha_viz.FACE`, `lazy_loader` in `mha_viz_models` and
`mha_viz.export`): every name still resolves to its module's object, and `mha_viz.scan` is the function even when the
package `mha_viz/scan/` of its modules is imported first. Each check runs in a fresh interpreter, where nothing else
has imported the heavy libraries already."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import mha_viz
import mha_viz_models
from mha_viz import export
from tests.helpers import ROOT

HEAVY = ("torch", "transformers", "numpy", "pandas", "plotly", "streamlit", "scipy", "numba")


def _fresh(code: str) -> dict:
    """Run `code` in a new interpreter from the checkout; it prints one JSON object, returned."""
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_launcher_reads_its_options_lessons_and_help_without_the_heavy_libraries():
    got = _fresh(f"""
import contextlib, io, json, sys
from mha_viz import cli, launch, launch_group
help = io.StringIO()
with contextlib.redirect_stdout(help):
    try:
        cli.main(["app", "--help"])
    except SystemExit:
        pass
problems = [launch.check_options(8501, "attention-head-by-head"), launch.check_options(8501, "no-such-lesson")]
env = launch.app_env(dtype="bfloat16", lesson="attention-head-by-head")
print(json.dumps({{"loaded": [m for m in {HEAVY!r} if m in sys.modules], "help": help.getvalue(),
                  "problems": problems, "dtype": env.get("MHA_VIZ_DTYPE"), "nginx": launch_group.nginx_binary()}}))
""")
    assert got["loaded"] == [], got["loaded"]
    assert "--processes" in got["help"] and "bfloat16" in got["help"]  # the precisions, named without PyTorch
    assert got["problems"][0] is None and "neither a file nor a bundled lesson" in got["problems"][1]
    assert got["dtype"] == "bfloat16"


def test_the_face_resolves_scan_to_the_function_after_its_package_and_keeps_every_name():
    got = _fresh("""
import json
import mha_viz.scan.kept  # the package of scan's modules, first
import mha_viz
from mha_viz import scan
print(json.dumps({"attribute": mha_viz.scan.__module__, "imported": scan.__module__,
                  "kept": mha_viz.scan is scan}))
""")
    assert got == {"attribute": "mha_viz.scan.run", "imported": "mha_viz.scan.run", "kept": True}
    assert set(mha_viz.__all__) == set(mha_viz.FACE) and set(mha_viz.__all__) <= set(dir(mha_viz))
    for name, where in mha_viz.FACE.items():
        module, attr = where.split(":")
        assert getattr(mha_viz, name) is getattr(importlib.import_module(module), attr), name


def test_the_lazy_namespaces_hand_out_their_modules_objects():
    for package in (mha_viz_models, export):
        assert set(package.__all__) <= set(dir(package)), package.__name__
        for name in package.__all__:
            value = getattr(package, name)
            if callable(value):  # a class or a function: its defining module's own object under the same name
                assert getattr(importlib.import_module(value.__module__), name) is value, name
    assert mha_viz_models.PRECISIONS == ("auto", "float32", "bfloat16", "float16")
    from mha_viz_models.device import precision
    assert set(precision.DTYPES) == set(mha_viz_models.PRECISIONS) - {"auto"}  # every precision but auto, mapped
