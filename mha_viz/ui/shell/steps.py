"""The analysis steps behind every view: the model's run for an `AnalysisKey` (cached for the
whole server, admitted by `resources.slots`), then *Hide tokens* and *Show attention as* applied
once, each a cached result keyed by what it was made from. Every choice comes in as an argument:
nothing here reads the session."""

from __future__ import annotations

import contextlib

import numpy as np
import streamlit as st

import mha_viz
from mha_viz import needs
from mha_viz.analyze_text import plan_analysis
from mha_viz.budget import turns
from mha_viz.budget.plan import Plan
from mha_viz.budget.seconds import read_seconds
from mha_viz.capture import AttentionRun, EncoderDecoderRun
from mha_viz.capture import contributions as lens_values
from mha_viz.derived import run as derived
from mha_viz.interventions import attribution
from mha_viz.scan import torch_threads
from mha_viz.ui.kit import keys, plans, resources, seq2seq_views
from mha_viz.ui.kit.analysis_key import AnalysisKey, ModelKey
from mha_viz.ui.shell.state import Current


# cache_resource, not cache_data: cache_data unpickles a fresh copy of the (L, H, n, n) array
# on every rerun (hundreds of MB for smollm2 at 512 tokens). Runs are shared read-only instead.
@st.cache_resource(show_spinner=False, max_entries=16)
def _cached_run(key: AnalysisKey, dense_mb: int, _model: mha_viz.LoadedModel,
                _plan: Plan) -> AttentionRun | EncoderDecoderRun:
    """The run of `key` (an encoder–decoder's: all three parts, `key.target` its target), its plan (`plan_of`)
    admitted with the memory it needs (an encoder–decoder's by count only: its target's length
    is not known before it runs). `dense_mb` (MHA_VIZ_DENSE_MB) is part of the key: it decides
    whether the run holds every head's array or recomputes rows, so a run of one setting is never
    served for the other."""
    # raises Busy when the server is full (nothing is cached, the caller waits), OverBudget when
    # the memory needed is more than the server ever has
    with torch_threads.one_thread() if on_one_thread(_model, _plan.n) else contextlib.nullcontext():
        result = plans.run_admitted(_plan)
    runs = result.parts.values() if isinstance(result, mha_viz.capture.EncoderDecoderRun) else [result]
    for run in runs:
        if not getattr(run, "is_dense", True):  # a long run: rows recomputed on demand, nothing to freeze
            continue
        run.attentions.setflags(write=False)
        if getattr(run, "head_outputs", None) is not None:
            run.head_outputs.setflags(write=False)
    return result


# a forward of fewer parameter-tokens (the model's parameters × the text's tokens) runs on one PyTorch thread: as
# quick as on two, with about half the CPU. Measured on 2 cores, an analysis (CPU ms, wall ms), two threads against one:
# MiniLM at 12 tokens (0.27 G) 26.6, 15.4 against 14.2, 14.2; at 32 (0.7 G) 33.4, 18.9 against 18.6, 18.6; at 64
# (1.5 G) 41.0, 22.4 against 28.8, 28.8; SmolLM2 at 12 tokens (1.6 G) 220, 116 against 139, 139 (docs/speed.md)
ONE_THREAD_WORK = 10**9
# below this many parameter-tokens an analysis also runs on one thread while another run holds a turn
# (`turns.others_compute`): that run's work takes a core already, and a second thread of this one's would take it in
# turn, for no gain in time and more CPU (SmolLM2 at 12 tokens, 1.6 G: 220 against 139 CPU ms). Bounded, so that a
# run started beside a short one that soon ends is not left at half speed for long: at 2e10 (SmolLM2 at about 150
# tokens) a second or so on one thread.
BUSY_ONE_THREAD_WORK = 2 * 10**10


def on_one_thread(model: mha_viz.LoadedModel, n: int) -> bool:
    """Whether the analysis of n tokens of `model` runs on one PyTorch thread: on the CPU, a small one
    (`ONE_THREAD_WORK`), or one under `BUSY_ONE_THREAD_WORK` while another run computes."""
    work = model.num_params * n
    return model.device.type == "cpu" and (work < ONE_THREAD_WORK
                                           or work < BUSY_ONE_THREAD_WORK and turns.others_compute())


