"""*Show attention as: contributions* and *Hide tokens* on a long run (MHA_VIZ_DENSE_MB=0: no every-head array)
through AppTest, under `forbid_dense`: the sidebar gives a derived long run (`mha_viz.derived`) instead of a note,
and the Model view, Head view and Head metrics open on it with no exception and no error; its head table is
the derived run's own summary."""

from __future__ import annotations

from importlib import resources

import pytest

from mha_viz.capture.head_rows import forbid_dense
from mha_viz.ui.kit import keys
from tests.app.helpers import open_page, start_app

pytestmark = pytest.mark.model
SAMPLE = resources.files("mha_viz.corpus").joinpath("sample.txt").read_text(encoding="utf-8")
TEXT = "Read once more, slowly: " + SAMPLE[:1300]  # about 300 tokens


def clean(at) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


def test_the_lens_and_hidden_tokens_on_a_long_run_open_every_page(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with forbid_dense():
        at = start_app()
        at.selectbox(key=keys.MODEL_CHOICE).set_value("minilm").run()
        at.text_area(key=keys.TEXT).input(TEXT).run()
        clean(at)
        at.radio(key=keys.LENS).set_value(keys.LENS_CONTRIBUTIONS).run()
        clean(at)
        cur = at.session_state[keys.CURRENT]
        run = cur.run
        assert not run.is_dense and run.lens and cur.lens_note is None and run.n > 256
        assert cur.full_run.value_norms is not None  # read once, kept on the analysis's run
        for page in ("model_view", "head_view", "head_metrics"):
            open_page(at, page)
            clean(at)
        at.checkbox(key=keys.HIDE_SPECIAL).check().run()
        clean(at)
        cur = at.session_state[keys.CURRENT]
        run = cur.run
        assert run.lens and run.hidden is not None and cur.hide_note is None
        assert run.n == cur.full_run.n - len(run.hidden.removed) and not run.is_dense
        assert len(run.summary.table) == run.num_layers * run.num_heads
        for page in ("head_view", "head_metrics", "model_view"):
            open_page(at, page)
            clean(at)
