"""Helpers shared by the test tiers (plain functions, no fixtures): decoding Plotly payloads,
reading escaped messages, and a small tokenizer for random-init models."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pytest

from mha_viz import catalogue

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("unit", "models", "app", "e2e")  # the folders under tests/, each its own marker
# Settings the suite gives its own processes (tests/conftest.py, where the environment has none of its own), and
# the servers the browser tests start do not (tests/e2e/conftest.py's start_server: they run as deployed).
# MHA_VIZ_AHEAD=0: a model's composition and copying scores only when a page asks. The app tier loads models a few
# hundred times, and every load computed them on a thread of its own beside the tests: 163 s of CPU, 19 % of the
# tier's (py-spy, stop 80), for a page most of its tests never open.
# MHA_VIZ_KEEP_SCORES=0: the tests of the weights-only scores compute them, rather than read what an earlier test or
# run kept on disk (tests/models/test_kept_scores.py turns keeping on in a folder of its own)
SUITE_ONLY_ENV = {"MHA_VIZ_AHEAD": "0", "MHA_VIZ_KEEP_SCORES": "0"}
PRETRAINED = {"minilm", "minilm_ours", "smollm2", "smollm2_ours"}  # fixtures of the `model` marker
# none in the unit tier
MODEL_FIXTURES = PRETRAINED | {"gpt2_dir", "bert_dir", "llama_dir", "mistral_window_dir", "t5_dir"}

CORPUS = [
    "The cat sat on the mat. The dog sat on the log.",
    "A quick brown fox jumps over the lazy dog!",
    "Attention heads look at tokens; some look back, some look at the start.",
    "Hello world, hello attention, hello heads 123 456.",
]


def decode(obj):
    """Plotly sends numpy arrays as {"dtype", "bdata"[, "shape"]}: turn them back into lists."""
    if isinstance(obj, dict) and "bdata" in obj and "dtype" in obj:
        arr = np.frombuffer(base64.b64decode(obj["bdata"]), dtype=obj["dtype"])
        if "shape" in obj:
            arr = arr.reshape([int(x) for x in str(obj["shape"]).split(",")])
        return arr.tolist()
    if isinstance(obj, dict):
        return {k: decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode(v) for v in obj]
    return obj


def decode_json(text: str):
    """A figure serialised to JSON (as Streamlit sends it), with arrays decoded."""
    return decode(json.loads(text))


def shown(markdown: str) -> str:
    """What a message written with `text.plain` reads as on screen (escapes and the invisible
    word joiners that stop autolinks removed)."""
    return re.sub(r"\\(.)", r"\1", markdown).replace("\u2060", "")


def byte_bpe_tokenizer():
    """A small GPT-2-style byte-level BPE tokenizer trained here (no hub access needed)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 20, vocab_size=400, min_frequency=1,
                            special_tokens=["<|endoftext|>"])
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", unk_token="<|endoftext|>")


def hidden_states(model, ids, scale=None):
    """Every layer's hidden states of one plain forward of a loaded model, with the heads scaled by
    `scale` (layers, heads) before W_O (`mha_viz_models.reading.masking.head_mask`) when one is given."""
    import torch

    from mha_viz_models.reading.masking import head_mask

    with model.lock, torch.inference_mode():
        if scale is None:
            return model.hf_model(input_ids=ids, output_hidden_states=True).hidden_states
        with head_mask(model, scale):
            return model.hf_model(input_ids=ids, output_hidden_states=True).hidden_states


def save_peaked(cls, config, out, *, sharpened: tuple[str, ...] = (), scale: float = 1.0, norm: float | None = None,
                jitter_norms: float = 0.0, seed: int = 5) -> str:
    """A random-init `cls(config)` (seeded, this module's byte-level tokenizer) with peaked heads:
    parameters whose names end with one of `sharpened` multiplied by `scale`, q/k norm weights set
    to `norm` (a norm undoes a scaled projection), so that a wrong scale, norm or mask cannot hide
    in near-uniform rows; with `jitter_norms`, every norm's weight (and bias) moved by that much Gaussian
    noise, so that a norm folded wrongly cannot hide behind γ = 1; saved with its tokenizer to `out`."""
    import torch

    tok = byte_bpe_tokenizer()
    config.vocab_size = len(tok)
    torch.manual_seed(seed)
    model = cls(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(sharpened):
                p.mul_(scale)
            elif norm is not None and name.endswith(("q_norm.weight", "k_norm.weight")):
                p.fill_(norm)
            if jitter_norms and ("norm" in name.lower() or ".ln_" in name or name.startswith("transformer.ln_f")):
                p.add_(jitter_norms * torch.randn_like(p))
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)


