"""The loss with heads switched off, computed in this one place: each text's loss in a padded batch
(`losses`), under the caller's head mask (`mha_viz_models.reading.masking.head_mask`) and grad mode.

One text is a batch of one (`ablation`), a corpus's documents a padded batch at a time
(`corpus.importance`), and the live view's passes (`ablation_outcome`) read the same cross-entropy
(`cross_entropy`) and sentence embedding (`embeddings`). What the loss is for each kind of model, and
the ids and targets it reads: `mha_viz.text.loss_inputs`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mha_viz.text.loss_inputs import EMBEDDING, IGNORED, NEXT_TOKEN, Batch
from mha_viz_models import LoadedModel
from mha_viz_models.loading import switch


def last_hidden(model: LoadedModel, batch: Batch) -> torch.Tensor:
    """Last hidden states (B, N, d) of any model (the base model's, for a model with a head)."""
    net = getattr(model.hf_model, "base_model", None) or model.hf_model
    with switch.fused(model):  # no probabilities read: fused attention (SDPA)
        out = net(input_ids=batch.ids, attention_mask=batch.mask, use_cache=False)
    return out.last_hidden_state if getattr(out, "last_hidden_state", None) is not None else out.hidden_states[-1]


def embeddings(model: LoadedModel, batch: Batch) -> torch.Tensor:
    """(B, d): each text's sentence embedding, the mean of its last hidden states over its own
    tokens (padding left out), as sentence-transformers pools."""
    hidden = last_hidden(model, batch)
    m = batch.mask[..., None].to(hidden.dtype)  # (B, N, 1)
    return (hidden * m).sum(1) / m.sum(1)


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, kind: str) -> torch.Tensor:
    """(B,): each text's mean cross-entropy (nats) over its scored positions (labels ≠ IGNORED),
    from logits (B, T, V) and labels (B, T) on one device; for NEXT_TOKEN, position t predicts
    token t + 1. A text at a time: its logits' float32 copy (half precision) and log-softmax are one text's, never
    the batch's (a batch of a hundred masked copies of a text held three more copies of all their logits)."""
    if kind == NEXT_TOKEN:
        logits, labels = logits[:, :-1], labels[:, 1:]  # each text's rows stay one contiguous block
    summed = torch.stack([F.cross_entropy(logits[b].float(), labels[b], ignore_index=IGNORED, reduction="sum")
                          for b in range(logits.shape[0])])
    return summed / (labels != IGNORED).sum(1)


def embedding_loss(embedding: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """1 − cosine of sentence embeddings to the unablated ones, over the last axis: (…, d) -> (…)."""
    return 1 - F.cosine_similarity(embedding, reference, dim=-1)


def losses(model: LoadedModel, batch: Batch, reference: torch.Tensor | None = None) -> torch.Tensor:
    """(B,): each text's loss (`mha_viz.text.loss_inputs`), under the caller's head mask and grad
    mode; `reference` (B, d): the unablated sentence embeddings, for EMBEDDING (1 − cosine to them)."""
    if batch.kind == EMBEDDING:
        return embedding_loss(embeddings(model, batch), reference)
    with switch.fused(model):  # no probabilities read: fused attention (SDPA)
        logits = model.hf_model(input_ids=batch.ids, attention_mask=batch.mask, use_cache=False).logits
    return cross_entropy(logits, batch.labels, batch.kind)
