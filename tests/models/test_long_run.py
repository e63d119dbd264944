"""A long run (`analyze` above MHA_VIZ_DENSE_MB: no every-head array, rows recomputed on demand) against the
dense run of the same text, where that fits: its rows, a layer's rows, a column, a head's blocks, its head
table and every head built on demand equal the dense ones within 1e-5 (issue 52's fidelity, at 600–700
tokens), for a family our MHA recomputes and for one read through its own attention one layer at a time.
Every head's array is built only when asked for, refused over the capture budget with the length that
fits, and never under `forbid_dense`."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.capture import head_rows
from mha_viz.metrics import head_table
from mha_viz.scan import rows as scan_rows
from tests.helpers import ROOT
from tests.models import architectures_2026
from tests.models.long_pairs import assert_same_rows, assert_same_table, load

pytestmark = pytest.mark.model
TEXT = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()
N = 640


@pytest.fixture(scope="module", params=["minilm", "smollm2-6", "deberta"])
def runs(request, tmp_path_factory):
    """(model, dense run, long run) of the same N tokens."""
    name = request.param
    if name == "deberta":  # our MHA cannot compute it: its rows come from its own attention, a layer at a time
        model = mha_viz.load_model(architectures_2026.build(name, tmp_path_factory.mktemp(name)), device="cpu")
    else:
        model = load(name)  # SmolLM2 as its first six layers (tests/first_layers.py)
    cap = min(N, model.max_positions)
    return model, mha_viz.analyze(model, TEXT, max_tokens=cap, dense=True), mha_viz.analyze(
        model, TEXT, max_tokens=cap, dense=False)


def test_a_long_runs_rows_are_the_dense_runs(runs):
    model, dense, long = runs
    assert dense.is_dense and not long.is_dense and long.summary is not None
    assert long.tokens == dense.tokens and long.token_ids == dense.token_ids and long.n == dense.n > 100
    assert (long.num_layers, long.num_heads, long.layer_ids) == (dense.num_layers, dense.num_heads, dense.layer_ids)
    assert_same_rows(long, dense)


def test_a_dense_runs_rows_are_views_of_its_array(runs):
    _model, dense, _long = runs
    assert np.shares_memory(dense.rows(1, 2, 3, 9), dense.attentions)
    np.testing.assert_array_equal(dense.layer_rows(1, 3, 9), dense.attentions[1, :, 3:9])
    np.testing.assert_array_equal(dense.column(1, 2, 4), dense.attentions[1, 2, :, 4])


def test_a_long_runs_head_table_is_the_dense_runs(runs):
    model, dense, long = runs  # the output measures too, where the scan made each layer's output
    assert_same_table(long.summary.table, head_table(dense, model.head_weights() if model.has_head_outputs else None))


def test_a_long_runs_head_outputs_are_the_dense_runs(runs):
    """z of a window of rows, recomputed from the long run's spilled queries, keys and values, against the eager
    forward's own (read at W_O's input); a family read through its own attention keeps none, and says so."""
    model, dense, long = runs
    if not model.can_recompute:
        with pytest.raises(ValueError, match="not kept"):
            long.outputs(1, 1, 0, 4)
        return
    for layer, head, start, stop in ((0, 0, 0, 40), (1, model.num_heads - 1, 300, 420), (long.num_layers - 1, 2,
                                                                                         long.n - 7, long.n)):
        np.testing.assert_allclose(long.outputs(layer, head, start, stop), dense.head_outputs[layer, head, start:stop],
                                   atol=1e-5, rtol=1e-4, err_msg=f"({layer}, {head})")
    np.testing.assert_array_equal(dense.outputs(1, 2, 5, 9), dense.head_outputs[1, 2, 5:9])


def _narrow_spans(run, layer: int, head: int) -> list[tuple[int, int, int, int]]:
    """(first row, last row + 1, k0, k1) of the blocks of one head's `spans` that span fewer than every key."""
    return [(first, first + part.shape[1], k0, k0 + part.shape[-1])
            for first, k0, part in run.spans(layer, [head], 0, run.n) if part.shape[-1] < run.n]


