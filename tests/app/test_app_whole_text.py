"""The Whole text page (AppTest): the scan of the sidebar's whole text on request, its statistics against
the head table of the dense run, one head's kept keys against the dense attention's heaviest keys (each
ranking up to near ties within the 1e-5 the scan and the dense run round apart), exact rows for a window,
and messages (no traceback) for a blank text or a cancelled scan."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.metrics import head_table
from mha_viz.ui import keys
from tests.app.helpers import charts, frame, open_page, open_with_text
from tests.tolerance import assert_same_argmax, assert_same_ranking

pytestmark = pytest.mark.model
TEXT = ("The keys to the old wooden cabinet are missing again, said Mary. John looked in the hall, "
        "and the keys to the old wooden cabinet were there. ") * 2


@pytest.fixture(scope="module")
def dense():
    model = mha_viz.load_model("minilm", device="cpu")
    run = mha_viz.analyze(model, TEXT)
    return run, head_table(run)


@pytest.fixture(scope="module")
def scanned():
    at = open_with_text("whole_text", TEXT)
    assert "Scan all" in at.button(key=keys.SCAN_GO).label
    at.button(key=keys.SCAN_GO).click().run()
    assert not at.exception and not at.error
    return at


def test_the_statistics_are_the_dense_runs(scanned, dense):
    run, table = dense
    at = scanned
    top = frame(at, "pattern")
    metric = top.columns[2]
    want = table.sort_values(metric, ascending=False, kind="stable").head(10)
    assert len(top) == 10
    np.testing.assert_allclose(top[metric].to_numpy(float), want[metric].to_numpy(float), atol=1e-5)
    # the scan's heads in the dense ranking, up to heads within the 1e-5 the two computations round apart
    # (two values, each moved by up to 1e-5: twice that between them)
    heads = run.num_heads
    assert_same_ranking(top["layer"] * heads + top["head"], want["layer"] * heads + want["head"],
                        table[metric].to_numpy(float), 2e-5, metric)
    at.selectbox(key=keys.SCAN_METRIC).set_value("prev").run()
    top = frame(at, "pattern")
    assert top.columns[2] == "prev"
    np.testing.assert_allclose(top["prev"].to_numpy(float), np.sort(table["prev"].to_numpy(float))[::-1][:10],
                               atol=1e-5)
    kinds = [c["data"][0]["type"] for c in charts(at)]
    assert kinds.count("heatmap") >= 1 and kinds.count("image") >= 2 and kinds.count("bar") >= 2, kinds


def test_one_heads_kept_keys_are_the_dense_heaviest(scanned, dense):
    run, _ = dense
    at = scanned
    at.selectbox(key=keys.SCAN_LAYER).set_value(3).run()
    at.selectbox(key=keys.SCAN_HEAD).set_value(5).run()
    at.number_input(key=keys.SCAN_QUERY).set_value(12).run()
    assert not at.exception
    links = frame(at, "weight")  # the query's kept keys (the heaviest links of the text come after)
    row = run.attentions[3, 5, 12]
    heaviest = np.sort(row)[::-1][:len(links)]
    np.testing.assert_allclose(links["weight"].to_numpy(float), heaviest, atol=1e-5)
    assert_same_argmax(links["key"].tolist()[0], row, 2e-5, "the heaviest key")  # as the weights, within 1e-5
    assert (links["distance"] == 12 - links["key"]).all()
    assert at.session_state[keys.SEL_HEAD] == 5  # the head the pages share


def test_a_window_of_exact_rows(scanned, dense):
    at = scanned
    at.number_input(key=keys.SCAN_WINDOW_AT).set_value(10).run()
    at.number_input(key=keys.SCAN_WINDOW).set_value(20).run()
    assert not at.exception and not at.error
    assert any("queries and keys 10 … 29" in str(c["layout"]["title"]) for c in charts(at))


def test_a_blank_text_and_a_cancelled_scan_get_messages():
    at = open_with_text("whole_text", TEXT)
    at.session_state[keys.SCAN_RUNNING] = ("stopped",)  # what a run stopped by Cancel leaves
    open_page(at, "whole_text")
    assert any("cancelled" in i.value for i in at.info)
    at.text_area(key="text").input("   ").run()
    open_page(at, "whole_text")
    assert not at.exception and at.info


def test_a_long_sidebar_run_is_scanned_once(monkeypatch):
    """With the sidebar's run long (every run long here), the page shows its scan at once, with no second
    pass: the statistics are the dense run's all the same."""
    text = TEXT + " The end."  # its own text: the server's cache holds TEXT's dense run
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    at = open_with_text("whole_text", text)
    run = at.session_state[keys.CURRENT].full_run
    assert not run.is_dense
    assert list(at.session_state[keys.SCANS].values()) == [run.summary]  # the run's own scan, nothing pressed
    assert not at.exception and not at.error and charts(at)
    table = frame(at, "layer")
    ref = head_table(mha_viz.analyze(mha_viz.load_model("minilm", device="cpu"), text, dense=True))
    np.testing.assert_allclose(table["entropy"].to_numpy(float),
                               ref.set_index(["layer", "head"]).loc[
                                   list(zip(table["layer"], table["head"])), "entropy"].to_numpy(float), atol=1e-5)
