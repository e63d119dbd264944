"""mha-viz's cache folder (mha_viz_models.cache_folder): $MHA_VIZ_CACHE_DIR or ~/.cache/mha-viz, decided in that
one module; the converted GGUF weights and the compiled metric loops are kept under it."""

from __future__ import annotations

import ast
import hashlib
from importlib.metadata import version

from mha_viz import compiled
from mha_viz_models import cache_folder
from mha_viz_models.loading import gguf_cache
from tests.helpers import ROOT

SETTING = "MHA_VIZ_CACHE_DIR"


def test_the_setting_or_the_home_cache_decides_the_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(SETTING, str(tmp_path / "here"))
    assert cache_folder.cache_root() == tmp_path / "here"
    monkeypatch.delenv(SETTING)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder.cache_root() == tmp_path / "home" / ".cache" / "mha-viz"


def test_converted_gguf_weights_and_compiled_loops_live_under_it(monkeypatch, tmp_path):
    """A GGUF file already converted (its folder planted where the key by hand puts it: the transformers version,
    the size, the first and the last bytes, here the whole 4-byte file twice) is read back
    from under $MHA_VIZ_CACHE_DIR without converting; the compiled loops' folder is its numba/."""
    monkeypatch.setenv(SETTING, str(tmp_path / "cache"))
    gguf = tmp_path / "model" / "tiny.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    key = hashlib.sha256(f"{version('transformers')}|4".encode() + b"GGUF" + b"GGUF").hexdigest()[:16]
    planted = tmp_path / "cache" / "gguf" / f"tiny-{key}"
    planted.mkdir(parents=True)
    (planted / "config.json").write_text("{}")
    (planted / "model.safetensors").write_bytes(b"")
    said = []
    assert gguf_cache.gguf_cache(gguf.parent, gguf, lambda *a: said.append(a)) == planted
    assert not said  # read back, not converted
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert compiled.cache_folder() == tmp_path / "cache" / "numba" / compiled.source_hash()


def _modules():
    for root in ("mha_viz", "models/mha_viz_models"):
        for path in sorted((ROOT / root).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def test_one_module_reads_the_setting_and_every_other_imports_it_from_there():
    """No second copy of the rule: only cache_folder.py names the setting or defines cache_root, and every
    module that uses cache_root imports it from mha_viz_models.cache_folder."""
    naming, defining, importing = [], [], {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == SETTING:
                naming.append(path)
            if isinstance(node, ast.FunctionDef) and node.name == "cache_root":
                defining.append(path)
            if isinstance(node, ast.ImportFrom) and any(a.name == "cache_root" for a in node.names):
                importing[path] = node.module
    assert naming == defining == ["models/mha_viz_models/cache_folder.py"]
    assert {"models/mha_viz_models/loading/gguf_cache.py", "mha_viz/compiled.py"} <= set(importing)
    assert set(importing.values()) == {"mha_viz_models.cache_folder"}, importing
