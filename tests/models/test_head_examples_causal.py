"""Head examples on SmolLM2, a causal model with grouped-query attention (9 query heads share 3
key/value heads), against brute force for every one of its 270 heads on 20 documents: each
document run alone through Hugging Face's own eager forward (`output_attentions=True`, the
weights loaded again here by `AutoModelForCausalLM`, not mha-viz's model), and the score of
docs/head-metrics.md ("Head examples") applied by hand in numpy. The finder (batched, padded,
through mha-viz's capture) must keep the same top documents in the same order, with the same
scores and the same query rows, up to ties within the float tolerance of a padded batch against
a document alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz import corpus
from mha_viz.corpus import examples as ex_mod

pytestmark = pytest.mark.model
TOKENS, DOCS, TOP = 24, 20, 10
TOL = 2e-5  # a padded batch against one document, float32


@pytest.fixture(scope="module")
def docs():
    return corpus.read_texts("sample")[:DOCS - 1] + ["It rained."]  # the last too short to score


@pytest.fixture(scope="module")
def examples(smollm2, docs):
    return corpus.head_examples(smollm2, docs, top=TOP, max_tokens=TOKENS, batch_size=8)


@pytest.fixture(scope="module")
def brute(smollm2, docs):
    """Each document's row scores (L, H, n): row_scores[l, h, q] = the largest weight row q gives a
    key 1 … q (NaN for row 0), from one eager forward per document with Hugging Face's own
    attentions."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = smollm2.hf_model.name_or_path  # the bundled GGUF's float32 folder: loaded again here, by HF alone
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    out = []
    for text in docs:
        ids = tokenizer(text, truncation=True, max_length=TOKENS, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            att = model(ids, output_attentions=True).attentions
        a = torch.cat(att).numpy().astype(np.float64)  # (L, H, n, n)
        n = a.shape[-1]
        rows = np.full(a.shape[:3], np.nan)
        for q in range(1, n):
            rows[:, :, q] = a[:, :, q, 1:q + 1].max(-1)
        out.append(rows)
    return out


def _by_hand(rows: np.ndarray) -> np.ndarray:
    """(L, H) document scores from one document's row scores: the rows that count are q ≥ MIN_KEYS
    (a causal row q sees q keys past the first), the score the mean of the TOP_ROWS best; NaN with
    fewer such rows."""
    counted = rows[..., ex_mod.MIN_KEYS:]
    if counted.shape[-1] < ex_mod.TOP_ROWS:
        return np.full(rows.shape[:2], np.nan)
    return np.sort(counted, -1)[..., ::-1][..., :ex_mod.TOP_ROWS].mean(-1)


def test_every_heads_top_documents_queries_and_scores_are_brute_forces(smollm2, examples, brute):
    L, H = smollm2.num_layers, smollm2.num_heads
    assert (L, H, smollm2.num_kv_heads) == (30, 9, 3) and smollm2.is_causal
    scores = np.stack([_by_hand(rows) for rows in brute])  # (docs, L, H)
    scored = np.isfinite(scores[:, 0, 0])
    assert scored.tolist() == [True] * (DOCS - 1) + [False]  # the last is too short (fewer than 7 tokens)
    exact = 0
    for layer in range(L):
        for head in range(H):
            s = scores[:, layer, head]
            want = sorted(np.flatnonzero(scored), key=lambda d: (-s[d], d))[:TOP]
            got = examples.top(layer, head)
            assert len(got) == len(want) == TOP
            exact += [d for d, _ in got] == want
            for j, (doc, score) in enumerate(got):
                where = f"L{layer}H{head}, rank {j}, document {doc}"
                assert score == pytest.approx(s[doc], abs=TOL), where
                assert abs(s[doc] - s[want[j]]) <= TOL, where  # the same document, or one tied with it
                rows = brute[doc][layer, head, ex_mod.MIN_KEYS:]
                query = examples.query(doc, layer, head)
                assert query >= ex_mod.MIN_KEYS, where
                assert rows[query - ex_mod.MIN_KEYS] >= rows.max() - TOL, where  # the best row, or one tied
            assert examples.histogram(layer, head)[1].sum() == scored.sum()
    assert exact >= 0.9 * L * H  # near-ties within TOL are rare: most heads' order is exactly brute force's


def test_the_old_rule_would_have_picked_the_first_rows_on_l0h0(brute):
    """What the test above guards against, on this corpus: with every row past the first counted
    (the old max activation), L0H0's best row is one that sees fewer than MIN_KEYS keys in most
    documents, so a finder that counted those rows would fail the test above there."""
    early = [int(np.nanargmax(rows[0, 0])) < ex_mod.MIN_KEYS for rows in brute]
    assert np.mean(early) >= 0.5
