"""The public deployment mode and the rules that hold in every mode, without a model: settings
from the environment, a limit on analyses at once, the allow-list checked by the loader, no
remote code and no user text in raw HTML. The rules that need a model or the app are in
tests/models/test_untrusted_folders.py and tests/app/test_public_mode.py."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import threading

import pytest
import torch

import mha_viz
import mha_viz_models
from mha_viz import launch, settings
from mha_viz.budget import admission
from tests.helpers import ROOT, shown
from tests.waiting import blocked_in, wait_until


def test_settings_from_the_environment(monkeypatch):
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MODELS", "MHA_VIZ_MAX_CONCURRENT", "MHA_VIZ_ALLOW_PICKLE"):
        monkeypatch.delenv(name, raising=False)
    local = settings.from_env()
    assert not local.public and local.models == () and local.max_concurrent == 0 and local.allows("/any/folder")
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_ALLOW_PICKLE", "1")  # ignored in public mode
    public = settings.from_env()
    assert public.models == tuple(mha_viz_models.BUNDLED) and public.max_concurrent == 2 and not public.allow_pickle
    assert public.allows("minilm") and not public.allows("gpt2") and not public.allows("/any/folder")
    monkeypatch.setenv("MHA_VIZ_MODELS", "smollm2, gpt2")
    monkeypatch.setenv("MHA_VIZ_MAX_CONCURRENT", "oops")  # unreadable: the default
    listed = settings.from_env()
    assert listed.models == ("smollm2", "gpt2") and not listed.allows("minilm") and listed.max_concurrent == 2


def test_models_kept_and_computing_ahead_from_the_environment(monkeypatch):
    for name in ("MHA_VIZ_MAX_MODELS", "MHA_VIZ_AHEAD"):
        monkeypatch.delenv(name, raising=False)
    default = settings.from_env()
    assert default.max_models == 3 and default.ahead
    monkeypatch.setenv("MHA_VIZ_MAX_MODELS", "6")
    monkeypatch.setenv("MHA_VIZ_AHEAD", "0")
    assert (settings.from_env().max_models, settings.from_env().ahead) == (6, False)
    monkeypatch.setenv("MHA_VIZ_MAX_MODELS", "0")  # at least one
    monkeypatch.setenv("MHA_VIZ_AHEAD", "On")
    assert (settings.from_env().max_models, settings.from_env().ahead) == (1, True)


def test_scores_kept_on_disk_unless_set_off(monkeypatch):
    monkeypatch.delenv("MHA_VIZ_KEEP_SCORES", raising=False)
    assert settings.from_env().keep_scores
    for off in ("0", "no", "off"):
        monkeypatch.setenv("MHA_VIZ_KEEP_SCORES", off)
        assert not settings.from_env().keep_scores


def test_a_long_run_takes_the_attention_kernel_only_when_set(monkeypatch):
    """On a GPU a scan takes blocks of rows unless MHA_VIZ_SCAN_KERNEL=1 (the kernel was slower on an H200)."""
    import importlib.util
    from types import SimpleNamespace

    from mha_viz.scan import kernel_layer

    gpu = SimpleNamespace(device=torch.device("cuda"), can_recompute=True, is_encoder_decoder=False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())  # Triton installed
    monkeypatch.delenv("MHA_VIZ_SCAN_KERNEL", raising=False)
    assert not kernel_layer.kernel_by_default(gpu)
    monkeypatch.setenv("MHA_VIZ_SCAN_KERNEL", "1")
    assert kernel_layer.kernel_by_default(gpu)
    assert not kernel_layer.kernel_by_default(SimpleNamespace(**{**vars(gpu), "device": torch.device("cpu")}))


def test_the_token_limit_is_the_models_context_locally_and_capped_in_public(monkeypatch):
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MAX_TOKENS"):
        monkeypatch.delenv(name, raising=False)
    assert settings.from_env().max_tokens == 32768  # SmolLM2 then reads its whole 8,192-token context
    smollm2 = type("Model", (), {"max_positions": 8192})()
    assert mha_viz.text.token_limit(smollm2, settings.from_env().max_tokens) == 8192
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    assert settings.from_env().max_tokens == 512
    monkeypatch.setenv("MHA_VIZ_MAX_TOKENS", "64")
    assert settings.from_env().max_tokens == 64 and mha_viz.text.token_limit(smollm2) == 64


def test_slots_cap_work_running_at_once():
    """7 workers on 2 slots: the first two to get in stay until a third has been refused while
    both hold theirs (no sleep: they wait for it on a condition), so the cap is tried for sure."""
    slots = admission.Admission(2)
    running, peak, done, refused = [0], [0], [], [0]
    state = threading.Condition()

    def work(i):
        while True:
            try:
                with slots.hold():
                    with state:
                        running[0] += 1
                        peak[0] = max(peak[0], running[0])
                        state.notify_all()
                        assert state.wait_for(lambda: (peak[0] >= 2 and refused[0]) or len(done) == 6, 30)
                        running[0] -= 1
                        done.append(i)
                    return
            except admission.Busy:
                with state:
                    refused[0] += 1
                    state.notify_all()
                slots.wait(0.2)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(done) == list(range(7)) and peak[0] == 2 and refused[0] and slots.running == 0


def test_public_mode_refuses_a_model_outside_the_list_even_if_asked_directly(public):
    """The loader itself checks the list, not only the picker."""
    from mha_viz.ui.kit import resources

    for spec in ("gpt2", "/etc", "../../etc", "http://127.0.0.1:1/x"):
        with pytest.raises(mha_viz.ModelLoadError, match="offers only these models"):
            resources.load_model(spec, "cpu", False)


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def test_no_raw_html_and_no_remote_code_anywhere_in_the_app():
    """No call sets unsafe_allow_html or trust_remote_code to anything but False, and nothing renders raw
    HTML (st.html, components.html): user text can only reach escaped Markdown or Plotly labels."""
    files = [ROOT / "app.py", *sorted((ROOT / "mha_viz").rglob("*.py")), *sorted((ROOT / "models").rglob("*.py"))]
    assert len(files) > 10
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for call in _calls(tree):
            for kw in call.keywords:
                if kw.arg in ("unsafe_allow_html", "trust_remote_code"):
                    assert isinstance(kw.value, ast.Constant) and kw.value.value is False, \
                        f"{path.name}:{call.lineno} passes {kw.arg}"
            name = ast.unparse(call.func)
            assert name not in ("st.html", "components.html", "st.components.v1.html"), f"{path.name}:{call.lineno}"


@pytest.mark.parametrize("text", ["[x](javascript:alert(1))", "<b>bold</b> $x$ :red[y] ![i](x.png)"])
def test_plain_escapes_every_markdown_and_html_character(text):
    from mha_viz.ui.kit.text import plain

    escaped = plain(text)
    assert shown(escaped) == text
    for ch in "[]()<>$:!":
        assert ch not in escaped.replace("\\" + ch, "")


# The autolink literals of GitHub-flavoured Markdown as Streamlit 1.67 finds them (remark-gfm's
# mdast-util-gfm-autolink-literal, in its StreamlitMarkdown bundle): run over the text once the
# Markdown escapes are read. JavaScript's \w is ASCII, hence re.ASCII.
GFM_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE | re.ASCII)
GFM_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)", re.ASCII)


def _markdown_text(source: str) -> str:
    """The text node CommonMark leaves of `source`: a backslash before ASCII punctuation dropped."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", source)