def assert_same_examples(a, b, *, atol: float = 1e-5) -> None:
    """Two `corpus.HeadExamples` keep the same documents, scores, histograms, masses and patterns."""
    import numpy as np

    np.testing.assert_allclose(a.part.top_score, b.part.top_score, atol=atol)
    differ = a.part.top_doc != b.part.top_doc  # only where two documents tie (the order of a tie is rounding's)
    if differ.any():
        np.testing.assert_allclose(a.part.top_score[differ], b.part.top_score[differ], atol=atol)
        for where in {tuple(i[:-1]) for i in np.argwhere(differ)}:  # each head: the same documents and rows
            assert sorted(zip(a.part.top_doc[where], a.part.top_query[where])) == \
                sorted(zip(b.part.top_doc[where], b.part.top_query[where])), where
    np.testing.assert_array_equal(a.part.top_query[~differ], b.part.top_query[~differ])
    np.testing.assert_array_equal(a.part.dec_doc, b.part.dec_doc)
    np.testing.assert_array_equal(a.part.dec_query, b.part.dec_query)
    np.testing.assert_array_equal(a.part.histogram, b.part.histogram)
    np.testing.assert_allclose(a.part.distances, b.part.distances, rtol=1e-6, atol=atol)
    np.testing.assert_array_equal(a.part.key_ids, b.part.key_ids)
    np.testing.assert_allclose(a.part.key_mass, b.part.key_mass, rtol=1e-6, atol=atol)
    np.testing.assert_allclose(a.part.query_mass, b.part.query_mass, rtol=1e-6, atol=atol)
    assert sorted(a.part.patterns) == sorted(b.part.patterns)
    assert a.part.documents == b.part.documents


def encoder_rows(a: np.ndarray) -> np.ndarray:
    """(L, H, n) each query row's score of an encoder's (L, H, n, n) attention, as docs/head-metrics.md
    ("Head examples") counts it: its largest weight past the first key; NaN for row 0 (left out), and for
    every row when fewer than MIN_KEYS keys lie past the first (then no row counts)."""
    from mha_viz.corpus import examples as ex_mod

    rows = np.full(a.shape[:3], np.nan)
    if a.shape[-1] - 1 >= ex_mod.MIN_KEYS:
        rows[:, :, 1:] = a[:, :, 1:, 1:].max(-1)
    return rows


def document_scores(rows: np.ndarray) -> np.ndarray:
    """(L, H) a document's score from its counted rows' scores (L, H, n), NaN where a row does not count:
    the mean of the TOP_ROWS best; NaN with fewer counted rows."""
    from mha_viz.corpus import examples as ex_mod

    counted = np.sort(np.where(np.isnan(rows), -np.inf, rows), -1)[..., ::-1][..., :ex_mod.TOP_ROWS]
    if counted.shape[-1] < ex_mod.TOP_ROWS or not np.isfinite(counted[..., -1]).all():
        return np.full(rows.shape[:2], np.nan)
    return counted.mean(-1)


def assert_examples_match(examples, rows: list, tol: float, heads=None) -> None:
    """`examples` (`corpus.HeadExamples`) against each document computed alone: `rows` its counted rows'
    scores ((L, H, n) a document, NaN where a row does not count). For each head (`heads`, or every one):
    the top documents are the best scores in order (equal ones: the earlier document), each with its score;
    the histogram counts the scores; each decile keeps its share of the documents in it; each kept
    document's query is its best row. The batched computation rounds each score by up to `tol`: a document
    within `tol` of a bin's edge may fall on either side, and two within twice `tol` of each other (or two
    rows) in either order."""
    import itertools

    from mha_viz.corpus import examples as ex_mod
    from tests.tolerance import assert_same_counts, assert_same_ranking

    scores = np.stack([document_scores(r) for r in rows])  # (docs, L, H)
    L, H = scores.shape[1:]
    per = examples.options.per_decile
    for layer, head in heads or itertools.product(range(L), range(H)):
        where = f"L{layer}H{head}"
        s = scores[:, layer, head]
        finite = np.isfinite(s)
        want = sorted(np.flatnonzero(finite), key=lambda d: (-s[d], d))[:examples.options.top]
        got = examples.top(layer, head)
        assert len(got) == len(want), where
        assert_same_ranking([d for d, _ in got], want, np.where(finite, s, -np.inf), 2 * tol, where)
        np.testing.assert_allclose([x for _, x in got], s[want], atol=tol, err_msg=where)  # rank by rank
        for doc, x in got:
            assert x == pytest.approx(s[doc], abs=tol), (where, doc)
            r = rows[doc][layer, head]
            assert r[examples.query(doc, layer, head)] >= np.nanmax(r) - 2 * tol, (where, doc)  # the best row
        _, counts = examples.histogram(layer, head)
        assert_same_counts(counts, s[finite], np.arange(1, ex_mod.SCORE_BINS) / ex_mod.SCORE_BINS, tol, where)
        for d, kept in enumerate(examples.deciles(layer, head)):
            lo, hi = (-np.inf if d == 0 else d / 10), (np.inf if d == ex_mod.DECILES - 1 else (d + 1) / 10)
            surely = finite & (s >= lo + tol) & (s < hi - tol)  # in this decile whatever the rounding
            maybe = finite & (s >= lo - tol) & (s < hi + tol)
            assert min(per, surely.sum()) <= len(kept) <= min(per, maybe.sum()), (where, d)
            for doc, x in kept:
                assert maybe[doc] and x == pytest.approx(s[doc], abs=tol), (where, d, doc)


