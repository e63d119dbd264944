"""Fixtures of the app tier."""

from __future__ import annotations

import pytest

from mha_viz.corpus.store import statistics_store
from tests.app import script_wait

script_wait.install()  # every AppTest of the tier waits for its script on an event (tests/app/script_wait.py)


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    """Corpus results kept in an empty folder, none in memory."""
    monkeypatch.setenv("MHA_VIZ_CACHE_DIR", str(tmp_path))
    statistics_store.cache_clear()
    yield tmp_path
    statistics_store.cache_clear()