def is_long(model: mha_viz.LoadedModel, n: int, layers: tuple[int, ...] | None = None) -> bool:
    """Whether the analysis of n tokens (every layer, or `layers`) is a long run, `analyze`'s rule: every
    head's array over MHA_VIZ_DENSE_MB, so the pages read the rows they draw (`AttentionRun.rows`)."""
    return needs.is_long(model, n, None if layers is None else len(layers))


def plan_of(key: AnalysisKey, model: mha_viz.LoadedModel) -> Plan[AttentionRun | EncoderDecoderRun]:
    """The analysis of `key` planned (`analyze_text.plan_analysis`): its tokens counted once, its need."""
    return plan_analysis(model, key.text, key.target, max_tokens=key.cap,
                         layers=None if key.layers is None else list(key.layers))


def cached_run(key: AnalysisKey, model: mha_viz.LoadedModel,
               plan: Plan | None = None) -> AttentionRun | EncoderDecoderRun:
    """The run of `key`, computed once for the server, in turn (`resources.one_at_a_time`), from its `plan` (made
    here when not given); a long run says what it does while it computes (a cached function may not draw on the
    page: no bar of its layers)."""
    plan = plan or plan_of(key, model)
    message = None
    if not model.is_encoder_decoder and is_long(model, plan.n, key.layers):
        message = (f"Reading every head of {model.name} over {plan.n:,} tokens in one pass (each layer's rows are "
                   "recomputed later, as a page draws them); on a CPU this takes a minute or more…")
    with st.spinner(message) if message else contextlib.nullcontext():
        return resources.one_at_a_time(lambda: _cached_run(key, resources.settings().dense_mb, model, plan))


def model_key_of(model: mha_viz.LoadedModel, local: bool) -> ModelKey:
    """The key every cached result of `model` is filed under."""
    return ModelKey(model.name, model.source, str(model.device), bool(local), model.precision)


@st.cache_resource(show_spinner="Hiding tokens and renormalising…", max_entries=4)
def _dropped(key: AnalysisKey, _run: mha_viz.AttentionRun, _mask_bytes: bytes) -> mha_viz.AttentionRun:
    """The run without the hidden tokens, keyed by the AnalysisKey with its `hidden` choice."""
    out = _run.drop_tokens(np.frombuffer(_mask_bytes, dtype=bool).copy())
    for a in (out.attentions, out.head_outputs, out.hidden.mass, out.hidden.empty):
        if a is not None:
            a.setflags(write=False)
    return out


def hide_tokens(cur: Current, run: mha_viz.AttentionRun, key: AnalysisKey, *, special: bool, first: bool,
                template: bool = False):
    """*Hide tokens* (the sidebar's `special`, `first` and, on a chat, `template`: the chat template's own tokens)
    applied once, for every view: (run, key) without the hidden tokens (the key says which, so every cached result of
    the run is its own), or the full run with a note when nothing, or everything, would be hidden."""
    told = cur.chat.aligned(run) if template and cur.chat is not None else None
    template = told is not None
    if not (special or first or template):
        return run, key
    if seq2seq_views.is_cross(run):
        cur.hide_note = ("Hide tokens applies to the encoder's and the decoder's self-attention: cross-attention is "
                         "shown whole.")
        return run, key
    mask = mha_viz.capture.hide_mask(run, special=special, first=first)
    if told is not None:
        mask |= told[1]
    asked = " and ".join(w for w, on in (("the special tokens", special), ("the first token", first),
                                         ("the chat template's tokens", template)) if on)
    if mask.all():
        cur.hide_note = (f"Hiding {asked} would leave no token of this text ({run.n} in all): every token "
                         "is shown, nothing renormalised.")
        return run, key
    if not mask.any():
        cur.hide_note = "This text has no special tokens: nothing is hidden."
        return run, key
    hidden = tuple(w for w, on in (("special", special), ("first", first), ("template", template)) if on)
    key = key._replace(hidden=hidden)
    if not getattr(run, "is_dense", True):
        return _derived(key, run, "hide", mask, f"Hiding {asked}"), key
    return _dropped(key, run, mask.tobytes()), key


