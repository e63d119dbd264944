"""A GGUF file is converted once when several callers load it at the same moment on a cold cache
(`mha_viz_models.loading.gguf_cache`): the test suite's workers, or the app processes of `mha-viz app --processes N`,
each converted it before (about 30 s of CPU and the float32 model each). Three threads (each opens the lock file
itself, as processes do) ask at once; the conversion, faked here, goes on only once all three have asked, so that
without the lock each would convert. One converts, every caller gets the same folder, whole."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import transformers

from mha_viz_models.loading import gguf_cache

CALLERS = 3


class _Saved:
    """What the conversion saves: a model's config and weights, or a tokenizer's file."""

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.config = SimpleNamespace()
        self.hf_quantizer = object()
        self.is_quantized = True

    def save_pretrained(self, folder, **_kwargs) -> None:
        for name, text in self.files.items():
            (folder / name).write_text(text)


def test_callers_at_once_on_a_cold_cache_convert_once_and_read_one_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("MHA_VIZ_CACHE_DIR", str(tmp_path / "cache"))
    gguf = tmp_path / "model" / "tiny.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    arrived, everyone = [], threading.Event()
    real_root = gguf_cache.cache_root

    def root():  # each caller reads the cache's folder first, before it looks for the converted one
        arrived.append(threading.get_ident())
        if len(arrived) >= CALLERS:
            everyone.set()
        return real_root()

    converted = []

    def convert(folder, **_kwargs):
        converted.append(folder)
        assert everyone.wait(timeout=60), "the other callers never asked"
        return _Saved({"config.json": "{}", "model.safetensors": "weights"})

    monkeypatch.setattr(gguf_cache, "cache_root", root)
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", convert)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained",
                        lambda folder, **_kwargs: _Saved({"tokenizer.json": "{}"}))
    got, failed = [], []

    def load() -> None:
        try:
            got.append(gguf_cache.gguf_cache(gguf.parent, gguf, lambda *a: None))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            failed.append(exc)

    threads = [threading.Thread(target=load) for _ in range(CALLERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failed, failed
    assert len(converted) == 1, f"{len(converted)} conversions of one file"
    assert len(got) == CALLERS and len(set(got)) == 1
    folder = got[0]
    assert (folder / "model.safetensors").read_text() == "weights" and (folder / "tokenizer.json").exists()
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]  # no half-written copy left


def test_the_same_file_elsewhere_finds_its_conversion_and_another_file_does_not(tmp_path):
    """The cache's key is the file's content: a copy in another folder (another environment's install) with another
    time keys the same, so it is not converted again; a file that differs in its last byte does not."""
    body = bytes(range(256)) * (3 * gguf_cache.EDGE // 256)
    first, second, other = tmp_path / "a" / "m.gguf", tmp_path / "b" / "m.gguf", tmp_path / "c" / "m.gguf"
    for path, data in ((first, body), (second, body), (other, body[:-1] + b"\x00")):
        path.parent.mkdir()
        path.write_bytes(data)
    os.utime(second, ns=(1, 1))
    assert gguf_cache.content_key(first) == gguf_cache.content_key(second)
    assert gguf_cache.content_key(first) != gguf_cache.content_key(other)
