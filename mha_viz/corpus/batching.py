"""Documents in padded batches through one capture each, cut back into one `AttentionRun` per
document, equal to what `mha_viz.analyze` gives for that text alone.

Padding is on the right, so every real token keeps its position; the attention mask keeps real
queries off pad keys (an encoder), and a causal model never lets a real token see a later one.
The pad queries' rows and the pad keys' columns are cut away: `[:, :, :n_i, :n_i]`. Batches
group documents of similar length (sorted within a window of several batches) to limit padding;
statistics are sums over documents, so the order changes nothing but float rounding.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch

from mha_viz.budget import capture_budget
from mha_viz.capture.run import AttentionRun
from mha_viz.text.tokenize import Tokens, tokenize
from mha_viz_models import LoadedModel, as_probabilities

SORT_WINDOW = 8  # batches sorted together: larger windows pad less but reorder more
# A batch's work for the time left (`budget.time_left`), in characters: each document's text up to what the token
# cap reads (about 4 characters a token in English), what each document costs whatever its length, and what each
# batch costs whatever its documents. Measured on SmolLM2 over the bundled sample (16 short documents a batch, 128
# tokens, importance on, 2 loaded cores): about 17 s a batch, 0.8 s a document and 3 ms a character.
CHARS_PER_TOKEN, DOC_CHARS, BATCH_CHARS = 4, 256, 4096


def work(batch: Sequence[str], max_tokens: int | None) -> int:
    """The work of one batch of documents in the units the time left counts (`CHARS_PER_TOKEN`, `DOC_CHARS`,
    `BATCH_CHARS`): a batch of short documents, sorted first, must not look as fast as one of long ones."""
    cap = CHARS_PER_TOKEN * max_tokens if max_tokens else None
    return BATCH_CHARS + sum((min(len(t), cap) if cap else len(t)) + DOC_CHARS for t in batch)


def plan(texts: Sequence[str], batch_size: int, *, window: int = SORT_WINDOW) -> Iterator[list[str]]:
    """The texts in batches of at most `batch_size`, sorted by length within each window of
    `window` batches (so nothing beyond one window is held or sorted)."""
    for batch in plan_indexed(texts, batch_size, window=window):
        yield [text for _, text in batch]


def plan_indexed(texts: Sequence[str], batch_size: int, *,
                 window: int = SORT_WINDOW) -> Iterator[list[tuple[int, str]]]:
    """`plan`'s batches with each text's index in `texts`: (index, text) pairs."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1; got {batch_size}")
    span = batch_size * window
    for start in range(0, len(texts), span):
        chunk = sorted(enumerate(texts[start:start + span], start), key=lambda it: len(it[1]))
        for b in range(0, len(chunk), batch_size):
            yield list(chunk[b:b + batch_size])


def pad_batch(model: LoadedModel, toks: Sequence[Tokens]) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids and attention_mask (B, n_max), right-padded with the tokenizer's pad id (0 when
    it has none: padded positions are masked, so the id does not matter)."""
    pad = getattr(model.tokenizer, "pad_token_id", None)
    pad = 0 if pad is None else int(pad)
    n_max = max(t.n for t in toks)
    ids = torch.full((len(toks), n_max), pad, dtype=torch.long)
    mask = torch.zeros((len(toks), n_max), dtype=torch.long)
    for b, t in enumerate(toks):
        ids[b, :t.n] = torch.tensor(t.ids, dtype=torch.long)
        mask[b, :t.n] = 1
    return ids, mask


def capture_runs(model: LoadedModel, texts: Sequence[str], *, max_tokens: int | None = 128) -> list[AttentionRun]:
    """One `AttentionRun` per text (same fields as `analyze`), from padded forward passes: the
    batch is split so that the model's attentions and the documents' cuts together stay within
    MHA_VIZ_MAX_CAPTURE_MB (`capture_bytes`, `mha_viz.budget.capture_budget`). A document that alone does not
    fit raises InputError."""
    toks = [tokenize(model, text, max_tokens) for text in texts]
    budget = capture_budget.capture_budget()
    runs, part = [], []
    for text, t in zip(texts, toks):
        capture_budget.check(capture_bytes(model, 1, t.n), f"One document of {t.n} tokens on {model.name}",
                             "lower the tokens per document.", budget=budget)
        if part and not capture_budget.fits(capture_bytes(model, len(part) + 1, max(t.n, *(p[1].n for p in part))),
                                            budget):
            runs += _capture(model, part)
            part = []
        part.append((text, t))
    return runs + (_capture(model, part) if part else [])


def capture_bytes(model: LoadedModel, batch: int, n_max: int) -> int:
    """Bytes a padded batch holds at its peak: the model's attentions (L, B, H, n_max²) in float32
    and each document's own copy (at most as much again)."""
    return 2 * model.attention_bytes(n_max, batch=batch)


def _capture(model: LoadedModel, part: Sequence[tuple[str, Tokens]]) -> list[AttentionRun]:
    ids, mask = pad_batch(model, [t for _, t in part])
    with torch.no_grad():
        cap = model.capture(ids, attention_mask=mask)  # takes model.lock itself
    L = model.num_layers
    runs = []
    for b, (text, t) in enumerate(part):
        n = t.n
        att = np.empty((L, model.num_heads, n, n), dtype=np.float32)  # layer by layer: no stacked copy
        for layer in range(L):
            att[layer] = as_probabilities(cap.attentions[layer][b, :, :n, :n]).cpu().numpy()
        outputs = None
        if cap.head_outputs is not None:
            outputs = np.stack([cap.head_outputs[layer][b, :, :n].float().cpu().numpy() for layer in range(L)])
        runs.append(AttentionRun(
            tokens=t.display, attentions=att,
            is_causal=model.is_causal, num_kv_heads=model.num_kv_heads, model_name=model.name,
            token_ids=list(t.ids), raw_tokens=t.raw, special_mask=t.special, word_ids=t.word_ids, text=text,
            num_input_tokens=t.total, num_input_tokens_is_estimate=t.total_is_estimate, head_outputs=outputs,
            layer_ids=model.layer_ids, model_layers=model.total_layers,  # a hybrid: its softmax layers
            layer_kv_heads=model.layer_kv_heads,
        ))
    return runs