def test_plain_leaves_no_bare_url_or_address_to_autolink():
    from mha_viz.ui.kit.text import plain

    text = "see https://evil.example/x and www.evil.example, HTTP://A.example, me@evil.example"
    assert GFM_URL.findall(_markdown_text(text)) and GFM_EMAIL.findall(_markdown_text(text))  # the check bites
    escaped = plain(text)
    for source in (escaped, _markdown_text(escaped)):
        assert not GFM_URL.search(source) and not GFM_EMAIL.search(source), source
        assert not re.search(r"https?://|www\.", source, re.IGNORECASE)
    assert shown(escaped) == text  # the word joiners are invisible: it reads as typed


def test_streamlit_config_is_safe_to_expose():
    import tomllib

    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert conf["client"]["showErrorDetails"] == "none" and conf["client"]["toolbarMode"] == "viewer"
    assert conf["runner"]["magicEnabled"] is False
    # no full collection after every script run (a class's quarter of the server's time, docs/speed.md)
    assert conf["runner"]["postScriptGC"] is False
    assert (ROOT / "mha_viz" / "streamlit.toml").read_text() == (ROOT / ".streamlit" / "config.toml").read_text()
    assert conf["server"]["enableXsrfProtection"] is True and conf["server"]["runOnSave"] is False
    assert conf["browser"]["gatherUsageStats"] is False


