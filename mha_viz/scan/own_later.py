"""What the model itself says of a long run's text (`capture.own_outputs`), made when first read: a decoder's loss
and last logits need its LM head over every token (SmolLM2 at 8,192 tokens: 8,192 × 49,152 logits, about 4 s of
2 cores), which only Switch heads off reads, so the scan keeps the last hidden states (n × d, on the host) and the
heads' means instead, and the LM head runs at the first read of `loss` or `last_logits`. An encoder's embedding (a
mean) is made at once."""

from __future__ import annotations

import logging
import threading

import numpy as np
import torch

from mha_viz.capture.own_outputs import OwnOutputs, from_hidden
from mha_viz_models import LoadedModel
from mha_viz_models.loading import switch
from mha_viz_models.reading import lm_head

log = logging.getLogger(__name__)


class LaterOwn:
    """OwnOutputs of a decoder's long run, its loss and last logits made at their first read (once, however many
    threads read them at once); None in each where they cannot be made (the reason logged)."""

    def __init__(self, model: LoadedModel, hidden: torch.Tensor, ids: list[int], head_means: np.ndarray) -> None:
        # the model, as the run's row source holds it (its rows are recomputed from it); its LM head is found again
        # at the read (`lm_head.of` keeps what the scan found: no probe then)
        self.model, self.ids, self.head_means = model, list(ids), head_means
        self.embedding = None
        self._hidden: torch.Tensor | None = hidden.detach().cpu()  # let go once read
        self._made: OwnOutputs | None = None
        self._making = threading.Lock()

    def _outputs(self) -> OwnOutputs:
        with self._making:
            if self._made is None:
                self._made = self._make()
                self._hidden = None
            return self._made

    def _make(self) -> OwnOutputs:
        model = self.model
        try:
            logits = lm_head.of(model)  # found at the scan: no probe now
            with model.lock:  # a view's hook on the LM head would change what it makes
                made = None if logits is None else from_hidden(self._hidden.to(model.device), self.ids,
                                                                logits=logits, head_means=self.head_means)
        except (RuntimeError, ValueError, TypeError) as exc:  # out of memory included: the run stands
            log.warning("%s: its own predictions over %d tokens were not made: %s", model.name, len(self.ids), exc)
            made = None
        return made or OwnOutputs(head_means=self.head_means)

    @property
    def made(self) -> bool:
        """Whether the loss and last logits were made (read once)."""
        return self._made is not None

    @property
    def loss(self) -> float | None:
        return self._outputs().loss

    @property
    def last_logits(self) -> np.ndarray | None:
        return self._outputs().last_logits


def own_of(model: LoadedModel, hidden: torch.Tensor, ids: list[int], head_means: np.ndarray
           ) -> OwnOutputs | LaterOwn | None:
    """What `scan` keeps of the model's own outputs from its last hidden states (n, d): a decoder's `LaterOwn` (its LM
    head found now, on a two-token probe once a model), an encoder's embedding now; None where neither can be made
    (the reason logged). The caller holds no lock of the model."""
    try:
        if not model.is_causal:
            return from_hidden(hidden, ids, logits=None, head_means=head_means)
        with model.lock, switch.fused(model):  # the read-out's probe, once a model: no head's weights made
            logits = lm_head.of(model)
    except (RuntimeError, ValueError, TypeError) as exc:  # out of memory included: the scan is what counts
        log.warning("%s: its own predictions over %d tokens were not made: %s", model.name, len(ids), exc)
        return None
    return LaterOwn(model, hidden, ids, head_means) if logits is not None and len(ids) >= 2 else None