@st.cache_resource(show_spinner="Weighting the attention by what each token writes…", max_entries=2)
def _contributions(key: AnalysisKey, _run: mha_viz.AttentionRun) -> mha_viz.AttentionRun:
    """The run as contributions, keyed by the AnalysisKey with its `lens`."""
    out = attribution.as_contributions(_run)
    out.attentions.setflags(write=False)
    return out


def lens(cur: Current, run: mha_viz.AttentionRun, key: AnalysisKey, *, contributions: bool,
         model: mha_viz.LoadedModel | None = None, full: mha_viz.AttentionRun | None = None):
    """*Show attention as* (`contributions`: the sidebar's choice) applied once, for every view, after *Hide tokens*:
    (run, key) as contributions (the key's `lens` says so), or as weights with a note when the
    run has no value path to weigh by. A long run's value norms are read with `model` from the run before
    *Hide tokens* (`full`; default `run`) the first time, and its contributions made block by block
    (`mha_viz.derived`)."""
    if not contributions:
        return run, key
    if seq2seq_views.is_cross(run):
        cur.lens_note = ("Contributions are shown for self-attention: cross-attention is shown as weights (the "
                         "decoder's queries read the encoder's values through another projection).")
        return run, key
    long = not getattr(run, "is_dense", True)
    norms = _long_norms(key, run, model, full) if long else run.value_norms
    if norms is None:
        cur.lens_note = (f"The value path of {run.model_name} cannot be read here, so its attention cannot be "
                         "weighted by what each token writes: the weights are shown.")
        return run, key
    key = key._replace(lens=keys.LENS_CONTRIBUTIONS)
    if long:
        return _derived(key, run, "lens", norms, "Weighting the attention by what each token writes"), key
    return _contributions(key, run), key


def _long_norms(key: AnalysisKey, run: mha_viz.AttentionRun, model: mha_viz.LoadedModel | None,
                full: mha_viz.AttentionRun | None):
    """A long run's value norms (of its kept tokens where some are hidden): those of the run before *Hide
    tokens* (`full`), made by one forward the first time (`contributions.value_norms_of`: kept on that run),
    admitted like an analysis; None where they cannot be read here."""
    base = full if full is not None else run
    if model is None or base.hidden is not None or (run.hidden is not None and base is run):
        return None
    if base.value_norms is None:
        if not lens_values.can_read(model):
            return None
        with st.spinner(f"Reading what each of the {base.n:,} tokens writes through every head (one forward pass "
                        "of the model, once for this text)…"):
            resources.one_at_a_time(lambda: _norms_admitted(base, model))
    norms = base.value_norms
    return norms if run.hidden is None else np.ascontiguousarray(norms[:, :, run.hidden.kept])


def _norms_admitted(base: mha_viz.AttentionRun, model: mha_viz.LoadedModel) -> None:
    plans.run_admitted(lens_values.plan_value_norms(base, model))


@st.cache_resource(show_spinner=False, max_entries=4)
def _derived_cached(key: AnalysisKey, _run: mha_viz.AttentionRun, what: str, _data: np.ndarray) -> mha_viz.AttentionRun:
    """A long run's hidden tokens (`what` "hide": `_data` the mask) or contributions ("lens": the value
    norms), keyed by the AnalysisKey with its `hidden` and `lens`: one pass over every head's rows, admitted
    by what its summary keeps."""
    plan = derived.plan_hide(_run, _data) if what == "hide" else derived.plan_contributions(_run, _data)
    return plans.run_admitted(plan)


def _derived(key: AnalysisKey, run: mha_viz.AttentionRun, what: str, data: np.ndarray,
             doing: str) -> mha_viz.AttentionRun:
    """`_derived_cached` in turn (`resources.one_at_a_time`), saying what it costs while it computes."""
    seconds = 3 * read_seconds(run)  # the rows recomputed, then reduced as the scan reduces them
    with st.spinner(f"{doing} in every head of this {run.n:,}-token run: every head's rows are read once and its "
                    f"head table, thumbnails and strongest keys made again (about {max(1, round(seconds)):,} s on "
                    "2 CPU cores; once for this text)…"):
        return resources.one_at_a_time(lambda: _derived_cached(key, run, what, data))
