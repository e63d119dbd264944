"""A page switch runs the script once (issue 59): each run of `main` is counted through the run
trace the page benchmark reads (mha_viz.ui.shell.run_trace, MHA_VIZ_RUN_TRACE), and a switch that runs it
twice (an st.rerun or st.switch_page on the way) pays twice in the browser."""

from __future__ import annotations

import pytest
from streamlit.util import calc_hash

from mha_viz.ui.kit import keys
from mha_viz.ui.shell import navigation, run_trace
from tests.app.helpers import app_page_ids, start_app
from tests.helpers import HEADINGS

TEXT = "The animal didn't cross the street because it was too tired."
# pages that draw from the text (the ones people switch between); Corpus and Generate compute on a button
PAGES = [p for p in app_page_ids() if p in HEADINGS and p not in ("corpus", "generate")]


@pytest.fixture
def trace(monkeypatch, tmp_path):
    path = tmp_path / "runs.txt"
    monkeypatch.setenv(run_trace.ENV, str(path))
    return path


def switch(at, page_id: str) -> None:
    """What a click on the page's link in the navigation asks of the server: a run of its url path (the default
    page's is navigation.ROOT_PATH; its id is a hidden page that leaves for it, a second run)."""
    path = navigation.ROOT_PATH if page_id == navigation.DEFAULT else page_id
    at._page_hash = calc_hash(path)  # noqa: SLF001 - the hash a browser's nav link sends
    at.run()


def test_each_page_switch_runs_the_script_once(trace):
    at = start_app()
    at.text_area(key=keys.TEXT).input(TEXT).run()
    assert not at.exception, at.exception
    assert len(run_trace.read_trace(trace)) == 2  # the first run and the text's: one each
    for page_id in PAGES:
        before = len(run_trace.read_trace(trace))
        switch(at, page_id)
        assert not at.exception, (page_id, at.exception)
        assert at.title and at.title[0].value == HEADINGS[page_id], (page_id, [t.value for t in at.title])
        runs = run_trace.read_trace(trace)[before:]
        assert [r["how"] for r in runs] == ["done"], (page_id, runs)
        assert runs[0]["page"] in (page_id, "default") and runs[0]["start"] <= runs[0]["end"]


def test_the_trace_is_off_without_its_variable(monkeypatch, tmp_path):
    monkeypatch.delenv(run_trace.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    at = start_app()
    assert not at.exception
    assert list(tmp_path.iterdir()) == []
