"""Head examples on SmolLM2, a causal model with grouped-query attention (9 query heads share 3
key/value heads), against brute force for every one of its 270 heads on 20 documents: each
document run alone through Hugging Face's own eager forward (`output_attentions=True`, the
weights loaded again here by `AutoModelForCausalLM`, not mha-viz's model), and the score of
docs/head-metrics.md ("Head examples") applied by hand in numpy. The finder (batched, padded,
through mha-viz's capture) must keep the same top documents in the same order, with the same
scores, query rows, histograms and decile counts, up to ties (and bins' edges) within the float
tolerance of a padded batch against a document alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz import corpus
from mha_viz.corpus import examples as ex_mod
from tests.helpers import assert_examples_match, document_scores

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


def test_every_heads_top_documents_queries_and_scores_are_brute_forces(smollm2, examples, brute):
    L, H = smollm2.num_layers, smollm2.num_heads
    assert (L, H, smollm2.num_kv_heads) == (30, 9, 3) and smollm2.is_causal
    # the rows that count are q ≥ MIN_KEYS (a causal row q sees q keys past the first)
    counted = [np.where(np.arange(rows.shape[-1]) >= ex_mod.MIN_KEYS, rows, np.nan) for rows in brute]
    scores = np.stack([document_scores(rows) for rows in counted])  # (docs, L, H)
    scored = np.isfinite(scores[:, 0, 0])
    assert scored.tolist() == [True] * (DOCS - 1) + [False]  # the last is too short (fewer than 7 tokens)
    assert all(len(examples.top(layer, head)) == TOP for layer in range(L) for head in range(H))
    assert_examples_match(examples, counted, TOL)
    # near ties are rare: for most heads no two of the best TOP + 1 scores lie within twice TOL of each
    # other, and there the order must be brute force's exactly
    best = -np.sort(-scores[scored], axis=0)[:TOP + 1]  # (TOP + 1, L, H)
    assert ((best[:-1] - best[1:]) > 2 * TOL).all(0).mean() >= 0.9  # 0.96 measured


def test_the_old_rule_would_have_picked_the_first_rows_on_l0h0(brute):
    """What the test above guards against, on this corpus: with every row past the first counted
    (the old max activation), L0H0's best row is one that sees fewer than MIN_KEYS keys in most
    documents, so a finder that counted those rows would fail the test above there."""
    early = [int(np.nanargmax(rows[0, 0])) < ex_mod.MIN_KEYS for rows in brute]
    assert np.mean(early) >= 0.5
