"""What the model itself says about a text, read off the forward that captured its attention when that forward
made it anyway: a decoder's next-token loss and its prediction after the last token (the eager capture runs the
LM head), an encoder's sentence embedding (its last hidden states, as sentence-transformers pools them). Switching
heads off compares against these (`interventions.ablation_outcome`): with them, its first view needs no forward
of its own. A long run's forward is the base model only: its loss and last logits are made after it from the last
hidden state, a block of rows through the LM head at a time (`from_hidden`), with each head's mean output. A
capture that made none of them (a lean run) holds None."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class OwnOutputs:
    """loss: the mean next-token cross-entropy (nats) over every position but the last, as
    `interventions.heads_off_loss.cross_entropy` computes it; last_logits: (vocabulary,) float32, the logits
    after the last token; embedding: (d,) float32, the mean of the last hidden states; head_means: float32
    (layers, heads, d_v), each head's output z averaged over the tokens (what mean-ablation puts in), kept by a
    long run, which holds no head outputs. Each None when not made."""

    loss: float | None = None
    last_logits: np.ndarray | None = None
    embedding: np.ndarray | None = None
    head_means: np.ndarray | None = None


def own_outputs(output, ids: list[int], causal: bool) -> OwnOutputs | None:
    """The OwnOutputs of a forward's `output` (a Hugging Face model output, batch of one) on `ids`: a causal
    model's from its logits (n, vocabulary), a base model's embedding from its last_hidden_state; None when
    the output holds neither."""
    logits = getattr(output, "logits", None)
    if causal and isinstance(logits, torch.Tensor) and logits.dim() == 3 and logits.shape[1] == len(ids) > 1:
        return from_hidden(logits[0], ids, logits=_made)  # the logits made already: read as they are
    hidden = getattr(output, "last_hidden_state", None)
    if not causal and isinstance(hidden, torch.Tensor) and hidden.dim() == 3:
        return from_hidden(hidden[0], ids, logits=None)
    return None


def _made(rows: torch.Tensor) -> torch.Tensor:
    return rows


LOGIT_BLOCK_BYTES = 64 << 20  # the logits `from_hidden` makes at once


def read_bytes(width: int, n: int) -> int:
    """What `from_hidden` holds at once over n tokens of a vocabulary of `width` (float32): one block of logits
    (LOGIT_BLOCK_BYTES at most), the cross-entropy's log-probabilities of it, and the last position's logits."""
    if width <= 0 or n < 2:
        return 0
    rows = min(n - 1, max(1, LOGIT_BLOCK_BYTES // (4 * width)))
    return 4 * width * (2 * rows + 1)


def from_hidden(hidden: torch.Tensor, ids: list[int], *, logits: Callable[[torch.Tensor], torch.Tensor] | None,
                head_means: np.ndarray | None = None) -> OwnOutputs | None:
    """The OwnOutputs of a base model's last hidden states `hidden` (n, d) on `ids`: with `logits` (the LM
    head applied apart, `mha_viz_models.reading.lm_head`) a causal model's loss and last logits, made
    LOGIT_BLOCK_BYTES of logits at a time, equal to `own_outputs`' within float32 rounding; without, an
    encoder's embedding. The caller holds the model's lock. None when neither can be made."""
    if logits is None:
        if hidden.dim() != 2 or hidden.shape[0] != len(ids) or len(ids) < 1:
            return None
        return OwnOutputs(embedding=hidden.float().mean(0).cpu().numpy(), head_means=head_means)
    if hidden.dim() != 2 or hidden.shape[0] != len(ids) or len(ids) < 2:
        return None
    last = logits(hidden[-1:]).float()[0]
    step = max(1, LOGIT_BLOCK_BYTES // (4 * last.numel()))
    target = torch.as_tensor(ids[1:], device=hidden.device)
    total = torch.zeros((), dtype=torch.float64, device=hidden.device)
    for start in range(0, len(ids) - 1, step):
        stop = min(start + step, len(ids) - 1)
        block = logits(hidden[start:stop]).float()
        total += F.cross_entropy(block, target[start:stop], reduction="sum").double()
    return OwnOutputs(loss=float(total) / (len(ids) - 1), last_logits=last.cpu().numpy(), head_means=head_means)
