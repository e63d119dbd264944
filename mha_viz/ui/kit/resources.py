"""The server's resources, shared by every session of one process: the deployment settings, the
model cache, the analysis slots (`mha_viz.budget.admission`), and the ways a page waits its turn and
turns a failure into a message. The token cap is the server's default narrowed by this session's
*Token limit*."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

import streamlit as st
import torch

import mha_viz
from mha_viz import catalogue
from mha_viz import settings as deploy
from mha_viz.budget import admission, memory
from mha_viz.budget.model_cache import ModelCache
from mha_viz.export import lesson as lessons
from mha_viz.ui.kit import keys, page_controls, session
from mha_viz.ui.kit.text import plain
from mha_viz_models.errors import UnsupportedArchitecture

log = logging.getLogger("mha_viz.ui")


def settings() -> deploy.Settings:
    """The deployment settings (environment variables; see `mha_viz.settings`); in a workshop (a
    public server with a lesson) the models offered are the lesson's."""
    conf = deploy.from_env()
    if conf.public and conf.lesson:
        lesson, _ = _server_lesson(conf.lesson, conf.models, conf.public)
        if lesson is not None:
            conf = replace(conf, models=lesson.models)
    return conf


def server_lesson() -> tuple[lessons.Lesson | None, str | None]:
    """(the lesson every session opens on, why it could not be read): MHA_VIZ_LESSON, a lesson
    file's path or a bundled lesson's name; (None, None) when none is set."""
    conf = deploy.from_env()
    return _server_lesson(conf.lesson, conf.models, conf.public) if conf.lesson else (None, None)


def workshop() -> lessons.Lesson | None:
    """The lesson that closes this server to its models and pages: public mode with a lesson."""
    conf = deploy.from_env()
    return server_lesson()[0] if conf.public and conf.lesson else None


@st.cache_resource(show_spinner=False, max_entries=4)
def _server_lesson(spec: str, models: tuple[str, ...], public: bool) -> tuple[lessons.Lesson | None, str | None]:
    """Read once per server (and setting): a bundled name, or a file checked against the app and its
    allow-list `models` (empty: any)."""
    try:
        bundled = lessons.bundled()
        data = bundled[spec] if spec in bundled else Path(spec).read_bytes()
        return lessons.read_lesson(data, pages=catalogue.with_retired(catalogue.ids()), allowed_models=models,
                                   public=public, controls=page_controls.CONTROLS,
                                   allow_pickle=deploy.from_env().allow_pickle), None
    except OSError as exc:
        why = f"the file {spec} could not be read ({exc.strerror or type(exc).__name__})"
    except lessons.LessonError as exc:
        why = str(exc)
    log.error("MHA_VIZ_LESSON: %s", why)
    return None, f"The server's lesson could not be opened: {why}"


def max_tokens() -> int:
    """Default cap on tokens per analysis (the model's own limit applies too): MHA_VIZ_MAX_TOKENS;
    the sidebar's *Token limit* changes it per session (in public mode, only downwards)."""
    return settings().max_tokens


size_text = deploy.size_text


def token_cap() -> int:
    """This session's cap: the sidebar's *Token limit*, or the default before it is drawn."""
    cap = int(session.get(keys.TOKEN_LIMIT) or max_tokens())
    return min(cap, max_tokens()) if settings().public else cap


@st.cache_resource(show_spinner=False)
def model_cache() -> ModelCache:
    conf = settings()
    return ModelCache(allow_pickle=conf.allow_pickle, max_models=conf.max_models)


@st.cache_resource(show_spinner=False)
def slots() -> admission.Admission:
    """The analyses running at once and the memory they declared, shared by every session of
    this server (`mha_viz.budget.admission`)."""
    return admission.Admission(settings().max_concurrent)


def one_at_a_time(compute):
    """compute() once admitted by `slots()`; while the server is full (slots, or memory), a
    notice says so and the request waits its turn. compute may raise admission.Busy itself (a
    cached function holding the slot inside, so that cache hits need none)."""
    notice = None  # drawn only while it waits: a page that is let in at once gains no element
    try:
        while True:
            try:
                return compute()
            except admission.Busy as busy:
                notice = notice or st.empty()
                notice.info(f"The server is busy: {busy}. Yours starts as soon as one finishes.",
                            icon=":material/hourglass_top:")
                slots().wait(busy=busy)
    finally:
        if notice is not None:
            notice.empty()


# cache_resource, not cache_data: cache_data unpickles a fresh copy of the (L, H, n, n) array
# on every rerun (hundreds of MB for smollm2 at 512 tokens). Runs are shared read-only instead.
def attempt(compute, *, what: str, out_of_memory: str):
    """(result, None) of `compute()` run in turn (`one_at_a_time`), or (None, a message for the
    user) when it fails: an InputError's or UnsupportedArchitecture's own words, `out_of_memory` (which says
    what to do; the memory is given back: `memory.free_cache`), or "`what` failed: …" (the traceback goes to
    the log). Streamlit's reruns and stops pass through."""
    try:
        return one_at_a_time(compute), None
    except (mha_viz.InputError, UnsupportedArchitecture) as exc:  # what the model or input cannot do: its words
        # NaN or infinity: the message says what to do, the log where
        if isinstance(exc, mha_viz.capture.NotFiniteError):
            log.exception("%s: not finite", what)
        return None, str(exc)
    except (MemoryError, torch.OutOfMemoryError):
        log.exception("out of memory: %s", what)
    except Exception as exc:  # noqa: BLE001 - a message; the traceback goes to the log
        log.exception("%s failed", what)
        return None, f"{what} failed: {type(exc).__name__}: {str(exc)[:300]}"
    memory.free_cache()  # here, past the handler: the failed frames, and their tensors, are gone
    return None, out_of_memory


def load_model(spec: str, device: str, local: bool, dtype: str = "auto") -> mha_viz.LoadedModel:
    """The model `spec` from the server's model cache (loaded once, with progress, in a slot);
    ModelLoadError when this server does not offer it."""
    if not settings().allows(spec):
        raise mha_viz.ModelLoadError(f"This server offers only these models: {', '.join(settings().models)}.")
    cache = model_cache()
    if (spec.strip(), device, local, dtype) in cache:
        return cache.get(spec, device, local, dtype=dtype)

    def load() -> mha_viz.LoadedModel:
        with slots().hold(), st.status(f"Loading {plain(spec)}…", expanded=False) as status:
            bar = st.progress(0.0)

            def progress(fraction: float, message: str) -> None:
                bar.progress(min(max(fraction, 0.0), 1.0), text=plain(message))  # names the model

            try:
                model = cache.get(spec, device, local, dtype=dtype, progress=progress)
            except Exception:
                status.update(label=f"Could not load {plain(spec)}", state="error")
                raise
            status.update(label=f"{plain(model.name)} loaded", state="complete")
        return model
    return one_at_a_time(load)