def test_streamlit_run_serves_the_st_app_of_app_py_with_its_flags_and_config():
    """`streamlit run app.py` (make run, the end-to-end tests) serves `app`, the st.App whose
    lifespan preloads before the server answers (issue 20), with the command's flags and
    .streamlit/config.toml; no server starts (bootstrap's two entries are replaced)."""
    apps = [c for c in _calls(ast.parse((ROOT / "app.py").read_text())) if ast.unparse(c.func) == "st.App"]
    keywords = [{kw.arg: ast.unparse(kw.value) for kw in c.keywords} for c in apps]
    assert keywords == [{"lifespan": "preload.lifespan"}]
    assert _served(["streamlit", "run", "app.py", "--server.port", "8599", "--server.address", "127.0.0.2"],
                   ROOT) == ["app:app", "8599", "127.0.0.2", "50", "False", "False"]


def test_the_mha_viz_command_serves_the_packaged_script_with_the_same_settings(tmp_path):
    """`mha-viz --port 8599` from a folder with no .streamlit/config.toml: the st.App of serve.py,
    with the settings given as flags."""
    apps = [c for c in _calls(ast.parse(launch.SCRIPT.read_text())) if ast.unparse(c.func) == "st.App"]
    assert [{kw.arg: ast.unparse(kw.value) for kw in c.keywords} for c in apps] == [{"lifespan": "lifespan"}]
    argv = ["streamlit", *launch.command(8599)[3:]]  # after `python -m streamlit`
    assert _served(argv, tmp_path) == ["serve:app", "8599", "127.0.0.1", "50", "False", "False"]
    assert launch.command(8599, public=True)[-1] == "0.0.0.0"


def _served(argv: list[str], cwd) -> list[str]:
    """What `streamlit <argv>` would serve, started in `cwd`: the app's import string and some of
    its options; no server starts (bootstrap's two entries are replaced)."""
    options = ("server.port", "server.address", "server.maxUploadSize", "runner.magicEnabled", "runner.postScriptGC")
    code = ("import sys\n"
            "from streamlit import config\n"
            "from streamlit.web import bootstrap, cli\n"
            "bootstrap.run_asgi_app = lambda path, app, args, flags: "
            f"print(app, *(config.get_option(o) for o in {options!r}))\n"
            "bootstrap.run = lambda *args, **kwargs: print('a script, no st.App')\n"
            f"sys.argv = {argv!r}\n"
            "cli.main()\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    return done.stdout.split() or [done.stderr[-2000:]]


def test_a_slot_can_be_waited_for():
    """hold(wait=True) (a download built on a click) blocks while the server is full, then runs."""
    slots = admission.Admission(1)
    order = []
    with slots.hold():
        def later():
            with slots.hold(wait=True):
                order.append("waited")
        worker = threading.Thread(target=later)
        worker.start()
        assert wait_until(lambda: blocked_in(worker, "hold") or order, 30), "the worker never reached hold"
        assert order == [] and slots.running == 1  # blocked inside hold, not through it
    worker.join(5)
    assert order == ["waited"] and slots.running == 0


def test_dtype_on_the_command_line_sets_the_sidebars_default_precision(monkeypatch):
    """`mha-viz --dtype bfloat16` (and `mha-viz app --dtype …`) serves the app with MHA_VIZ_DTYPE,
    which `settings` reads as the sidebar's default; an unknown value is refused by the parser and
    an unreadable variable falls back to auto."""
    from mha_viz import cli

    served = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: served.append(env) or 0)
    monkeypatch.delenv("MHA_VIZ_DTYPE", raising=False)
    assert cli.main(["--dtype", "bfloat16", "--port", "8599"]) == 0
    assert cli.main(["app", "--dtype", "float16"]) == 0
    assert cli.main(["app"]) == 0
    assert [e.get("MHA_VIZ_DTYPE") for e in served] == ["bfloat16", "float16", None]
    with pytest.raises(SystemExit):
        cli.main(["--dtype", "int8"])
    monkeypatch.setenv("MHA_VIZ_DTYPE", "BFloat16")
    assert settings.from_env().dtype == "bfloat16"
    monkeypatch.setenv("MHA_VIZ_DTYPE", "fp8")
    assert settings.from_env().dtype == "auto"


