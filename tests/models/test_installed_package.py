"""mha-viz as a user installs it (README: `pip install .`): the wheel is built from a copy of the
source tree and installed with --no-deps into a fresh virtual environment that sees this one's
dependencies but not its editable install, so that `import mha_viz` finds the installed package and
never the checkout. The wheel is built once, here, for every test of the installed package. Everything below runs
from a folder outside the checkout that holds a user's own `models.py` (which raises when imported: a common name
in a user's ML project):

- the wheel's top-level packages are mha_viz and mha_viz_models (no `models`), with the toy model's weights;
- every module of the source tree (mha_viz/ and models/mha_viz_models/) imports from the wheel,
  and the data files (lessons, corpus sample, toy model, Streamlit settings) are in it;
- `mha-viz --help` and `python -m mha_viz --help` answer, and the distribution declares the command;
- the installed package analyses a sentence on the bundled MiniLM, and its attention is Hugging
  Face's own (output_attentions, in this process); it loads the toy model from its packaged files, and the user's
  `models.py` is never imported;
- `mha-viz app` answers its health check and serves its page, and the installed app script draws
  the Model view (AppTest on the installed copy);
- examples/quickstart.ipynb runs end to end in a kernel that imports the installed package
  (tests/models/notebook_run.py).

A folder left out of the wheel fails the import test with the missing module named (checked by
hand once: with `packages` listed as before issue 58, it named mha_viz.circuits and mha_viz.scan)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import textwrap
import urllib.request
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from mha_viz import launch
from tests.helpers import ROOT
from tests.models.notebook_run import executed, shows_its_figures
from tests.waiting import wait_until

pytestmark = pytest.mark.model
SOURCES = ("mha_viz", "models/mha_viz_models")  # the source tree's packages: (folder, as the wheel names it)
SHIPPED = ("pyproject.toml", "README.md", "mha_viz", "models")  # what building the wheel reads
DATA = {  # a data file each the package reads at run time: (package, its path inside)
    "mha_viz": "streamlit.toml", "mha_viz.corpus": "sample.txt",
    "mha_viz.export": "lessons/attention-head-by-head.json", "mha_viz_models.toy": "toy_induction/model.safetensors",
}
SENTENCE = "The animal didn't cross the street because it was too tired."
BOOT_S = 180  # the server loads the default model before it answers


def source_modules() -> list[str]:
    """Every module of the source tree, by its import name (`__main__` left out: importing it runs the CLI)."""
    names = []
    for folder in SOURCES:
        top = ROOT / folder
        for path in sorted(top.rglob("*.py")):
            parts = [top.name, *path.relative_to(top).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts[-1] != "__main__":
                names.append(".".join(parts))
    return names


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """The wheel built from a copy of the source tree and installed with --no-deps into a fresh
    virtual environment, `venv`, whose only other path is this environment's site-packages, read as
    a plain folder: its .pth files do not run, so the checkout's editable install (a finder that
    would supply any module the wheel lacks) is not there. `user` is the folder a user works in.
    Returns {wheel, venv, site (its site-packages), user, env, python, script}."""
    work = tmp_path_factory.mktemp("installed")
    source, venv, user = work / "source", work / "venv", work / "user"
    for name in SHIPPED:  # a copy, so that building leaves nothing in the checkout
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    user.mkdir()
    (user / "models.py").write_text("raise RuntimeError(\"the user's own models.py was imported\")\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = Path(subprocess.run([venv / "bin" / "python", "-c", purelib], check=True, capture_output=True,
                              text=True).stdout.strip())
    (own / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # torch, streamlit, …
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(work / "wheels"), str(source)],
                   check=True, capture_output=True, cwd=work)
    (wheel,) = (work / "wheels").glob("mha_viz-*.whl")
    subprocess.run([*pip, "--python", str(venv / "bin" / "python"), "install", "--no-deps", str(wheel)],
                   check=True, capture_output=True, cwd=work)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", PYTHONDONTWRITEBYTECODE="1")
    return {"wheel": wheel, "venv": venv, "site": own, "user": user, "env": env, "python": venv / "bin" / "python",
            "script": venv / "bin" / "mha-viz"}


def python(installed: dict, code: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """`code` run by the fresh environment's interpreter in the user's folder."""
    return subprocess.run([installed["python"], "-c", textwrap.dedent(code)], cwd=installed["user"],
                          env=installed["env"], capture_output=True, text=True, timeout=timeout)


def test_the_wheel_holds_no_top_level_models_package(installed):
    names = zipfile.ZipFile(installed["wheel"]).namelist()
    tops = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith(".dist-info")}
    assert tops == {"mha_viz", "mha_viz_models"}, tops
    assert "mha_viz_models/toy/toy_induction/model.safetensors" in names
    assert "mha_viz/ui/shell/serve.py" in names and "mha_viz/streamlit.toml" in names


def test_every_module_of_the_source_tree_imports_from_the_wheel(installed):
    modules = source_modules()
    assert {"mha_viz.circuits", "mha_viz.scan", "mha_viz_models.toy"} <= set(modules)  # the walk found them
    done = python(installed, f"""
        import importlib, importlib.util, json
        from pathlib import Path
        tops = {{top: Path(importlib.util.find_spec(top).origin).parent for top in ("mha_viz", "mha_viz_models")}}
        def file_of(name):  # where the module's file is in the installed package (nothing imported)
            top, *rest = name.split(".")
            path = tops[top].joinpath(*rest)
            return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        missing = [name for name in {modules!r} if not file_of(name).is_file()]
        failed = {{}}
        for name in {modules!r}:
            if name not in missing:
                try:
                    importlib.import_module(name)
                except Exception as exc:
                    failed[name] = f"{{type(exc).__name__}}: {{exc}}"
        data = [f"{{p}}/{{f}}" for p, f in {DATA!r}.items()
                if not tops[p.split(".")[0]].joinpath(*p.split(".")[1:], f).is_file()]
        print(json.dumps({{"tops": [str(t) for t in tops.values()], "missing": missing, "failed": failed,
                           "data": data}}))
    """)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(Path(top).is_relative_to(installed["venv"]) for top in found["tops"]), found["tops"]  # not the checkout
    assert not found["missing"], f"modules of the source tree missing from the wheel: {', '.join(found['missing'])}"
    assert not found["failed"], "modules of the source tree that fail to import from the wheel:\n" + "\n".join(
        f"{name}: {why}" for name, why in found["failed"].items())
    assert not found["data"], f"data files missing from the wheel: {found['data']}"


def test_the_command_answers_help(installed):
    done = subprocess.run([str(installed["script"]), "--help"], cwd=installed["user"], env=installed["env"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: mha-viz") and "corpus" in done.stdout
    helped = subprocess.run([str(installed["python"]), "-m", "mha_viz", "--help"], cwd=installed["user"],
                            env=installed["env"], capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "start the web app" in helped.stdout, helped.stderr[-2000:]


def test_the_installed_package_analyses_a_sentence_as_hugging_face_does(installed, minilm, tmp_path):
    out = tmp_path / "run.npz"
    done = python(installed, f"""
        import importlib.metadata, json, sys
        import numpy as np, mha_viz
        model = mha_viz.load_model("minilm", device="cpu")
        run = mha_viz.analyze(model, {SENTENCE!r})
        assert mha_viz.__file__.startswith({str(installed["venv"])!r}), mha_viz.__file__
        np.savez({str(out)!r}, ids=np.asarray(run.token_ids), attentions=run.attentions)
        toy = mha_viz.load_model("toy-induction", device="cpu")  # from the wheel's own files
        dist = importlib.metadata.distribution("mha-viz")
        print(json.dumps({{"tokens": run.tokens, "toy_layers": toy.num_layers, "at": str(dist.locate_file("")),
                          "scripts": {{e.name: e.value for e in dist.entry_points if e.group == "console_scripts"}},
                          "models": sys.modules["mha_viz_models"].__file__,
                          "user_models_imported": "models" in sys.modules}}))
    """)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert "animal" in " ".join(got["tokens"]) and "tired" in " ".join(got["tokens"])
    assert got["toy_layers"] == 2 and got["scripts"] == {"mha-viz": "mha_viz.cli:main"}
    assert Path(got["at"]).is_relative_to(installed["venv"]) and Path(got["models"]).is_relative_to(installed["venv"])
    assert not got["user_models_imported"]
    saved = np.load(out)
    with torch.no_grad():  # Hugging Face's own eager attention, in this process, on the same ids
        theirs = minilm.hf_model(input_ids=torch.from_numpy(saved["ids"])[None], output_attentions=True).attentions
    want = torch.cat(theirs).numpy()  # (layers, heads, n, n)
    assert saved["attentions"].shape == want.shape == (6, 12, len(saved["ids"]), len(saved["ids"]))
    np.testing.assert_allclose(saved["attentions"], want, atol=1e-5)


def _mapped(pid: int, names: tuple[str, ...]) -> set[str]:
    """Which of `names` appear in the paths of the files mapped by process `pid` or any process below it."""
    found: set[str] = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            chain, seen = int(stat.parent.name), set()
            while chain not in (0, 1, pid) and chain not in seen:  # up the parents to pid, or to the top
                seen.add(chain)
                chain = int(Path(f"/proc/{chain}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if chain == pid:
                found |= {name for name in names if name in (stat.parent / "maps").read_text()}
        except (OSError, ValueError, IndexError):  # a process gone meanwhile
            continue
    return found


def test_the_installed_app_serves_its_first_page(installed):
    port = launch.free_port()
    base = f"http://127.0.0.1:{port}"
    log = installed["user"] / "server.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen([str(installed["script"]), "app", "--port", str(port)], cwd=installed["user"],
                                env=installed["env"], stdin=subprocess.DEVNULL, stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def healthy() -> bool:
            assert proc.poll() is None, f"mha-viz app exited with {proc.returncode}:\n{log.read_text()[-3000:]}"
            return launch.health(base) == "ok"

        assert wait_until(healthy, BOOT_S, interval_s=0.25), f"no health within {BOOT_S} s:\n{log.read_text()[-3000:]}"
        with urllib.request.urlopen(base + "/", timeout=10) as page:
            assert page.status == 200 and '<div id="root">' in page.read().decode()
        # the server's event loop is uvloop's and its HTTP parser httptools' (requirements: 9 % of a student's CPU)
        assert {"uvloop", "httptools"} <= _mapped(proc.pid, ("uvloop", "httptools")), "asyncio's own loop serves"
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C in its terminal: the whole process group
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    text = log.read_text(errors="replace")
    assert "mha-viz starting: open http://localhost:" in text and "Traceback" not in text, text[-3000:]
    assert "leaked" not in text, text[-3000:]  # no binding's leak report as it stops (Triton's, with no GPU)
    drawn = python(installed, """
        import mha_viz.ui.shell.serve as serve
        from streamlit.testing.v1 import AppTest
        at = AppTest.from_file(serve.__file__, default_timeout=240).run()
        assert not at.exception, [e.value for e in at.exception]
        print(serve.__file__)
        print(at.title[0].value)
    """)
    assert drawn.returncode == 0, drawn.stderr
    where, heading = drawn.stdout.strip().splitlines()[-2:]
    assert Path(where).is_relative_to(installed["venv"]) and heading == "Model view"


def test_the_notebook_runs_from_the_installed_package(installed, tmp_path):
    """The quickstart notebook in a kernel started in a folder of its own, the installed package first on its path."""
    env = dict(os.environ, PYTHONPATH=str(installed["site"]), HF_HUB_OFFLINE="1")
    where, code = executed(tmp_path, env=env)
    assert Path(where).is_relative_to(installed["site"]), where
    shows_its_figures(code)
