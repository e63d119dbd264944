"""The shared sidebar and the analysis behind every view: model, device, text -> AttentionRun.

Models live in one process-wide `ModelCache` (`st.cache_resource`), results in a
read-only `st.cache_resource` keyed by an `AnalysisKey` (model, device, implementation, text,
token cap, layers). Errors become
messages; the user's text and choices stay in their widgets, and the last good result stays
available to the views.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import streamlit as st
import torch

import mha_viz
from mha_viz import admission, attribution, memory
from mha_viz import settings as deploy
from mha_viz.cache import ModelCache
from mha_viz.tokenize import count_text
from mha_viz.ui import keys, notes, seq2seq_views, session
from mha_viz.ui.keys import AnalysisKey, ModelKey
from mha_viz.ui.text import plain

log = logging.getLogger("mha_viz.ui")

DEFAULT_TEXT = "The cat sat on the mat because it was tired."
EXAMPLES = {
    "Pronoun (coreference)": "The animal didn't cross the street because it was too tired.",
    "Repeated phrase (induction)": "Harry Potter went to Hogwarts. Later, Harry Potter went home.",
    "Two sentences ([SEP])": "I went to the bank. The river bank was flooded.",
    "Long-range agreement": "The keys to the old wooden cabinet in the hall are missing.",
    "Code": "def add(a, b):\n    return a + b",
    "Repeated letters (for toy-induction)": "k d m x b f q z k d m x b f q z",
}
OTHER = "Other: hub id or folder…"
# Every input the user sets is a widget with persist_state=KEEP: Streamlit keeps its value when a
# page does not draw it or a run ends early (st.switch_page), and the browser's latest value
# always wins. (Values put back by the app before each run once overrode what a user typed
# while the session's first run was still going: issue 20.)
KEEP = keys.KEEP
DEVICES = ("auto", "cpu", "cuda")
PRECISIONS = mha_viz.PRECISIONS  # "auto", "float32", "bfloat16", "float16"




def settings() -> deploy.Settings:
    """The deployment settings (environment variables; see `mha_viz.settings`)."""
    return deploy.from_env()


def max_tokens() -> int:
    """Default cap on tokens per analysis (the model's own limit applies too): MHA_VIZ_MAX_TOKENS;
    the sidebar's *Token limit* changes it per session (in public mode, only downwards)."""
    return settings().max_tokens


def capture_budget() -> int:
    """Most bytes of float32 probabilities one analysis may hold: MHA_VIZ_MAX_CAPTURE_MB (4096)."""
    return settings().max_capture_bytes


size_text = deploy.size_text


def token_cap() -> int:
    """This session's cap: the sidebar's *Token limit*, or the default before it is drawn."""
    cap = int(session.get(keys.TOKEN_LIMIT) or max_tokens())
    return min(cap, max_tokens()) if settings().public else cap


@st.cache_resource(show_spinner=False)
def model_cache() -> ModelCache:
    return ModelCache(allow_pickle=settings().allow_pickle)


@st.cache_resource(show_spinner=False)
def slots() -> admission.Admission:
    """The analyses running at once and the memory they declared, shared by every session of
    this server (`mha_viz.admission`)."""
    return admission.Admission(settings().max_concurrent)


def one_at_a_time(compute):
    """compute() once admitted by `slots()`; while the server is full (slots, or memory), a
    notice says so and the request waits its turn. compute may raise admission.Busy itself (a
    cached function holding the slot inside, so that cache hits need none)."""
    notice = st.empty()
    try:
        while True:
            try:
                return compute()
            except admission.Busy as busy:
                notice.info(f"The server is busy: {busy}. Yours starts as soon as one finishes.", icon="⏳")
                slots().wait(busy=busy)
    finally:
        notice.empty()


# cache_resource, not cache_data: cache_data unpickles a fresh copy of the (L, H, n, n) array
# on every rerun (hundreds of MB for smollm2 at 512 tokens). Runs are shared read-only instead.
@st.cache_resource(show_spinner=False, max_entries=16)
def _analyze(key: AnalysisKey, _model: mha_viz.LoadedModel) -> mha_viz.AttentionRun | mha_viz.EncoderDecoderRun:
    """The run of `key` (an encoder–decoder's: all three parts, `key.target` its target),
    admitted with the memory it needs (an encoder–decoder's by count only: its target's length
    is not known before it runs)."""
    need = None
    if not _model.is_encoder_decoder:
        n = mha_viz.tokenize(_model, key.text, key.cap).n
        need = memory.analysis_need(_model, n, layers=None if key.layers is None else len(key.layers))
    # raises Busy when the server is full (nothing is cached, the caller waits), OverBudget when
    # the memory needed is more than the server ever has
    with slots().hold(need=need):
        result = mha_viz.analyze(_model, key.text, key.target, max_tokens=key.cap,
                                 layers=None if key.layers is None else list(key.layers))
    runs = result.parts.values() if isinstance(result, mha_viz.EncoderDecoderRun) else [result]
    for run in runs:
        run.attentions.setflags(write=False)
        if getattr(run, "head_outputs", None) is not None:
            run.head_outputs.setflags(write=False)
    return result


@dataclass
class Current:
    """What the views draw: the run for the current inputs, or the error and the last good run."""

    run: mha_viz.AttentionRun | None = None
    model: mha_viz.LoadedModel | None = None
    error: str | None = None  # a message for the user; set when `run` is not for the current inputs
    notice: str | None = None  # a prompt (blank text), not an error
    stale: bool = False  # `run` is the last good one, not the current inputs'
    key: AnalysisKey | None = None  # what `run` was computed from; keys every cached result of it
    # the model loaded for the current inputs and the current text, even when the capture was
    # refused: the whole-text overview works from them
    text_model: mha_viz.LoadedModel | None = None
    text: str = ""
    model_key: ModelKey | None = None
    # the run before the sidebar's *Hide tokens* (every token, aligned with the model's own tensors);
    # `run` is it with the hidden tokens dropped (`run.hidden` says what), or the same run
    full_run: mha_viz.AttentionRun | None = None
    hide_note: str | None = None  # why *Hide tokens* hid nothing (every token, or none, matched)
    # the run as weights, after *Hide tokens*: `run` is it, or its contributions (sidebar, *Show
    # attention as*); `lens_note` says why contributions were asked for and not shown
    weights_run: mha_viz.AttentionRun | None = None
    lens_note: str | None = None
    # an encoder–decoder's three attentions; `run` is the part picked in the sidebar (key.part)
    seq2seq: mha_viz.EncoderDecoderRun | None = None


def attempt(compute, *, what: str, out_of_memory: str):
    """(result, None) of `compute()` run in turn (`one_at_a_time`), or (None, a message for the
    user) when it fails: an InputError's own words, `out_of_memory` (which says what to do; the
    memory is given back: `memory.free_cache`), or "`what` failed: …" (the traceback goes to the
    log). Streamlit's reruns and stops pass through."""
    try:
        return one_at_a_time(compute), None
    except mha_viz.InputError as exc:
        return None, str(exc)
    except (MemoryError, torch.OutOfMemoryError):
        log.exception("out of memory: %s", what)
    except Exception as exc:  # noqa: BLE001 - a message; the traceback goes to the log
        log.exception("%s failed", what)
        return None, f"{what} failed: {type(exc).__name__}: {str(exc)[:300]}"
    memory.free_cache()  # here, past the handler: the failed frames, and their tensors, are gone
    return None, out_of_memory


def _on_example() -> None:
    choice = session.get(keys.EXAMPLE)
    if choice in EXAMPLES:
        session.put(keys.TEXT, EXAMPLES[choice])


def default_precision() -> str:
    """The sidebar's *Precision* before a user picks one: MHA_VIZ_DTYPE (`mha-viz --dtype`), else "auto"."""
    return settings().dtype


def precision() -> str:
    """This session's *Precision* (the sidebar's), or the server's default before it is drawn."""
    chosen = session.get(keys.PRECISION)
    return chosen if chosen in PRECISIONS else default_precision()


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


def model_options() -> tuple[list[str], dict[str, str]]:
    """The models a session may pick (the allow-list in public mode, else the bundled ones, the
    hub suggestions and OTHER: a free-form hub id or folder) and their titles."""
    conf = settings()
    options = list(mha_viz.BUNDLED) + list(mha_viz.HUB_SUGGESTIONS)
    if conf.models:  # an allow-list: only those, and no free-form id or folder
        options = [m for m in options if m in conf.models] + [m for m in conf.models if m not in options]
    else:
        options.append(OTHER)
    titles = {k: m.title for k, m in mha_viz.BUNDLED.items()}
    titles.update({k: f"{k} (Hugging Face Hub, needs internet once)" for k in mha_viz.HUB_SUGGESTIONS})
    return options, titles


def sidebar() -> Current:
    """Draw the sidebar and compute (or fetch) the run for its inputs."""
    return _sidebar()


def _sidebar() -> Current:
    session.setdefault(keys.TEXT, DEFAULT_TEXT)
    conf = settings()
    options, titles = model_options()
    if session.get(keys.MODEL_CHOICE) not in options:
        session.pop(keys.MODEL_CHOICE, None)
    with st.sidebar:
        st.header("Model")
        choice = st.selectbox("Model", options, key=keys.MODEL_CHOICE, persist_state=KEEP, format_func=lambda k: titles.get(k, k))
        spec = choice
        if choice == OTHER:
            spec = st.text_input("Hub id or local folder", key=keys.MODEL_OTHER, persist_state=KEEP,
                                 placeholder="e.g. gpt2, owner/model or /path/to/folder")
        device = st.radio("Device", DEVICES, key=keys.DEVICE, persist_state=KEEP, horizontal=True,
                          help="auto uses CUDA when a GPU is available, else the CPU.")
        session.setdefault(keys.PRECISION, default_precision())
        dtype = st.radio("Precision", PRECISIONS, key=keys.PRECISION, persist_state=KEEP, horizontal=True,
                         help="What the model computes in. auto: the checkpoint's own (the bundled models: "
                              "float32). bfloat16 and float16 halve the memory of the weights; the attention "
                              "shown is float32 in every precision, with rows that sum to 1.")
        local = st.toggle("Compute with our MHA", key=keys.LOCAL_ATTENTION, persist_state=KEEP,
                          help="Replace every self-attention of the model with mha-viz's own "
                               "multi-head attention, carrying the same weights.")
        st.header("Text")
        st.selectbox("Examples", ["—"] + list(EXAMPLES), key=keys.EXAMPLE, persist_state=KEEP, on_change=_on_example)
        text = st.text_area("Sentence", key=keys.TEXT, persist_state=KEEP, height=120)
        top = max_tokens() if conf.public else 32768
        session.settle(keys.TOKEN_LIMIT, min(int(session.get(keys.TOKEN_LIMIT) or max_tokens()), top))
        st.number_input("Token limit", min_value=2, max_value=top, step=128, key=keys.TOKEN_LIMIT, persist_state=KEEP,
                        help="Longer texts are cut to this many tokens (and to the model's own "
                             "limit). Every head's attention is held in memory: layers × heads × "
                             "n² × 4 bytes.")
        st.caption("Hide tokens (every view, renormalised)")
        st.checkbox("Special tokens ([CLS], [SEP], <s>…)", key=keys.HIDE_SPECIAL, persist_state=KEEP,
                    help="Drop the special tokens from both axes of every head and divide each row by "
                         "the attention it keeps (as exBERT does). The Model view shows how much was hidden.")
        st.checkbox("The first token (attention sink)", key=keys.HIDE_FIRST, persist_state=KEEP,
                    help="Drop the first token, where decoders park unused attention, and renormalise "
                         "each row over the rest.")
        st.radio("Show attention as", (keys.LENS_WEIGHTS, keys.LENS_CONTRIBUTIONS), key=keys.LENS, persist_state=KEEP,
                 horizontal=True,
                 help="Weights: where each head looks (α). Contributions: how much each key token moves the "
                      "head's output, α · ‖f(x)‖ with f(x) = (x W_V + b_V) W_O of that head, each row divided by "
                      "its sum (Kobayashi et al. 2020). A head can look hard at a token whose value it barely "
                      "moves ([CLS], [SEP], punctuation). Every view of the run follows.")
    cur = Current(stale=False)
    if not (spec or "").strip():
        cur.notice = "Type a Hugging Face hub id or the path of a model folder in the sidebar."
        return _with_last_good(cur)
    if not text or not text.strip():
        cur.notice = "Type a sentence in the sidebar to see its attention."
        return _with_last_good(cur)
    try:
        model = load_model(spec, device, local, dtype)
        model_key = model_key_of(model, local)
        cur.text_model, cur.text, cur.model_key = model, text, model_key
        cap = token_cap()
        target, part = seq2seq_views.sidebar() if model.is_encoder_decoder else (None, "")
        layers = None if model.is_encoder_decoder else _layers_to_capture(model, text, cap)
        key = AnalysisKey(model_key, text, cap, layers, target=target)
        run = one_at_a_time(lambda: _analyze(key, model))
        if isinstance(run, mha_viz.EncoderDecoderRun):
            cur.seq2seq, run, key = run, run.parts[part], key._replace(part=part)
    except (mha_viz.ModelLoadError, mha_viz.InputError) as exc:
        cur.error = str(exc)
        return _with_last_good(cur)
    except (MemoryError, torch.OutOfMemoryError):
        log.exception("out of memory")
        cur.error = f"This input needs more memory than this machine has free. {memory.OUT_OF_MEMORY_ADVICE}"
    except Exception as exc:  # noqa: BLE001 - shown as a message; the traceback goes to the log
        log.exception("analysis failed")
        cur.error = f"The analysis failed: {type(exc).__name__}: {str(exc)[:300]}"
        return _with_last_good(cur)
    if cur.error:  # out of memory: given back here, past the handler, whose frames held the tensors
        memory.free_cache()
        return _with_last_good(cur)
    cur.full_run = run
    run, key = _hide_tokens(cur, run, key)
    cur.weights_run = run
    run, key = _lens(cur, run, key)
    cur.run, cur.model, cur.key = run, model, key
    session.put(keys.LAST_GOOD, (run, model, key, cur.seq2seq))
    session.put(keys.LAST_FULL, cur.full_run)
    return cur


def model_key_of(model: mha_viz.LoadedModel, local: bool) -> ModelKey:
    """The key every cached result of `model` is filed under."""
    return ModelKey(model.name, model.source, str(model.device), bool(local), model.precision)


def analyse(model: mha_viz.LoadedModel, text: str, local: bool,
            layers: tuple[int, ...] | None = None) -> tuple[mha_viz.AttentionRun, AnalysisKey]:
    """The sidebar's analysis of another text or model (the Compare page): the session's token
    cap, `layers` (None: every layer; InputError when that is over the capture budget) and the
    sidebar's *Hide tokens* and *Show attention as*. Returns the run as shown and its key."""
    if model.is_encoder_decoder:
        raise mha_viz.InputError(f"{model.name} is an encoder–decoder: comparing runs takes encoder-only and decoder-only "
                                 "models. Its encoder, decoder and cross-attention are on the Look pages.")
    model_key = model_key_of(model, local)
    cap = token_cap()
    n = mha_viz.tokenize(model, text, cap).n
    layers = tuple(l for l in layers if 0 <= l < model.num_layers) or None if layers else None
    short = memory.shortfall(memory.analysis_need(model, n, layers=None if layers is None else len(layers)),
                             slots().room(model.device))
    if short:
        raise mha_viz.InputError(f"Every head of {model.name} at {n} tokens would hold {short}: lower the token "
                                 "limit in the sidebar to compare.")
    key = AnalysisKey(model_key, text, cap, layers)
    run = one_at_a_time(lambda: _analyze(key, model))
    cur = Current()
    shown = _lens(cur, *_hide_tokens(cur, run, key))
    if cur.lens_note:  # the sidebar's run is contributions; this one would be weights: not comparable
        raise mha_viz.InputError(cur.lens_note + " Set the sidebar's *Show attention as* to weights to compare.")
    return shown


@st.cache_resource(show_spinner="Hiding tokens and renormalising…", max_entries=4)
def _dropped(key: AnalysisKey, _run: mha_viz.AttentionRun, _mask_bytes: bytes) -> mha_viz.AttentionRun:
    """The run without the hidden tokens, keyed by the AnalysisKey with its `hidden` choice."""
    out = _run.drop_tokens(np.frombuffer(_mask_bytes, dtype=bool).copy())
    for a in (out.attentions, out.head_outputs, out.hidden.mass, out.hidden.empty):
        if a is not None:
            a.setflags(write=False)
    return out


def _hide_tokens(cur: Current, run: mha_viz.AttentionRun, key: AnalysisKey):
    """The sidebar's *Hide tokens* applied once, for every view: (run, key) without the hidden
    tokens (the key says which, so every cached result of the run is its own), or the full run
    with a note when nothing, or everything, would be hidden."""
    special, first = bool(session.get(keys.HIDE_SPECIAL)), bool(session.get(keys.HIDE_FIRST))
    if not (special or first):
        return run, key
    if seq2seq_views.is_cross(run):
        cur.hide_note = "Hide tokens applies to the encoder's and the decoder's self-attention: cross-attention is shown whole."
        return run, key
    mask = mha_viz.hide_mask(run, special=special, first=first)
    asked = " and ".join(w for w, on in (("the special tokens", special), ("the first token", first)) if on)
    if mask.all():
        cur.hide_note = (f"Hiding {asked} would leave no token of this text ({run.n} in all): every token "
                         "is shown, nothing renormalised.")
        return run, key
    if not mask.any():
        cur.hide_note = "This text has no special tokens: nothing is hidden."
        return run, key
    hidden = tuple(w for w, on in (("special", special), ("first", first)) if on)
    key = key._replace(hidden=hidden)
    return _dropped(key, run, mask.tobytes()), key


@st.cache_resource(show_spinner="Weighting the attention by what each token writes…", max_entries=2)
def _contributions(key: AnalysisKey, _run: mha_viz.AttentionRun) -> mha_viz.AttentionRun:
    """The run as contributions, keyed by the AnalysisKey with its `lens`."""
    out = attribution.as_contributions(_run)
    out.attentions.setflags(write=False)
    return out


def _lens(cur: Current, run: mha_viz.AttentionRun, key: AnalysisKey):
    """The sidebar's *Show attention as* applied once, for every view, after *Hide tokens*:
    (run, key) as contributions (the key's `lens` says so), or as weights with a note when the
    run has no value path to weigh by."""
    if session.get(keys.LENS) != keys.LENS_CONTRIBUTIONS:
        return run, key
    if seq2seq_views.is_cross(run):
        cur.lens_note = ("Contributions are shown for self-attention: cross-attention is shown as weights (the "
                         "decoder's queries read the encoder's values through another projection).")
        return run, key
    if run.value_norms is None:
        cur.lens_note = (f"The value path of {run.model_name} cannot be read here, so its attention cannot be "
                         "weighted by what each token writes: the weights are shown.")
        return run, key
    key = key._replace(lens=keys.LENS_CONTRIBUTIONS)
    return _contributions(key, run), key


def _layers_to_capture(model: mha_viz.LoadedModel, text: str, cap: int) -> tuple | None:
    """None (every layer) when a full capture fits the budget. Otherwise, before computing
    anything, the layers the user picked under "Layers to capture" (drawn in the sidebar only
    then, at most as many as fit); with none picked, an InputError that says what a full capture
    would cost and what fits."""
    n = mha_viz.tokenize(model, text, cap).n
    room = slots().room(model.device)  # what the server has for one analysis, whatever else runs now
    short = memory.shortfall(memory.analysis_need(model, n), room)
    if not short:
        return None
    per_layer = model.attention_bytes(n, layers=1)
    fit = min(memory.layers_that_fit(model, n, room), model.num_layers - 1)
    full = f"Capturing every head of {model.name} at {n} tokens would hold {short}."
    if fit < 1:
        raise mha_viz.InputError(
            full + " Even one layer does not fit: lower the token limit in the sidebar; the Model "
            "view's whole-text overview shows every head of a long text one head at a time.")
    kept = [l for l in session.get(keys.CAPTURE_LAYERS, []) if isinstance(l, int) and 0 <= l < model.num_layers]
    session.settle(keys.CAPTURE_LAYERS, kept[:fit])
    with st.sidebar:
        chosen = st.multiselect(
            "Layers to capture", list(range(model.num_layers)), key=keys.CAPTURE_LAYERS, persist_state=KEEP, max_selections=fit,
            help=f"At {n} tokens one layer's heads hold {size_text(per_layer)}: up to {fit} of the "
                 f"{model.num_layers} layers fit. The model still runs every layer.")
    if not chosen:
        raise mha_viz.InputError(
            full + f" Pick up to {fit} layers under “Layers to capture” in the sidebar ({size_text(per_layer)} "
            "each), or lower the token limit; the Model view's whole-text overview shows every head "
            "one head at a time.")
    return tuple(sorted(chosen))


def _with_last_good(cur: Current) -> Current:
    last = session.get(keys.LAST_GOOD)
    if last is not None:
        cur.run, cur.model, cur.key = last[:3]
        cur.seq2seq = last[3] if len(last) > 3 else None  # a session older than encoder–decoders kept 3
        cur.full_run = session.get(keys.LAST_FULL) or cur.run
        cur.weights_run = cur.run if not cur.run.lens else None
        cur.stale = True
    return cur


def show_status(cur: Current) -> bool:
    """Messages above a view; returns whether there is a run to draw."""
    if cur.error:
        st.error(plain(cur.error), icon="⚠️")
    if cur.notice:
        st.info(cur.notice, icon="✍️")
    if cur.run is None:
        return False
    if cur.stale:
        st.caption(f"Showing the last successful result ({plain(cur.run.model_name)}).")
    seq2seq_views.status(cur)
    if seq2seq_views.is_cross(cur.run):
        if cur.hide_note:
            st.info(plain(cur.hide_note), icon="🙈")
        notes.lens_status(cur)
        return True
    run = cur.full_run or cur.run
    if run.truncated:
        limit = min(cur.model.max_positions, token_cap()) if cur.model else run.n
        why = ("the model's positions" if cur.model and cur.model.max_positions <= token_cap()
               else "the sidebar's *Token limit*")
        total = count_text(run.num_input_tokens, run.num_input_tokens_is_estimate)
        st.warning(f"The text has {total} tokens; the first {run.n} were kept "
                   f"(at most {limit} tokens: {why}).", icon="✂️")
    notes.unknown_status(cur, run)
    notes.hidden_status(cur)
    notes.lens_status(cur)
    return True


def current() -> Current:
    """The `Current` that app.py computed for this rerun."""
    return session.get(keys.CURRENT) or Current(notice="Loading…")
