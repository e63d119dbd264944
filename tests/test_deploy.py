"""The public deployment mode and the rules that hold in every mode: an allow-list of models,
a token cap, a limit on analyses at once, safetensors / GGUF only from folders, no remote code,
no user text in raw HTML. One test (at least) per rule."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import pytest
import torch

import mha_viz
from mha_viz import settings
from test_app import _app, shown

ROOT = Path(__file__).resolve().parents[1]


def test_settings_from_the_environment(monkeypatch):
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MODELS", "MHA_VIZ_MAX_CONCURRENT", "MHA_VIZ_ALLOW_PICKLE"):
        monkeypatch.delenv(name, raising=False)
    local = settings.from_env()
    assert not local.public and local.models == () and local.max_concurrent == 0 and local.allows("/any/folder")
    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_ALLOW_PICKLE", "1")  # ignored in public mode
    public = settings.from_env()
    assert public.models == tuple(mha_viz.BUNDLED) and public.max_concurrent == 2 and not public.allow_pickle
    assert public.allows("minilm") and not public.allows("gpt2") and not public.allows("/tmp")
    monkeypatch.setenv("MHA_VIZ_MODELS", "smollm2, gpt2")
    monkeypatch.setenv("MHA_VIZ_MAX_CONCURRENT", "oops")  # unreadable: the default
    listed = settings.from_env()
    assert listed.models == ("smollm2", "gpt2") and not listed.allows("minilm") and listed.max_concurrent == 2


def test_slots_cap_work_running_at_once():
    slots = settings.Slots(2)
    running, peak, done, lock = [0], [0], [], threading.Lock()

    def work(i):
        while True:
            try:
                with slots.hold():
                    with lock:
                        running[0] += 1
                        peak[0] = max(peak[0], running[0])
                    time.sleep(0.05)
                    with lock:
                        running[0] -= 1
                    done.append(i)
                    return
            except settings.Busy:
                slots.wait(0.2)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(done) == list(range(7)) and peak[0] == 2 and slots.running == 0


@pytest.fixture()
def public(monkeypatch):
    from mha_viz.ui import state

    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_MAX_TOKENS", "32")
    state.model_cache.clear()
    state.slots.clear()
    yield
    state.model_cache.clear()
    state.slots.clear()


@pytest.mark.model
def test_public_mode_offers_only_the_allow_list_and_caps_tokens(public):
    at = _app()
    assert at.selectbox(key="model_choice").options == [m.title for m in mha_viz.BUNDLED.values()]
    assert not at.text_input  # no free-form hub id or folder
    limit = at.number_input(key="token_limit")
    assert limit.value == 32 and limit.max == 32
    at.text_area(key="text").input("word " * 100).run()
    assert any("first 32" in w.value for w in at.warning)


@pytest.mark.model
def test_public_mode_refuses_a_model_outside_the_list_even_if_asked_directly(public):
    """The loader itself checks the list, not only the picker."""
    from mha_viz.ui import state

    for spec in ("gpt2", "/etc", "../../etc", "http://127.0.0.1:1/x"):
        with pytest.raises(mha_viz.ModelLoadError, match="offers only these models"):
            state._load(spec, "cpu", False)


@pytest.mark.model
def test_analyses_beyond_the_limit_wait_for_a_free_slot(monkeypatch):
    """With one slot taken elsewhere, a new analysis waits (with a notice) and runs once the
    slot is given back: it starts after the release, and finishes without an error."""
    from mha_viz.ui import state

    monkeypatch.setenv("MHA_VIZ_MAX_CONCURRENT", "1")
    state.slots.clear()
    started, released = [], []
    real = mha_viz.analyze

    def recording(*args, **kwargs):
        started.append(time.monotonic())
        return real(*args, **kwargs)

    monkeypatch.setattr(mha_viz, "analyze", recording)
    hold = state.slots().hold()

    def release():
        time.sleep(1.0)
        released.append(time.monotonic())
        hold.__exit__(None, None, None)

    try:
        at = _app()  # the first sentence: minilm loads while the slot is free
        hold.__enter__()  # then another analysis takes the only slot
        releaser = threading.Thread(target=release)
        releaser.start()
        at.text_area(key="text").input("Waiting for a free slot.").run()
        releaser.join()
        assert not at.exception and not at.error
        assert at.session_state["_current"].run.text == "Waiting for a free slot."
        assert started and released and started[-1] >= released[0]
    finally:
        state.slots.clear()


def _random_bert(folder: Path, *, pickled: bool) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from models.loading import BUNDLED

    tok = AutoTokenizer.from_pretrained(BUNDLED["minilm"].locate())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    model = BertModel(config)
    model.save_pretrained(folder)
    if pickled:  # the older format (transformers 5 saves safetensors only): a pickle of the weights
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    tok.save_pretrained(folder)
    return folder


def test_pickled_weights_are_refused_unless_allowed_locally(tmp_path):
    folder = _random_bert(tmp_path / "pickled", pickled=True)
    assert (folder / "pytorch_model.bin").exists() and not (folder / "model.safetensors").exists()
    with pytest.raises(mha_viz.ModelLoadError, match="only pickled weights"):
        mha_viz.load_model(str(folder), device="cpu")
    import models

    model = models.load(str(folder), device="cpu", allow_pickle=True)  # the explicit local setting
    assert model.num_layers == 1
    safe = _random_bert(tmp_path / "safe", pickled=False)
    assert mha_viz.load_model(str(safe), device="cpu").num_layers == 1


def test_code_shipped_with_a_model_is_never_run(tmp_path):
    """A folder whose config points at its own Python code (auto_map) is refused, and that code
    does not run: the marker file it would write never appears."""
    folder = _random_bert(tmp_path / "remote", pickled=False)
    marker = tmp_path / "ran.txt"
    (folder / "evil_model.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from transformers import BertConfig as EvilConfig, BertModel as EvilModel\n")
    import json

    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "evil-model"
    config["auto_map"] = {"AutoConfig": "evil_model.EvilConfig", "AutoModel": "evil_model.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(mha_viz.ModelLoadError):
        mha_viz.load_model(str(folder), device="cpu")
    assert not marker.exists()


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
    from mha_viz.ui import state

    escaped = state.plain(text)
    assert shown(escaped) == text
    for ch in "[]()<>$:!":
        assert ch not in escaped.replace("\\" + ch, "")


def test_streamlit_config_is_safe_to_expose():
    import tomllib

    conf = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert conf["client"]["showErrorDetails"] == "none" and conf["client"]["toolbarMode"] == "viewer"
    assert conf["runner"]["magicEnabled"] is False
    assert conf["server"]["enableXsrfProtection"] is True and conf["server"]["runOnSave"] is False
    assert conf["browser"]["gatherUsageStats"] is False
