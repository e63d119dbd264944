"""The HTML report of the bundled MiniLM (6 layers × 12 heads) at 128 tokens, with four heads and
the metrics table, stays within its 5 MB budget; its raw-data file round-trips."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.capture import run_file
from mha_viz.capture.run import AttentionRun
from mha_viz.export import report
from mha_viz.metrics.head_stats import head_table

BUDGET_BYTES = 5 * 10**6
TEXT = ("Attention heads look at tokens; some look back, some look at the start, and some follow "
        "the words they saw before. ") * 12


@pytest.fixture(scope="module")
def run(minilm):
    run = mha_viz.analyze(minilm, TEXT, max_tokens=128)
    assert run.n == 128 and run.truncated
    return run


@pytest.mark.model
def test_report_within_budget(run):
    data = report.report_bytes(run, heads=[(0, 0), (2, 5), (4, 11), (5, 3)], table=head_table(run),
                               facts={"layers": 6, "heads": 12, "d_model": 384, "device": "cpu"})
    print(f"\nreport: minilm, 128 tokens, 4 heads + table: {len(data):,} bytes "
          f"(plotly.js packed: {len(report.plotly_js_gzip_b64()):,})")
    assert len(data) <= BUDGET_BYTES
    assert data.count(b'class="plot"') == 5


@pytest.mark.model
def test_run_file_round_trip_and_sizes(run):
    full, half = run_file.to_bytes(run), run_file.to_bytes(run, float16=True)
    print(f"\nrun file: minilm, 128 tokens: float32 {len(full):,} bytes, float16 {len(half):,} bytes")
    back = AttentionRun.load(full)
    np.testing.assert_array_equal(back.attentions, run.attentions)
    np.testing.assert_array_equal(back.head_outputs, run.head_outputs)
    assert (back.tokens, back.token_ids, back.text) == (run.tokens, run.token_ids, run.text)
    assert len(half) < len(full)
