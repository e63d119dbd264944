"""Text → the inputs and labels of a loss: what a model's loss is (`loss_kind`), and the token ids
and targets it is computed on, for one text (`prepare`) or many padded into one batch (`pad`).

The loss depends on what the model has (`loss_kind`):

- "next-token" (a decoder with a language-model head): mean cross-entropy of predicting each
  token from the ones before it.
- "masked-LM" (an encoder with an LM head): every MASK_EVERY-th word piece (the 3rd, 9th, 15th…
  non-special token; the middle one when the text has fewer than 3) is replaced by the mask
  token, and the loss is the mean cross-entropy of predicting the original pieces there. The
  masking is fixed, so that every head set is scored on the same task.
- "embedding" (an encoder without an LM head, such as minilm): 1 − cosine between the sentence
  embedding (mean of the last hidden states over the tokens, as sentence-transformers pools)
  with the heads masked and without.

The loss itself, with heads switched off, is computed from these by `mha_viz.interventions.heads_off_loss`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.output_head import output_head

MASK_EVERY = 6
NEXT_TOKEN, MASKED_LM, EMBEDDING = "next-token", "masked-LM", "embedding"
LOSS_LABELS = {
    NEXT_TOKEN: "next-token loss (mean cross-entropy, nats)",
    MASKED_LM: f"masked-LM loss (every {MASK_EVERY}th word piece masked, mean cross-entropy, nats)",
    EMBEDDING: "1 − cosine to the unablated sentence embedding",
}
IGNORED = -100  # the label of a position that is not scored (Hugging Face's ignore_index)


def loss_kind(model: LoadedModel) -> str:
    """NEXT_TOKEN, MASKED_LM or EMBEDDING: which loss this model's text is scored by."""
    if model.is_causal:  # decoders are loaded with their LM head (logits)
        return NEXT_TOKEN
    has_head = output_head(model.hf_model) is not None
    return MASKED_LM if has_head and getattr(model.tokenizer, "mask_token_id", None) is not None else EMBEDDING


@dataclass
class Inputs:
    """One text as its loss reads it."""

    ids: torch.Tensor  # (1, n) what the model reads (mask tokens in place for masked-LM)
    labels: torch.Tensor | None  # (1, n) targets, IGNORED where not scored; None for EMBEDDING
    kind: str


def masked_positions(special: list[bool]) -> list[int]:
    """The positions the masked-LM loss masks: every MASK_EVERY-th non-special token, starting
    with the third (index 2), or the middle non-special token of a shorter text."""
    plain = [i for i, s in enumerate(special) if not s]
    chosen = plain[2::MASK_EVERY]
    return chosen or ([plain[len(plain) // 2]] if plain else [])


def prepare(model: LoadedModel, text: str, max_tokens: int | None = None) -> Inputs:
    """The token ids and targets of `text` for this model's loss (raises InputError)."""
    toks = tokenize(model, text, max_tokens)
    ids, special = toks.ids, toks.special
    kind = loss_kind(model)
    x = torch.tensor([ids])
    if kind == EMBEDDING:
        return Inputs(x, None, kind)
    if kind == NEXT_TOKEN:
        if len(ids) < 2:
            raise InputError("The next-token loss needs at least two tokens; type a longer text.")
        return Inputs(x, x.clone(), kind)  # the loss shifts them: position t predicts token t + 1
    labels = torch.full_like(x, IGNORED)
    masked = x.clone()
    for i in masked_positions(special):
        labels[0, i] = x[0, i]
        masked[0, i] = model.tokenizer.mask_token_id
    return Inputs(masked, labels, kind)


def prepare_ids(model: LoadedModel, text: str, max_tokens: int | None = None) -> torch.Tensor:
    """(1, n): the token ids of `text` as typed (raises InputError)."""
    return torch.tensor([tokenize(model, text, max_tokens).ids])


def scorable(model: LoadedModel, texts: list[str], max_tokens: int | None) -> list[Inputs]:
    """`prepare` of each text that has a loss; the others are left out: a decoder's one-token
    text (nothing to predict), a masked-LM text with no word piece to mask."""
    out = []
    for text in texts:
        try:
            inputs = prepare(model, text, max_tokens)
        except InputError:
            continue
        if inputs.labels is not None and not bool((inputs.labels != IGNORED).any()):
            continue
        out.append(inputs)
    return out


@dataclass
class Batch:
    """Texts' inputs padded on the right to one length N, on the model's device (the mask keeps
    padding out of every score)."""

    ids: torch.Tensor  # (B, N) what the model reads
    mask: torch.Tensor  # (B, N) 1 for tokens, 0 for padding
    labels: torch.Tensor | None  # (B, N) targets, IGNORED where not scored (padding included); None: embedding
    n: torch.Tensor  # (B,) each text's token count
    kind: str

    def __len__(self) -> int:
        return self.ids.shape[0]


def pad(model: LoadedModel, items: list[Inputs]) -> Batch:
    """`items` (of one kind) as one Batch; one item gives its own ids and labels with a mask of ones."""
    lengths = [x.ids.shape[1] for x in items]
    B, N = len(items), max(lengths)
    pad_id = getattr(model.tokenizer, "pad_token_id", None) or 0  # any id: masked out
    ids = torch.full((B, N), int(pad_id), dtype=torch.long)
    mask = torch.zeros((B, N), dtype=torch.long)
    kind = items[0].kind
    labels = None if items[0].labels is None else torch.full((B, N), IGNORED, dtype=torch.long)
    for b, (x, n) in enumerate(zip(items, lengths)):
        ids[b, :n], mask[b, :n] = x.ids[0], 1
        if labels is not None:
            labels[b, :n] = x.labels[0]
    dev = model.device
    return Batch(ids.to(dev), mask.to(dev), None if labels is None else labels.to(dev),
                 torch.tensor(lengths, device=dev), kind)


def tiled(batch: Batch, copies: int) -> Batch:
    """`batch` `copies` times over, one copy after the other (row c · B + b is row b of copy c)."""
    if copies == 1:
        return batch
    labels = None if batch.labels is None else batch.labels.repeat(copies, 1)
    return Batch(batch.ids.repeat(copies, 1), batch.mask.repeat(copies, 1), labels, batch.n.repeat(copies), batch.kind)
