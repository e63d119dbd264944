"""The Head view (every level of detail), the Line view and Compare heads on a long run (MHA_VIZ_DENSE_MB=0:
every analysis keeps its rows to recompute, no every-head array) through AppTest, under `forbid_dense`: no
exception, no error, the Head view's strongest keys are the head's own (its rows' argmax), and Compare heads' pairs,
a box opened on demand, are the two heads' own JS divergence."""

from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

from mha_viz import AttentionRun, metrics
from mha_viz.capture.head_rows import forbid_dense
from mha_viz.features.compare_heads import controls as compare_heads_keys
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.features.head_view import page as head_view_page
from mha_viz.features.lines import controls as lines_keys
from mha_viz.ui.kit import head_detail, keys
from mha_viz.views import detail
from tests.app.helpers import chart_title, charts, frame, open_box, open_page, start_app

pytestmark = pytest.mark.model
SAMPLE = resources.files("mha_viz.corpus").joinpath("sample.txt").read_text(encoding="utf-8")
SHOWN = 100  # the strongest-key table's rows, made fewer than the text's tokens
WIDEST = 120  # the widest token window, made narrower than the text
TEXT = "Read once more, slowly: " + SAMPLE[:1300]  # about 300 tokens: past every-token's 256, the lines' 128


def clean(at) -> None:
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]


@pytest.mark.parametrize("model", ["minilm", "smollm2"])
def test_head_view_lines_and_compare_read_only_rows_of_a_long_run(model, monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    monkeypatch.setattr(head_view_page, "TABLE_ROWS", SHOWN)
    monkeypatch.setattr(head_view_page, "WINDOW_MAX", WIDEST)
    with forbid_dense():
        at = start_app()
        at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
        at.text_area(key=keys.TEXT).input(TEXT).run()
        clean(at)
        run = at.session_state[keys.CURRENT].run
        assert not run.is_dense and run.n > 256

        open_page(at, "head_view")
        clean(at)
        options = at.radio(key=keys.HEAD_DETAIL).options
        assert set(options) == {head_detail.FULL, head_detail.WINDOW, head_detail.BLOCKS, head_detail.WORDS,
                                head_detail.SUBSET}
        for option in options:
            at.radio(key=keys.HEAD_DETAIL).set_value(option).run()
            clean(at)
            assert charts(at), option
        at.radio(key=keys.HEAD_DETAIL).set_value(head_detail.WINDOW).run()
        at.slider(key=head_view_keys.HEAD_WINDOW).set_value((run.n - 40, run.n)).run()
        clean(at)
        assert f"tokens {run.n - 40}–{run.n - 1} of {run.n}" in chart_title(charts(at)[0])
        at.slider(key=head_view_keys.HEAD_WINDOW).set_value((10, run.n)).run()  # wider than the widest window drawn
        clean(at)
        assert f"tokens 10–{10 + WIDEST - 1} of {run.n}" in chart_title(charts(at)[0])
        assert f"Window narrowed to its first {WIDEST:,} tokens: 10–{10 + WIDEST - 1}." in " ".join(
            c.value for c in at.caption)
        at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(1).run()
        at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(2).run()
        clean(at)
        table = frame(open_box(at, head_view_keys.STRONGEST_OPEN), "attends most to")  # built only while open
        a = run.head(1, 2)  # one head, rebuilt from its rows: allowed under the guard
        best = a.argmax(axis=1)[:SHOWN]
        assert list(table["query"]) == run.tokens[:SHOWN]  # the first SHOWN queries only, said so
        assert f"The first {SHOWN} of the {run.n} queries." in [c.value for c in at.caption]
        np.testing.assert_allclose(table["weight"].to_numpy(), np.round(a[np.arange(SHOWN), best], 4), atol=2e-4)
        assert list(table["attends most to"]) == [run.tokens[j] for j in best]

        open_page(at, "lines")
        clean(at)
        assert charts(at)[0]["layout"]["meta"]["tokens"] == 128  # a window of the text
        at.slider(key=lines_keys.LINE_WINDOW).set_value((run.n - 30, run.n)).run()
        clean(at)
        assert charts(at)[0]["layout"]["meta"]["start"] == run.n - 30

        open_page(at, "compare_heads")
        clean(at)
        assert len(charts(at)) >= 2 and all(f"{run.n} × {run.n} pixels" in chart_title(c) for c in charts(at))
        monkeypatch.setattr(detail, "MAX_FULL_TOKENS", 200)  # past it, each head whole in blocks
        at.run()
        clean(at)
        assert len(charts(at)) >= 2 and all(f"all {run.n} tokens in" in chart_title(c) for c in charts(at))
        assert not any("heads" in d.value.columns for d in at.dataframe)  # the pairs: a box, closed at first
        pairs = frame(open_box(at, compare_heads_keys.PAIRS_OPEN), "heads")
        clean(at)
        first, last = (0, 0), (run.num_layers - 1, run.num_heads - 1)  # the heads picked by default
        both = AttentionRun.from_array(np.stack([run.head(*first), run.head(*last)])[None], run.tokens,
                                       run.is_causal)  # the two heads whole, compared as a dense run
        js = metrics.head_similarity(both, "js")[0, 1]
        assert len(pairs) == 1 and pairs.iloc[0][metrics.SIMILARITIES["js"].label] == pytest.approx(js, abs=1e-4)
    assert not run.is_dense


def test_a_head_too_faint_to_see_on_the_0_to_1_scale_says_to_rescale():
    """A long text's diffuse head drew an all-but-white chart on the 0..1 scale (found trying the app as a new user):
    the page says so, and what to turn on, exactly where the weights drawn all lie under FAINT, and not once rescaled.
    Planted figures, then the page on a long text, each head's note checked against the weights its chart holds."""
    import plotly.graph_objects as go

    def heat(top: float, zmax: float = 1.0):
        return go.Figure(go.Heatmap(z=[[top, 0.01], [0.0, top / 2]], zmin=0.0, zmax=zmax))
    assert "0.050" in head_view_page.faint_note(heat(0.05))
    assert head_view_page.faint_note(heat(0.9)) is None and head_view_page.faint_note(heat(0.05, zmax=0.05)) is None
    assert head_view_page.faint_note(go.Figure(go.Heatmap(z=[[0.0, 0.0]], zmax=1.0))) is None  # zeros: no more to see
    assert head_view_page.faint_note(heat(0.05, zmax=None)) is None  # a scale of its own
    assert head_view_page.faint_note(go.Figure(go.Heatmap(z=[[np.nan, np.nan]], zmax=1.0))) is None
    at = start_app()
    at.text_area(key="text").input("word " * 600).run()  # cut to 512 tokens: the block view
    open_page(at, "head_view")
    clean(at)
    seen = set()
    for head in range(0, 12, 3):
        at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(head).run()
        clean(at)
        top = max(float(np.nanmax(np.asarray(t["z"], dtype=float))) for t in charts(at)[0]["data"] if "z" in t)
        said = [c.value for c in at.caption if "pale on the 0–1 colour scale" in c.value]
        assert bool(said) == (top < head_view_page.FAINT), (head, top, said)
        seen.add(bool(said))
        if said:
            assert f"{top:.3f}" in said[0]
            at.toggle(key=head_view_keys.HEAD_RESCALE).set_value(True).run()
            assert not [c for c in at.caption if "pale on the 0–1 colour scale" in c.value]
            at.toggle(key=head_view_keys.HEAD_RESCALE).set_value(False).run()
    assert True in seen  # some head of a repeated word is faint (its largest weight well under FAINT)