def test_lesson_on_the_command_line_sets_the_server_lesson(monkeypatch, tmp_path, capsys):
    """`mha-viz --lesson FILE` serves the app with MHA_VIZ_LESSON (the file's absolute path, or a bundled
    lesson's name), which `settings` reads; a lesson that is neither is refused before the server starts."""
    from mha_viz import cli

    served = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: served.append(env) or 0)
    monkeypatch.delenv("MHA_VIZ_LESSON", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "week3.json").write_text("{}")
    assert cli.main(["--lesson", "week3.json"]) == 0
    assert cli.main(["app", "--lesson", "attention-head-by-head", "--public"]) == 0
    assert cli.main(["app"]) == 0
    assert [e.get("MHA_VIZ_LESSON") for e in served] == [str(tmp_path / "week3.json"), "attention-head-by-head", None]
    assert cli.main(["--lesson", "no-such.json"]) == 2 and len(served) == 3
    assert "neither a file nor a bundled lesson" in capsys.readouterr().err
    monkeypatch.setenv("MHA_VIZ_LESSON", " week3.json ")
    assert settings.from_env().lesson == "week3.json"


# A stand-in for Streamlit's server: it says which signal stopped it in its exit code (Streamlit stops cleanly on
# SIGTERM, SIGINT and SIGQUIT, and dies on SIGHUP) once it has written that it is ready; SIGALRM ends it after 90 s
# if no signal came.
SERVER = """
import signal, sys
from pathlib import Path
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
    signal.signal(sig, lambda signum, _frame: sys.exit(100 + signum))
signal.alarm(90)
Path(sys.argv[1]).write_text("ready")
while True:
    signal.pause()
"""


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("sent, received", [("SIGTERM", "SIGTERM"), ("SIGHUP", "SIGTERM"), ("SIGINT", "SIGINT")])
def test_the_command_passes_a_signal_to_stop_on_to_the_server(tmp_path, sent, received):
    """`mha-viz` serves the app from a child process (launch.serve): a service manager's SIGTERM or a closed
    terminal's SIGHUP sent to `mha-viz` alone must stop the server too (a SIGHUP as a SIGTERM, which
    Streamlit handles), and the command returns the server's exit code, its own handlers put back after."""
    ready, sig = tmp_path / "ready", getattr(signal, sent)
    before = signal.getsignal(sig)
    outcome = {}

    def stop_the_command() -> None:  # the signal goes to this test's main thread, blocked in launch.serve
        outcome["armed"] = wait_until(lambda: ready.exists() and signal.getsignal(sig) != before, 60)
        if outcome["armed"]:  # else no handler of the command's own: the server ends itself (its alarm)
            signal.pthread_kill(threading.main_thread().ident, sig)

    stopper = threading.Thread(target=stop_the_command)
    stopper.start()
    code = launch.serve([sys.executable, "-c", SERVER, str(ready)], dict(os.environ))
    stopper.join(90)
    assert outcome["armed"], f"launch.serve set no handler for {sent} while the server ran"
    assert code == 100 + getattr(signal, received)
    assert signal.getsignal(sig) == before


