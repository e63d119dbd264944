"""What the model itself says about a text, read off the forward that captured its attention when that forward
made it anyway: a decoder's next-token loss and its prediction after the last token (the eager capture runs the
LM head), an encoder's sentence embedding (its last hidden states, as sentence-transformers pools them). Switching
heads off compares against these (`interventions.ablation_outcome`): with them, its first view needs no forward
of its own. A capture that did not make them (a lean or a long run: the base model only) holds None."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class OwnOutputs:
    """loss: the mean next-token cross-entropy (nats) over every position but the last, as
    `interventions.heads_off_loss.cross_entropy` computes it; last_logits: (vocabulary,) float32, the logits
    after the last token; embedding: (d,) float32, the mean of the last hidden states. Each None when not
    made."""

    loss: float | None = None
    last_logits: np.ndarray | None = None
    embedding: np.ndarray | None = None


def own_outputs(output, ids: list[int], causal: bool) -> OwnOutputs | None:
    """The OwnOutputs of a forward's `output` (a Hugging Face model output, batch of one) on `ids`: a causal
    model's from its logits (n, vocabulary), a base model's embedding from its last_hidden_state; None when
    the output holds neither."""
    logits = getattr(output, "logits", None)
    if causal and isinstance(logits, torch.Tensor) and logits.dim() == 3 and logits.shape[1] == len(ids) > 1:
        rows = logits[0].float()
        target = torch.as_tensor(ids[1:], device=rows.device)
        loss = float(F.cross_entropy(rows[:-1], target))
        return OwnOutputs(loss=loss, last_logits=rows[-1].cpu().numpy())
    hidden = getattr(output, "last_hidden_state", None)
    if not causal and isinstance(hidden, torch.Tensor) and hidden.dim() == 3 and hidden.shape[1] == len(ids):
        return OwnOutputs(embedding=hidden[0].float().mean(0).cpu().numpy())
    return None
