"""The Corpus page through AppTest: the bundled sample on minilm gives the library's numbers and is
kept on disk for the next visitor; toy-induction's corpus importance and its pruning check on the
held-out documents; a file that cannot be read gets a message; public mode offers no path."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import mha_viz
from mha_viz import corpus
from mha_viz.corpus import split
from mha_viz.corpus.store import statistics_store
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.corpus import page as corpus_page
from mha_viz.ui.kit import keys
from tests.app.helpers import charts, open_with_text
from tests.helpers import ROOT

pytestmark = pytest.mark.model


def _setup(at, tokens: int, importance: bool):
    at.number_input(key=corpus_keys.CORPUS_TOKENS).set_value(tokens).run()
    at.toggle(key=corpus_keys.CORPUS_IMPORTANCE).set_value(importance).run()
    assert not at.exception, at.exception


def _grid(at, title_part: str) -> np.ndarray:
    spec = next(c for c in charts(at) if title_part in c["layout"]["title"]["text"])
    return np.asarray(spec["data"][0]["z"], dtype=float)


def test_the_sample_on_minilm_matches_the_library_and_is_kept_on_disk(fresh_cache):
    at = open_with_text("corpus", "The cat sat on the mat.", "minilm")
    _setup(at, 32, False)
    assert not any("documents/s" in s.value for s in at.success)  # nothing computed before the press
    at.button(key=corpus_keys.CORPUS_GO).click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert any("documents" in s.value for s in at.success)
    assert corpus_keys.CORPUS_GO not in [b.key for b in at.button]  # done: the button went with the job

    train, held = split.split(corpus.read_texts("sample"))
    assert len(held) == min(split.HOLD_MAX, -(-(len(train) + len(held)) // split.HOLD_EVERY))
    want = corpus.head_statistics(mha_viz.load_model("minilm"), train, max_tokens=32, importance=False)
    metric = at.selectbox(key=corpus_keys.CORPUS_METRIC).value
    np.testing.assert_allclose(_grid(at, "mean over"), want.table[metric].to_numpy().reshape(6, 12), atol=1e-6)
    assert any("this sentence" in c["layout"]["title"]["text"] for c in charts(at))
    assert list((fresh_cache / "corpus").iterdir())  # kept on disk

    statistics_store.cache_clear()  # a new visitor, after a restart: read back from disk, no press
    again = open_with_text("corpus", "Another sentence.", "minilm")
    _setup(again, 32, False)
    np.testing.assert_allclose(_grid(again, "mean over"), want.table[metric].to_numpy().reshape(6, 12), atol=1e-6)


def test_toy_induction_importance_and_the_held_out_pruning_check(fresh_cache):
    at = open_with_text("corpus", "k d m x b f k d m x b f", "toy-induction")
    _setup(at, 24, True)
    at.button(key=corpus_keys.CORPUS_GO).click().run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    importance = _grid(at, "importance")
    assert np.allclose(np.linalg.norm(importance, axis=1), 1.0, atol=1e-6)  # each layer's row normalised
    at.button(key=corpus_keys.CORPUS_PRUNE).click().run()
    assert not at.exception, at.exception
    pruning = next(c for c in charts(at) if c["layout"]["title"]["text"] == "Pruning heads")
    assert {t["name"] for t in pruning["data"]} >= {"least important first", "random order (mean)"}


def test_an_unreadable_file_gets_a_message_and_public_mode_offers_no_path(fresh_cache, tmp_path, monkeypatch):
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    at = open_with_text("corpus", "Keep this text.", "minilm")
    at.radio(key=corpus_keys.CORPUS_SOURCE).set_value(corpus_page.PATH).run()
    at.text_input(key=corpus_keys.CORPUS_PATH).input(str(bad)).run()
    assert not at.exception, at.exception
    assert at.error and "0xe9" in at.error[0].value and "UTF" in at.error[0].value
    assert at.text_area(key=keys.TEXT).value == "Keep this text."

    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    public = open_with_text("corpus", "Keep this text.", "minilm")
    assert corpus_page.PATH not in public.radio(key=corpus_keys.CORPUS_SOURCE).options


def test_the_app_never_imports_ray():
    """Ray is installed for the corpus job's Ray engine, but the app (every page, and the
    preloading that imports every module once) must not import it unless that engine is chosen."""
    code = ("import sys; from mha_viz.ui.shell import navigation, preload; preload.warm(); "
            "print('RAY', any(m == 'ray' or m.startswith('ray.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert "RAY False" in out.stdout, out.stdout + out.stderr[-2000:]