def test_whole_head_reads_stream_blocks_over_only_their_keys(runs, monkeypatch):
    """Blocks of 48 rows: a causal head's blocks end at their last row's key (neither widened nor copied) and its
    column and pooled head, read from them, are the dense run's; an encoder's blocks span every key."""
    model, dense, long = runs
    monkeypatch.setattr(scan_rows, "CPU_BLOCK_BYTES", 4 * 48 * long.n)  # one head: 48 rows a block
    narrow = _narrow_spans(long, 1, 2)
    if model.is_causal and model.can_recompute:
        assert len(narrow) == -(-long.n // 48) - 1 and all(k0 == 0 and k1 == last for _f, last, k0, k1 in narrow)
    else:
        assert not narrow
    assert_same_rows(long, dense)


def test_a_sliding_windows_blocks_start_at_its_window(tmp_path, monkeypatch):
    """GPT-OSS (sliding windows of 8 keys on some layers, a sink logit on every head): blocks of 16 rows of a
    windowed layer span only the keys their window shows, and every read of the long run, a whole head's included,
    is the dense run's."""
    model = mha_viz.load_model(architectures_2026.build("gpt_oss", tmp_path / "gpt_oss"), device="cpu")
    dense = mha_viz.analyze(model, TEXT[:1500], dense=True)
    long = mha_viz.analyze(model, TEXT[:1500], dense=False)
    monkeypatch.setattr(scan_rows, "CPU_BLOCK_BYTES", 4 * 16 * long.n)
    window = architectures_2026.WINDOW
    narrow = _narrow_spans(long, 0, 1)
    assert len(narrow) == -(-long.n // 16)  # every block: its window, within its last row
    assert all(k0 == max(0, first - window + 1) and k1 == last for first, last, k0, k1 in narrow)
    assert_same_rows(long, dense)


def test_every_head_is_built_only_when_asked_for(runs, monkeypatch):
    _model, dense, long = runs
    fresh = mha_viz.AttentionRun(tokens=long.tokens, source=long.source, shape=(long.num_layers, long.num_heads),
                                 is_causal=long.is_causal, model_name=long.model_name)
    with head_rows.forbid_dense(), pytest.raises(AssertionError, match="forbid_dense"):
        fresh.attentions
    L, H = fresh.num_layers, fresh.num_heads
    budget = 4 * L * H * 100 * 100  # every head of 100 tokens
    monkeypatch.setattr("mha_viz.budget.capture_budget.capture_budget", lambda: budget)
    with pytest.raises(head_rows.DenseRefused, match="at most 100 tokens of this model"):
        fresh.attentions
    assert not fresh.is_dense
    monkeypatch.undo()
    np.testing.assert_allclose(fresh.attentions, dense.attentions, atol=1e-5)
    assert fresh.is_dense and not fresh.attentions.flags.writeable


def test_analyze_keeps_rows_above_the_setting(monkeypatch):
    model = mha_viz.load_model("toy-induction")
    text = "a b c d e f a b c d e f"
    n = mha_viz.tokenize(model, text).n
    whole = head_rows.every_head_bytes(model.num_layers, model.num_heads, n)
    monkeypatch.setattr("mha_viz.settings.Settings.dense_bytes", property(lambda self: whole - 1))
    assert not mha_viz.analyze(model, text).is_dense
    assert mha_viz.analyze(model, text, layers=[0]).is_dense  # some layers: always dense
    assert mha_viz.analyze(model, text, dense=True).is_dense
    monkeypatch.setattr("mha_viz.settings.Settings.dense_bytes", property(lambda self: whole))
    assert mha_viz.analyze(model, text).is_dense
    assert not mha_viz.analyze(model, text, dense=False).is_dense
    with pytest.raises(mha_viz.InputError, match="keeps every layer"):
        mha_viz.analyze(model, text, dense=False, layers=[0])


def test_a_long_run_saves_as_a_dense_file_and_reopens(runs, tmp_path):
    _model, dense, long = runs
    if long.num_layers * long.num_heads * long.n ** 2 > 2**26:
        pytest.skip("every head of this run is large")
    long.save(tmp_path / "run.npz")
    back = mha_viz.AttentionRun.load(tmp_path / "run.npz")
    assert back.is_dense and back.tokens == dense.tokens
    np.testing.assert_allclose(back.attentions, dense.attentions, atol=1e-5)


def test_the_public_grid_of_a_long_run_is_the_dense_runs(runs):
    from mha_viz.drawing import heads as head_figures
    _model, dense, long = runs
    with head_rows.forbid_dense():
        canvas, t, gap = head_figures.grid_canvas(long)
    ref, t_ref, gap_ref = head_figures.grid_canvas(dense)
    assert (t, gap) == (t_ref, gap_ref)
    np.testing.assert_allclose(canvas, ref, atol=1e-5)  # NaN between tiles in both


def test_the_first_layers_model_is_smollm2s_own_first_layers():
    """The tests' "smollm2-6" (tests/first_layers.py) is SmolLM2 cut, not another model: its heads, its grouped
    keys and values, and each of its layers' attention equal SmolLM2's first six layers' on the same text."""
    short, whole = load("smollm2-6"), mha_viz.load_model("smollm2", device="cpu")
    assert (short.num_layers, whole.num_layers) == (6, 30) and short.is_causal
    assert (short.num_heads, short.num_kv_heads, short.d_k) == (whole.num_heads, whole.num_kv_heads, whole.d_k)
    cut, full = mha_viz.analyze(short, TEXT, max_tokens=48), mha_viz.analyze(whole, TEXT, max_tokens=48)
    assert cut.tokens == full.tokens
    np.testing.assert_allclose(cut.attentions, full.attentions[:6], atol=1e-5)
