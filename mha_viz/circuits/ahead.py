"""A model's weights-only results computed ahead of the page that shows them: its composition scores, their
random baseline and its copying scores (`composition`), which depend on the weights alone and cost seconds
(SmolLM2 on 2 cores: 3.9 s, 0.8 s and 0.9 s), once per model. The app starts this after a session has drawn
a page, in a thread of its own, so that the *Head composition* page finds them kept instead of computing them
on its first visit; a page that asks while the thread works waits for it (`composition`'s lock), never
computes twice. The thread starts its work once no run of the app computes (`turns.quiet`): a class arriving
at once on a server just started is served first (SmolLM2's scores are 12 CPU-s, what 25 of its students' steps
cost), and a page that asks before then computes them itself, as the thread finds. Only where
`composition_seconds` says the scores take at most AHEAD_S: a model whose scores
take minutes (an 8B model on the CPU) is computed on request, as before; but where an earlier process kept them on
disk (`circuits.kept`), the thread reads them back (its weights hashed: half a minute of a CPU for 8B), so that
the page shows them without offering half an hour of work or holding the memory to compute them.

The process's exit waits for a thread still working (`stop_all`, at exit), which stops at its next step (a layer of
the scores, a part of the unembedding, a weight hashed): a daemon
thread left inside PyTorch while the interpreter shut down aborted the process ("terminate called without an active
exception", exit 134) once its last line had run, and a script or a batch job that ends with 134 reads as a failure."""

from __future__ import annotations

import atexit
import functools
import logging
import threading
import time
import weakref
from typing import Callable

import torch

from mha_viz.budget import turns
from mha_viz.circuits import composition as compose
from mha_viz.circuits import kept
from mha_viz.progress import Cancelled
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.errors import UnsupportedArchitecture

THREAD_PREFIX = "mha-viz-ahead-"  # the thread's name, then the model's
AHEAD_S = 15.0  # the most seconds of composition scores (by `composition_seconds`) computed without being asked
_STARTED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> its thread
_LOCK = threading.Lock()  # guards _STARTED, and _EXIT's setting
_EXIT = threading.Event()  # set at the process's exit: every thread stops at its next step, and none starts
EXIT_WAIT_S = 30.0  # the most seconds the exit waits for the threads: a thread stops at its next step (SmolLM2's
# longest, folding the unembedding, 0.3 s alone; 10 processes sharing 2 cores exited 10-17 s after their last line)
QUIET_POLL_S = 0.25  # how often a thread waiting for the app's runs to end looks again
log = logging.getLogger(__name__)


def start(model: LoadedModel, *, device: str | torch.device | None = None) -> threading.Thread | None:
    """Start computing `model`'s weights-only results in a daemon thread (`compute`, once no run of the app computes),
    once per model: the thread, or None where they are kept or started already, or would take over AHEAD_S
    (`device`: where the composition scores are multiplied, as the page would). Over AHEAD_S, where an earlier
    process kept them (`kept.hinted`), the thread reads them back instead (`composition.recall`), computing nothing."""
    try:
        if model.hf_model is None or compose.composition_known(model):
            return None
        with _LOCK:
            if model.hf_model in _STARTED:  # before its weights are listed again below
                return None
        if compose.composition_seconds(model) <= AHEAD_S:
            work = functools.partial(compute, device=device)
        elif compose.worth_keeping(model) and kept.hinted(model):
            # kept by an earlier process: read back (its weights hashed), never computed
            work = functools.partial(compose.recall, going=going)
        else:
            return None
        with _LOCK:
            if model.hf_model in _STARTED or _EXIT.is_set():  # the exit has listed the threads to wait for
                return None
            thread = threading.Thread(target=_when_quiet, args=(model, work), daemon=True,
                                      name=f"{THREAD_PREFIX}{model.name}")
            _STARTED[model.hf_model] = thread
    except Exception as exc:  # noqa: BLE001 - a head start only: the page computes when asked, and says what fails
        log.warning("computing %s's composition scores ahead did not start: %s: %s", getattr(model, "name", model),
                    type(exc).__name__, exc)
        return None
    thread.start()
    return thread


def _when_quiet(model: LoadedModel, work: Callable[[LoadedModel], object]) -> None:
    """`work(model)` once no run of the app holds or waits for a turn (`turns.quiet`), or nothing at the process's
    exit. What fails there is one line in the log: the page computes when asked, and says what fails."""
    while not turns.quiet():
        if _EXIT.wait(QUIET_POLL_S):
            return
    try:
        work(model)
    except Exception as exc:  # noqa: BLE001 - a thread of its own (compute says why for its own failures)
        log.warning("reading %s's kept scores ahead failed: %s: %s", model.name, type(exc).__name__, exc)


def going(*_progress) -> bool:
    """False once the process exits (a progress callback's answer too: go on, or stop)."""
    return not _EXIT.is_set()


def compute(model: LoadedModel, *, device: str | torch.device | None = None) -> None:
    """The copying scores, the composition scores and their baseline of `model`, kept by `composition`. What a
    model cannot give (no unembedding, weights that cannot be read) is left for the page to say when asked."""
    try:
        # the copying scores first: every head table reads them (Head metrics, Compare heads, a corpus), and a page
        # that asks while this thread works waits on the model's one lock (SmolLM2: 0.9 s, not the 5.6 s of all three).
        # A model without them (an encoder without a masked-LM head, such as MiniLM) still gets its composition scores.
        try:
            compose.copying_scores(model, progress=going)
        except (InputError, UnsupportedArchitecture, ValueError):
            pass  # the refusal is kept: the table leaves the column empty, the page says why
        if _EXIT.is_set():
            return
        compose.composition_scores(model, device=device, progress=going)
        if not _EXIT.is_set():
            compose.composition_baseline(model)
    except Cancelled:
        pass  # the process exits
    except (InputError, UnsupportedArchitecture, ValueError):
        pass  # the page says why when it is opened
    except Exception as exc:  # noqa: BLE001 - a thread of its own: one line in the log (no traceback: the page
        # computes again when asked, and shows what fails there)
        log.warning("computing %s's composition scores ahead failed: %s: %s", model.name, type(exc).__name__, exc)


@atexit.register
def stop_all(wait_s: float = EXIT_WAIT_S) -> None:
    """Stop every thread still computing ahead, and wait for each (at most `wait_s` in all): at the process's exit,
    where none may be left inside PyTorch."""
    with _LOCK:  # no thread is started after this (`start` looks at _EXIT under the lock)
        _EXIT.set()
        threads = list(_STARTED.values())
    deadline = time.monotonic() + wait_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
