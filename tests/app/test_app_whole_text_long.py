"""The Whole text page at length (AppTest, SmolLM2 on 667 tokens while the views read 64): one click on the
Model view's button opens the page with the scan done; the pane opens on a head and a query that keep keys
(and follows the head while no query was picked: a head whose last query keeps none opens on one that
does); the exact row of the pane's query covers every key, bars of two keys each, against the dense
attention of that layer (`analyze`), within 1e-5, and zoomed in every key is its own bar. A long paste's
estimated count is the same on the Model view (the views' cap) and the Whole text page (the model's context)."""

from __future__ import annotations

import re
from importlib import resources

import numpy as np
import pytest

import mha_viz
from mha_viz.scan.opening import kept_counts, opening_head, opening_query
from mha_viz.ui import keys
from tests.app.helpers import PAGE_IDS, chart_title, charts, frame, start_app
from tests.helpers import HEADINGS
from tests.text_samples import docs_prose

pytestmark = pytest.mark.model
SAMPLE = resources.files("mha_viz.corpus").joinpath("sample.txt").read_text(encoding="utf-8")
# 667 tokens; it ends in a word cut short, where layer 0, head 1's last query keeps no key of weight ≥ 0.005
TEXT = SAMPLE[:2600] + "\n\nThe read-out is fo"
VIEWS = 64  # the sidebar's token limit: the views read these, the Whole text page all of them


@pytest.fixture(scope="module")
def clicked():
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("smollm2").run()
    at.number_input(key=keys.TOKEN_LIMIT).set_value(VIEWS).run()
    at.text_area(key=keys.TEXT).input(TEXT).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "model_view" in PAGE_IDS and at.title[0].value == HEADINGS["model_view"]
    button = at.button(key=keys.WHOLE_TEXT_OPEN)
    assert button.label.startswith("Scan all ") and "Whole text" in button.label
    button.click().run()  # the one click
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    return at


def _scan(at):
    (scan,) = at.session_state[keys.SCANS].values()
    return scan


def _tables(at) -> list:
    """The tables of keys: the pane's query's kept keys (when it keeps any), then the exact row's heaviest."""
    return [d.value for d in at.dataframe if list(d.value.columns) == ["key", "token", "weight", "distance"]]


def _pane(at, scan) -> tuple[int, int, int]:
    row = int(at.selectbox(key=keys.SCAN_LAYER).value)
    return row, int(at.selectbox(key=keys.SCAN_HEAD).value), int(at.number_input(key=keys.SCAN_QUERY).value)


def test_one_click_opens_the_whole_text_page_with_the_scan_done(clicked):
    at = clicked
    assert at.title[0].value == HEADINGS["whole_text"]
    scan = _scan(at)
    assert scan.n > 600 and scan.model_name == "smollm2"
    assert not [b for b in at.button if b.key == keys.SCAN_GO]  # no second click asked for
    assert len(frame(at, "pattern")) == 10  # the statistics are on the page
    assert keys.SCAN_START not in at.session_state  # asked once


def test_the_pane_opens_on_a_head_and_query_that_keep_keys(clicked):
    at = clicked
    scan = _scan(at)
    row, head, query = _pane(at, scan)
    assert (row, head) == opening_head(scan)  # no head chosen in this session: the scan's choice
    assert kept_counts(scan, row, head)[query] >= 1 and query == opening_query(scan, row, head)
    links, _exact = _tables(at)  # the query's kept keys, then the row's heaviest keys
    assert len(links) == kept_counts(scan, row, head)[query] >= 1 and (links["key"] > 0).any()
    assert any(f"keeps {len(links)} key" in m.value for m in at.markdown)
    # a head whose last query keeps nothing (the old default query): the pane follows to one that keeps keys
    assert kept_counts(scan, 0, 1)[-1] == 0  # the planted case this text makes
    at.selectbox(key=keys.SCAN_LAYER).set_value(0).run()
    at.selectbox(key=keys.SCAN_HEAD).set_value(1).run()
    assert not at.exception
    row, head, query = _pane(at, scan)
    assert (row, head) == (0, 1) and query < scan.n - 1 and kept_counts(scan, 0, 1)[query] >= 1
    assert len(_tables(at)) == 2 and len(_tables(at)[0]) >= 1
    # a query the user picks stays, even one that keeps nothing: then the page says why
    at.number_input(key=keys.SCAN_QUERY).set_value(scan.n - 1).run()
    at.selectbox(key=keys.SCAN_HEAD).set_value(2).run()
    assert _pane(at, scan)[2] == scan.n - 1
    at.selectbox(key=keys.SCAN_HEAD).set_value(1).run()
    assert any("spread thin" in c.value for c in at.caption) and len(_tables(at)) == 1


