"""A model's weights-only results computed ahead of the page that shows them: its composition scores, their
random baseline and its copying scores (`composition`), which depend on the weights alone and cost seconds
(SmolLM2 on 2 cores: 3.9 s, 0.8 s and 0.9 s), once per model. The app starts this after a session has drawn
a page, in a thread of its own, so that the *Head composition* page finds them kept instead of computing them
on its first visit; a page that asks while the thread works waits for it (`composition`'s lock), never
computes twice. Only where `composition_seconds` says the scores take at most AHEAD_S: a model whose scores
take minutes (an 8B model on the CPU) is computed on request, as before."""

from __future__ import annotations

import logging
import threading
import weakref

import torch

from mha_viz.circuits import composition as compose
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.errors import UnsupportedArchitecture

THREAD_PREFIX = "mha-viz-ahead-"  # the thread's name, then the model's
AHEAD_S = 15.0  # the most seconds of composition scores (by `composition_seconds`) computed without being asked
_STARTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> its thread
_LOCK = threading.Lock()  # guards _STARTED
log = logging.getLogger(__name__)


def start(model: LoadedModel, *, device: str | torch.device | None = None) -> threading.Thread | None:
    """Start computing `model`'s weights-only results in a daemon thread (`compute`), once per model: the
    thread, or None where they are kept or started already, or would take over AHEAD_S (`device`: where the
    composition scores are multiplied, as the page would)."""
    try:
        if model.hf_model is None or compose.composition_known(model) or compose.composition_seconds(model) > AHEAD_S:
            return None
        with _LOCK:
            if model.hf_model in _STARTED:
                return None
            thread = threading.Thread(target=compute, args=(model,), kwargs={"device": device}, daemon=True,
                                      name=f"{THREAD_PREFIX}{model.name}")
            _STARTED[model.hf_model] = thread
    except Exception as exc:  # noqa: BLE001 - a head start only: the page computes when asked, and says what fails
        log.warning("computing %s's composition scores ahead did not start: %s: %s", getattr(model, "name", model),
                    type(exc).__name__, exc)
        return None
    thread.start()
    return thread


def compute(model: LoadedModel, *, device: str | torch.device | None = None) -> None:
    """The copying scores, the composition scores and their baseline of `model`, kept by `composition`. What a
    model cannot give (no unembedding, weights that cannot be read) is left for the page to say when asked."""
    try:
        # the copying scores first: every head table reads them (Head metrics, Compare heads, a corpus), and a page
        # that asks while this thread works waits on the model's one lock (SmolLM2: 0.9 s, not the 5.6 s of all three).
        # A model without them (an encoder without a masked-LM head, such as MiniLM) still gets its composition scores.
        try:
            compose.copying_scores(model)
        except (InputError, UnsupportedArchitecture, ValueError):
            pass  # the refusal is kept: the table leaves the column empty, the page says why
        compose.composition_scores(model, device=device)
        compose.composition_baseline(model)
    except (InputError, UnsupportedArchitecture, ValueError):
        pass  # the page says why when it is opened
    except Exception as exc:  # noqa: BLE001 - a thread of its own: one line in the log (no traceback: the page
        # computes again when asked, and shows what fails there)
        log.warning("computing %s's composition scores ahead failed: %s: %s", model.name, type(exc).__name__, exc)