@pytest.mark.parametrize("variable, users, expected", [
    ("GOMP_SPINCOUNT", {}, "10000"),  # OpenMP's spin shortened (settings.OPENMP_SPIN)
    ("GOMP_SPINCOUNT", {"GOMP_SPINCOUNT": "250"}, "250"),  # what the user set, left alone
    ("GOMP_SPINCOUNT", {"OMP_WAIT_POLICY": "ACTIVE"}, None),
    ("NUMPY_MADVISE_HUGEPAGE", {}, "0"),  # NumPy's arrays on ordinary pages (settings.NO_HUGE_PAGES)
    ("NUMPY_MADVISE_HUGEPAGE", {"NUMPY_MADVISE_HUGEPAGE": "1"}, "1"),
])
def test_the_command_gives_its_server_its_settings_unless_the_user_set_them(monkeypatch, variable, users, expected):
    """`mha-viz` starts its server with GOMP_SPINCOUNT=10000: PyTorch's threads waiting for work sleep sooner, and
    do not spin through the cores a Ray actor or another server computes on (benchmarks/openmp_spin.py); and with
    NUMPY_MADVISE_HUGEPAGE=0: in a virtual machine whose host takes its free memory back, a fresh array on huge pages
    filled 16-25 × slower (benchmarks/huge_pages.py). A user's own GOMP_SPINCOUNT, OMP_WAIT_POLICY or
    NUMPY_MADVISE_HUGEPAGE reaches the server unchanged, and nothing is added in its place."""
    from mha_viz import cli

    served = []
    monkeypatch.setattr(launch, "serve", lambda argv, env: served.append(env) or 0)
    for name in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "NUMPY_MADVISE_HUGEPAGE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in users.items():
        monkeypatch.setenv(name, value)
    assert cli.main(["--port", "8599"]) == 0
    assert served[0].get(variable) == expected
    assert {k: served[0].get(k) for k in users} == users


HUGE_FLAG = """
import numpy as np
a = np.ones(64 * 2**20 // 8)  # 64 MiB: NumPy advises huge pages from 4 MiB on, over the 2 MiB-aligned part
middle = a.__array_interface__["data"][0] + a.nbytes // 2
for line in open("/proc/self/smaps"):
    head = line.split()[0]
    if "-" in head and ":" not in head:  # a mapping's first line: its addresses
        low, high = (int(x, 16) for x in head.split("-"))
        inside = low <= middle < high
    elif inside and line.startswith("VmFlags:"):
        print("hg" in line.split()[1:])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/smaps is Linux's")
def test_the_servers_numpy_asks_for_no_huge_pages_and_a_default_process_does(monkeypatch):
    """What the kernel is told, read from /proc/self/smaps (its mapping's flag `hg`, MADV_HUGEPAGE): a process with
    the server's environment (`launch.app_env`) maps a large array without it; one with NumPy's default, with it
    (where the kernel takes the advice at all: one built without huge pages refuses it, and sets no flag)."""
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)  # the suite's own choice (the Makefile's)
    server, default = launch.app_env(), dict(os.environ)
    flags = [subprocess.run([sys.executable, "-c", HUGE_FLAG], env=env, capture_output=True, text=True, timeout=60,
                            check=True).stdout.split() for env in (server, default)]
    if flags[1] == ["False"]:
        pytest.skip("this kernel takes no huge-page advice")
    assert flags == [["False"], ["True"]], flags


@pytest.mark.skipif(os.name != "posix", reason="process groups")
def test_the_server_has_a_process_group_of_its_own_so_a_ctrl_c_reaches_it_once():
    """A terminal's Ctrl+C goes to its foreground process group: were the server in `mha-viz`'s, it would get the
    terminal's SIGINT and the one `serve` passes on, and Streamlit's server printed a KeyboardInterrupt traceback as
    it stopped. In a group of its own it gets the one passed on (tests/models/test_installed_package.py: no
    traceback after a Ctrl+C to the command's group)."""
    child = "import os, sys; sys.exit(0 if os.getpgid(0) != int(sys.argv[1]) else 1)"
    assert launch.serve([sys.executable, "-c", child, str(os.getpgid(0))], dict(os.environ)) == 0
