"""The Head view's *Links* section (AppTest), what the Whole text page showed, now on any run: on a long run
(MHA_VIZ_DENSE_MB=0, under `forbid_dense`) the token strip, the query's kept keys, the heaviest links and the
distance histogram are those of the dense run of the same text (keys up to ties, weights within 1e-5); the query
opens on one that keeps keys, and its exact row covers every key against the dense attention of that layer; Head
metrics lists the 10 heads highest on its measure; an old link to the retired Whole text page opens the Head
view."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest
from streamlit.util import calc_hash

import mha_viz
from mha_viz.capture.head_rows import forbid_dense
from mha_viz.features.head_metrics import controls as head_metrics_keys
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.metrics import head_table
from mha_viz.scan.opening import kept_counts, opening_query
from mha_viz.ui.kit import keys
from mha_viz.views import head_links
from tests.app.helpers import chart_title, charts, open_box, open_page, start_app
from tests.helpers import HEADINGS

pytestmark = pytest.mark.model
TEXT = ("The keys to the old wooden cabinet are missing again, said Mary. John looked in the hall, "
        "and the keys to the old wooden cabinet were there. ") * 2
LAYER, HEAD, QUERY = 3, 5, 12
SAMPLE = resources.files("mha_viz.corpus").joinpath("sample.txt").read_text(encoding="utf-8")
# 667 SmolLM2 tokens; it ends in a word cut short, where layer 0, head 1's last query keeps no key of weight ≥ 0.005
LONG_TEXT = SAMPLE[:2600] + "\n\nThe read-out is fo"


def clean(at) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert not at.warning, [w.value for w in at.warning]  # a dense array refused would be one


def head_view(model: str, text: str, cap: int, layer: int, head: int, query: int | None = None):
    """The Head view of `text` at the token limit `cap` on head (layer, head), with `query` picked."""
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
    at.number_input(key=keys.TOKEN_LIMIT).set_value(cap).run()
    at.text_area(key=keys.TEXT).input(text).run()
    open_page(at, "head_view")
    # closed, the section is neither computed nor sent
    assert head_view_keys.LINKS_QUERY not in [n.key for n in at.number_input]
    open_box(at, keys.LINKS_OPEN)
    at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(layer).run()
    at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(head).run()
    if query is not None:
        at.number_input(key=head_view_keys.LINKS_QUERY).set_value(query).run()
    clean(at)
    return at


def key_tables(at) -> list:
    """The tables of keys: the query's kept keys (when it keeps any), then the exact row's heaviest."""
    return [d.value for d in at.dataframe if list(d.value.columns) == ["key", "token", "weight", "distance"]]


def heaviest(at):
    return next(d.value for d in at.dataframe if "key token" in d.value.columns)


def chart(at, words: str) -> dict:
    return next(c for c in charts(at) if words in chart_title(c))


def test_a_long_runs_links_on_the_head_view_are_the_dense_runs(monkeypatch):
    dense_at = head_view("minilm", TEXT, 512, LAYER, HEAD, QUERY)  # the caps differ: two runs in the cache
    dense = dense_at.session_state[keys.CURRENT].run
    assert dense.is_dense
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with forbid_dense():
        long_at = head_view("minilm", TEXT, 500, LAYER, HEAD, QUERY)
        long = long_at.session_state[keys.CURRENT].run
        assert not long.is_dense and long.tokens == dense.tokens
    row = dense.attentions[LAYER, HEAD, QUERY]
    for at in (dense_at, long_at):
        kept = key_tables(at)[0]
        assert len(kept) >= 1 and (kept["distance"] == QUERY - kept["key"]).all()
        np.testing.assert_allclose(kept["weight"], np.sort(row)[::-1][:len(kept)], atol=1e-5)
        np.testing.assert_allclose(row[kept["key"].to_numpy()], kept["weight"], atol=1e-5)  # its keys: up to ties
        assert any(f"query {QUERY} over all {dense.n} keys" in m.value for m in at.markdown)
    want = head_links.links(dense, LAYER, HEAD)
    for at in (dense_at, long_at):
        strip = chart(at, "each one's heaviest key")["data"][0]
        np.testing.assert_allclose(strip["y"], want.weights[:len(strip["y"]), 0], atol=1e-5)
        table = heaviest(at)
        np.testing.assert_allclose(table["weight"], np.sort(want.weights.ravel())[::-1][:len(table)], atol=1e-5)
        np.testing.assert_allclose(dense.attentions[LAYER, HEAD][table["query"], table["key"]], table["weight"],
                                   atol=1e-5)
    np.testing.assert_allclose(chart(long_at, "how far its kept links reach")["data"][0]["y"],
                               chart(dense_at, "how far its kept links reach")["data"][0]["y"], atol=1e-5)
    with forbid_dense():  # Head metrics: the 10 heads highest on the measure, the dense table's
        open_page(long_at, "head_metrics")
        clean(long_at)
    metric = long_at.selectbox(key=head_metrics_keys.METRIC_CHOICE).value
    top = long_at.dataframe[-1].value
    assert list(top.columns) == ["layer", "head", metric, "pattern"]
    np.testing.assert_allclose(top[metric], np.sort(head_table(dense)[metric].to_numpy(float))[::-1][:10], atol=1e-5)


def test_the_query_keeps_keys_and_its_exact_row_covers_every_key(monkeypatch):
    """SmolLM2 on 667 tokens, a long run: the query opens on one that keeps keys and follows the head while no
    query was picked (a head whose last query keeps none opens on one that does); a query the user picks stays;
    the exact row covers every key, bars of two keys each, against the dense attention of that layer."""
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with forbid_dense():
        at = head_view("smollm2", LONG_TEXT, 1024, 0, 1)
        run = at.session_state[keys.CURRENT].run
        assert not run.is_dense and run.n > 600
        scan = run.summary
        assert kept_counts(scan, 0, 1)[-1] == 0  # the planted case this text makes
        query = int(at.number_input(key=head_view_keys.LINKS_QUERY).value)
        assert query == opening_query(scan, 0, 1) < run.n - 1 and kept_counts(scan, 0, 1)[query] >= 1
        kept, _exact = key_tables(at)
        assert len(kept) == kept_counts(scan, 0, 1)[query]
        at.number_input(key=head_view_keys.LINKS_QUERY).set_value(run.n - 1).run()  # the user's pick stays, says why
        at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(2).run()
        at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(1).run()
        assert int(at.number_input(key=head_view_keys.LINKS_QUERY).value) == run.n - 1
        assert any("spread thin" in c.value for c in at.caption) and len(key_tables(at)) == 1
        at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(11).run()
        query = run.n - 40
        at.number_input(key=head_view_keys.LINKS_QUERY).set_value(query).run()
        clean(at)
    model = mha_viz.load_model("smollm2", device="cpu")
    dense = mha_viz.analyze(model, LONG_TEXT, layers=[run.layer_ids[11]])  # the independent dense computation
    assert dense.n == run.n
    want = dense.attentions[0, 1, query].astype(np.float64)
    bar = chart(at, f": query {query} ")["data"][0]
    starts, widths = np.asarray(bar["x"]), np.asarray(bar["width"])
    peaks, mass = np.asarray(bar["y"]), np.asarray(bar["customdata"])[:, 1]
    assert starts[0] == 0 and starts[-1] + widths[-1] == run.n and np.array_equal(starts[1:], starts[:-1] + widths[:-1])
    assert widths.max() == 2  # 667 keys in at most 600 bars
    np.testing.assert_allclose(peaks, [want[a:a + w].max() for a, w in zip(starts, widths)], atol=1e-5)
    np.testing.assert_allclose(mass, [want[a:a + w].sum() for a, w in zip(starts, widths)], atol=1e-5)
    np.testing.assert_allclose(key_tables(at)[-1]["weight"], np.sort(want)[::-1][:10], atol=1e-5)
    with forbid_dense():
        # zoomed in: each key its own bar
        at.slider(key=head_view_keys.LINKS_ROW_KEYS).set_value((query - 99, query)).run()
    bar = chart(at, f": query {query} ")["data"][0]
    assert np.asarray(bar["width"]).max() == 1 and len(bar["x"]) == 100
    np.testing.assert_allclose(bar["y"], want[query - 99:query + 1], atol=1e-5)


def test_an_old_link_to_the_whole_text_page_opens_the_head_view():
    at = start_app()
    at.text_area(key=keys.TEXT).input(TEXT).run()
    at._page_hash = calc_hash("whole_text")  # noqa: SLF001 - what a browser's /whole_text resolves to
    at.run()
    assert not at.exception and at.title[0].value == HEADINGS["head_view"]
    assert any("each one's heaviest key" in chart_title(c) for c in charts(at))
    at.session_state[keys.GOTO] = "whole_text"  # a lesson step or a view naming the retired page
    at.run()
    assert not at.exception and at.title[0].value == HEADINGS["head_view"]