def corpus_voters(model, texts, max_tokens: int) -> list[dict]:
    """Each text's `class_inputs`, from `analyze` alone: the reference a corpus's pattern classes (the
    majority of each document's) are held to by `assert_corpus_patterns`."""
    import mha_viz

    return [class_inputs(mha_viz.analyze(model, t, max_tokens=max_tokens)) for t in texts]


def assert_corpus_patterns(patterns, voters: list[dict], tol: float, where: str = "") -> None:
    """A corpus's pattern column (each head's majority class over the documents, ties to the first in
    PATTERN_ORDER) against `corpus_voters`: a document whose statistics lie within `tol` of a rule's
    threshold may vote either way (`tests.tolerance.assert_same_vote`)."""
    from mha_viz import corpus
    from mha_viz.metrics.head_stats import classify
    from tests.tolerance import assert_same_vote

    assert_same_vote(list(patterns), voters, classify, tol, corpus.PATTERN_ORDER, corpus.pattern_class, where)


def class_inputs(run, **kw) -> dict:
    """What `head_stats.classify` reads of each head of `run` ((L, H) arrays by name), as the head table
    computes it (`pattern_stats`; the table itself leaves `in_segment` out): the reference of
    `tests.tolerance.assert_same_class` and `assert_same_vote`."""
    from mha_viz.metrics.head_stats import RULE_INPUTS, pattern_stats

    stats = pattern_stats(run, **kw)
    return {k: stats[k] for k in RULE_INPUTS}


def next_token_probs(model, prompt_ids):
    """The `scores_after` of `tests.tolerance.assert_same_tokens` for a decoder: its next-token
    probabilities after `prompt_ids` and the tokens picked so far, from one plain forward."""
    import torch

    def after(prefix) -> np.ndarray:
        with torch.no_grad():
            logits = model.hf_model(input_ids=torch.tensor([[*prompt_ids, *prefix]])).logits[0, -1]
        return torch.softmax(logits.float(), -1).numpy()
    return after


# each page's title, as drawn (its feature's record): how tests/app's open_page knows the page really opened
HEADINGS = {f.id: f.page_title for f in catalogue.features()}


def segment_tokens(rng, n: int) -> list[str]:
    """[CLS] w0 w1 … [SEP]: two special ends around repeated words (no draw from rng)."""
    return ["[CLS]"] + [f"w{i % 4}" for i in range(n - 2)] + ["[SEP]"]


def random_run(*, L=2, H=3, n=9, d_v=4, d=10, causal=False, seed=0, tokens=segment_tokens):
    """(AttentionRun, weights): random peaked patterns (causal: lower-triangular), tokens(rng, n)
    marked special where they start with "[", random head outputs, and random W_Q, W_K, W_V, W_O."""
    import torch

    from mha_viz import AttentionRun

    rng = np.random.default_rng(seed)
    a = rng.random((L, H, n, n)) ** 3 + 1e-3
    if causal:
        a = np.tril(a)
    a /= a.sum(-1, keepdims=True)
    names = tokens(rng, n)
    run = AttentionRun.from_array(a, names, is_causal=causal)
    run.special_mask = [t.startswith("[") for t in names]
    run.head_outputs = rng.normal(size=(L, H, n, d_v)).astype(np.float32)
    weights = {"W_Q": torch.randn(L, H, d, d_v), "W_K": torch.randn(L, H, d, d_v),
               "W_V": torch.randn(L, H, d, d_v), "W_O": torch.randn(L, H, d_v, d),
               "copying": torch.rand(L, H) * 2 - 1}  # what `mha_viz.circuits.copying_scores` adds, −1..1
    return run, weights


def capture_budget_of(monkeypatch, limit: int) -> None:
    """The deployment's settings with a capture budget of `limit` bytes."""
    from mha_viz import settings

    real = settings.from_env()

    class Limited:
        max_capture_bytes = limit

        def __getattr__(self, name):
            return getattr(real, name)
    monkeypatch.setattr(settings, "from_env", Limited)