def _row_chart(at, query: int) -> dict:
    return next(c for c in charts(at) if f": query {query} " in chart_title(c) and "exact weights" in chart_title(c))


def test_the_exact_row_covers_every_key_against_the_dense_run(clicked):
    at = clicked
    scan = _scan(at)
    at.selectbox(key=keys.SCAN_LAYER).set_value(11).run()
    at.selectbox(key=keys.SCAN_HEAD).set_value(1).run()
    query = scan.n - 40
    at.number_input(key=keys.SCAN_QUERY).set_value(query).run()
    assert not at.exception and not at.error
    model = mha_viz.load_model("smollm2", device="cpu")
    dense = mha_viz.analyze(model, TEXT, layers=[scan.layer_ids[11]])  # the independent dense computation
    assert dense.n == scan.n
    want = dense.attentions[0, 1, query].astype(np.float64)
    assert abs(want.sum() - 1) < 1e-5
    bar = _row_chart(at, query)["data"][0]
    starts, widths = np.asarray(bar["x"]), np.asarray(bar["width"])
    peaks, mass = np.asarray(bar["y"]), np.asarray(bar["customdata"])[:, 1]
    assert starts[0] == 0 and starts[-1] + widths[-1] == scan.n  # every key …
    assert np.array_equal(starts[1:], starts[:-1] + widths[:-1])  # … in one bar
    assert widths.max() == 2  # 667 keys in at most 600 bars
    assert abs(mass.sum() - 1) < 1e-5 and abs(mass.sum() - want.sum()) < 1e-5
    dense_peaks = [want[a:a + w].max() for a, w in zip(starts, widths)]
    np.testing.assert_allclose(peaks, dense_peaks, atol=1e-5)
    np.testing.assert_allclose(mass, [want[a:a + w].sum() for a, w in zip(starts, widths)], atol=1e-5)
    heaviest = _tables(at)[-1]  # the row's heaviest keys, exactly
    assert len(heaviest) == 10
    np.testing.assert_allclose(heaviest["weight"], np.sort(want)[::-1][:10], atol=1e-5)
    # zoomed in on 100 keys: each its own bar
    at.slider(key=keys.SCAN_ROW_KEYS).set_value((query - 99, query)).run()
    bar = _row_chart(at, query)["data"][0]
    assert np.asarray(bar["width"]).max() == 1 and len(bar["x"]) == 100
    np.testing.assert_allclose(bar["y"], want[query - 99:query + 1], atol=1e-5)


def test_a_long_pastes_estimate_is_the_same_on_both_pages():
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("smollm2").run()
    at.number_input(key=keys.TOKEN_LIMIT).set_value(VIEWS).run()
    at.text_area(key=keys.TEXT).input(docs_prose(200_000)).run()  # "about 62,900" here, "about 63,100" there
    assert not at.exception
    [views] = [m[1] for w in at.warning if (m := re.search(r"The text has about ([\d,]+) tokens", w.value))]
    at.session_state[keys.GOTO] = "whole_text"
    at.run()
    assert at.title[0].value == HEADINGS["whole_text"] and not at.exception
    [whole] = [m[1] for c in at.caption if (m := re.search(r"tokens of about ([\d,]+) ", c.value))]
    assert whole == views, (whole, views)
