"""The Model view, Head metrics, Token focus and the sidebar's Export box on a long run (MHA_VIZ_DENSE_MB=0:
every analysis keeps each layer's input and recomputes rows) open without an error while building every
head's array is forbidden (`forbid_dense`): they read the scan's thumbnails and table, one row a layer and
one head's column; the Export box offers the analysis's own file instead of every head's attention."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz.capture import head_rows
from mha_viz.export import shared_controls
from mha_viz.ui.kit import keys
from mha_viz.views import detail
from tests.app.helpers import charts, export_box, open_page, open_with_text

pytestmark = pytest.mark.model
TEXT = "The animal didn't cross the street because it was too tired. It slept there all day long."


def _downloads(at) -> dict[str, bool]:
    return {b.proto.label: b.proto.disabled for b in at.get("download_button")}


def test_the_overview_pages_open_on_a_long_run_without_every_head(monkeypatch):
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    with head_rows.forbid_dense():
        at = export_box(open_with_text("model_view", TEXT))  # no exception, no error; the Export box open
        run = at.session_state[keys.CURRENT].run
        assert run.summary is not None and not run.is_dense
        for page in ("model_view", "head_metrics", "focus"):
            if page != "model_view":
                open_page(at, page)
            assert not (at.exception or at.error or at.warning), (page, at.exception, at.error, at.warning)
            shown = _downloads(at)  # the Export box: the analysis's own file, and the report
            assert shown.get("Analysis data (.npz)") is False and shown.get("HTML report") is False, (page, shown)
            assert "Attention data (.npz)" not in shown
        assert any("heaviest keys" in c.value for c in at.caption)  # Token focus says what its column counts
        assert not run.is_dense
    grid = [c for c in charts(at) if c["layout"].get("title", {}).get("text", "").startswith("Every head: what")]
    assert len(grid) == 2  # attends to, attended by
    index = at.selectbox(key=shared_controls.FOCUS_TOKEN).value
    to = np.array(grid[0]["data"][0]["z"], dtype=float)
    np.testing.assert_allclose(to, run.attentions[:, :, index, :].reshape(to.shape), atol=1e-5)
    np.testing.assert_allclose(run.summary.pooled, detail.max_pool(run.attentions, 48), atol=1e-5)
