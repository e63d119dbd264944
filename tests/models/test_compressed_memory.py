"""DeepSeek-V4's compressed memory (issue 89), a random-init model saved to a folder and loaded as a user's: its
compressed layers spread each query's softmax over the tokens, over entries that each compress a window of tokens,
and over a learned sink per head (it was refused). The capture equals Hugging Face's eager forward on both parts, the
entries' windows and visibility are those worked out by hand from the compression rates, the compressed sparse
layer's indexer keeps at most `index_topk` of them per row, and each row's split among tokens, entries and sink is
checked by planting a sink that takes everything and one that takes nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import metrics
from mha_viz.capture import memory_columns, sinks
from tests.models import architectures_2026 as arch

pytestmark = pytest.mark.model

CSA, HCA = "compressed_sparse_attention", "heavily_compressed_attention"
RATES, TOP_K, KINDS = arch.V4_RATES, arch.V4_TOP_K, arch.V4_KINDS
TEXT = arch.V4_TEXT


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return mha_viz.load_model(arch.build_deepseek_v4(tmp_path_factory.mktemp("v4")), device="cpu")


def _windows(kind: str, n: int) -> np.ndarray:
    """Each entry's (first token, one past the last), worked out from the rate: a heavily compressed entry w holds
    window w, a compressed sparse one windows w − 1 and w."""
    rate = RATES[kind]
    return np.array([[max(0, (w - (kind == CSA)) * rate), (w + 1) * rate] for w in range(n // rate)]).reshape(-1, 2)


def test_it_loads_and_both_parts_of_each_row_equal_hugging_face(model):
    """Loaded with every head's attention (its heads' outputs said not read, naming the grouped projection); each
    layer's capture is Hugging Face's eager rows, the tokens' part in `attentions` and the entries' in `memory`."""
    assert not model.has_head_outputs and "grouped low-rank output projection" in model.unread
    assert "compressed memory entries" in model.stand_in
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    n = ids.shape[1]
    assert n > 2 * RATES[HCA]
    cap = model.capture(ids)
    with torch.inference_mode():
        own = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False).attentions
    for layer, (kind, theirs) in enumerate(zip(KINDS, own)):
        entries = 0 if kind == "sliding_attention" else n // RATES[kind]
        assert theirs.shape[-1] == n + entries
        mine = cap.attentions[layer] if cap.memory[layer] is None else torch.cat(
            [cap.attentions[layer], cap.memory[layer]], -1)
        torch.testing.assert_close(mine.float(), theirs.float(), atol=1e-5, rtol=0)
        assert (cap.memory[layer] is None) == (entries == 0)


def test_the_entries_windows_visibility_and_the_indexers_picks(model):
    """Each entry's window as worked out by hand; no query gives weight to an entry before its window closes; a
    heavily compressed layer's query that sees an entry gives it weight; a compressed sparse row keeps at most
    TOP_K entries."""
    run = mha_viz.analyze(model, TEXT)
    n = run.n
    assert run.memory is not None and run.memory.layers == (1, 2, 3)
    for layer in (1, 2, 3):
        found = memory_columns.of(run, layer)
        kind = KINDS[layer]
        np.testing.assert_array_equal(found.spans, _windows(kind, n))
        assert found.labels[0] == f"▤ 0–{_windows(kind, n)[0, 1] - 1}"
        last = found.spans[:, 1] - 1
        unseen = np.arange(n)[:, None] < last[None, :]  # (n, C): the entry's window has not closed yet
        assert (found.weights[:, unseen] == 0).all()
        seen = found.weights[:, ~unseen]
        if kind == HCA:
            assert (seen > 0).all()
        else:
            assert ((found.weights > 0).sum(-1) <= TOP_K).all() and ((found.weights > 0).sum(-1) == TOP_K).any()
    assert memory_columns.of(run, 0) is None  # the sliding layer has no entries


def test_each_rows_split_with_sinks_planted_to_take_all_and_nothing(model):
    """tokens + entries + sink = 1 on every row; a head whose sink logit is planted far above every score gives the
    sink its rows, one planted far below gives it nothing (its tokens and entries then sum to 1); the table's means
    are the rows'; hiding tokens lets the entries go."""
    modules = [m for m in model.hf_model.modules() if type(m).__name__ == "DeepseekV4Attention"]
    kept = [m.sinks.detach().clone() for m in modules]
    try:
        with torch.no_grad():
            modules[1].sinks[0], modules[1].sinks[1] = 60.0, -60.0
        run = mha_viz.analyze(model, TEXT)
        for layer in range(run.num_layers):
            parts = memory_columns.shares(run, layer)
            assert (parts[0] + parts[1] <= 1 + 1e-5).all()  # tokens and entries leave the sink what they lack
            np.testing.assert_allclose(parts.sum(0), 1.0, atol=1e-5)
        tokens, memory, sink = memory_columns.shares(run, 1)
        assert sink[0].min() > 0.99 and sink[1].max() < 1e-5
        np.testing.assert_allclose(tokens[1] + memory[1], 1.0, atol=1e-5)
        assert memory[1].max() > 0.01  # the entries take part of the row
        table = metrics.memory_split(run)
        row = table[(table["layer"] == 1) & (table["head"] == 1)].iloc[0]
        assert row.kind == "compressed sparse" and row.entries == run.n // RATES[CSA]
        assert row.memory == pytest.approx(memory[1].mean(), abs=1e-6)
        share = sinks.learned_sink_share(run)  # the sink's alone, not the entries'
        assert share[1, 0] > 0.99 and share[1, 1] < 1e-5
        hidden = run.drop_tokens(sinks.hide_mask(run, first=True))
        assert hidden.memory is None and memory_columns.of(hidden, 1) is None
        with pytest.raises(ValueError, match="no compressed memory"):
            metrics.memory_split(hidden)
    finally:
        with torch.no_grad():
            for m, s in zip(modules, kept):
                m.sinks.copy_(s)


def test_a_long_run_keeps_the_token_rows_and_counts_the_entries_with_the_sink(model):
    """A scan reads each layer's rows over the tokens as it runs (the entries are cut off): its rows equal the dense
    run's, and what a row lacks there is the sink's and the entries' together."""
    run = mha_viz.analyze(model, TEXT)
    scan = mha_viz.scan(model, TEXT)
    for layer in range(run.num_layers):
        tokens, memory, sink = memory_columns.shares(run, layer)
        for head in range(run.num_heads):
            np.testing.assert_allclose(scan.rows(layer, head, 0, run.n), run.rows(layer, head), atol=1e-5)
            np.testing.assert_allclose(scan.sink_share(layer, head), memory[head] + sink[head], atol=1e-4)


def test_generation_is_refused_saying_why(model):
    """Step by step, a new token's row runs over its sliding window's cache and the entries made so far, which the
    generation's rows do not place on the text: refused in words (it raised a broadcast error)."""
    from mha_viz.capture.generation import GenerationError

    with pytest.raises(GenerationError, match="compressed memory layers"):
        mha_viz.generate(model, TEXT, max_new_tokens=2)
