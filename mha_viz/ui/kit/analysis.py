"""Metrics behind the metric views, cached so that switching views or options recomputes
nothing. Keys are the run's `AnalysisKey` (or its `ModelKey` for what depends on the model
only); arrays are shared read-only. Every computation on text runs under the key's token cap
(`session_cap(key.cap)`), so that a result depends on its key alone: a cached result is shared
by every session, whatever the cap of the session that computed it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import mha_viz
import mha_viz_models
from mha_viz import metrics
from mha_viz.capture import seq2seq, sinks
from mha_viz.circuits import ahead
from mha_viz.circuits import composition as compose
from mha_viz.circuits import need as circuit_need
from mha_viz.circuits import score_terms as circuits
from mha_viz.interventions import ablation, ablation_outcome, attribution
from mha_viz.ui.kit import plans
from mha_viz.ui.kit.analysis_key import AnalysisKey, ModelKey
from mha_viz.views import teaching


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def weights(_model: mha_viz.LoadedModel):
    """The model's per-head weights with each head's copying score (`composition.table_weights`), or None when
    its architecture does not expose them."""
    return None if _model is None else compose.table_weights(_model)


def similarity_weights(_model: mha_viz.LoadedModel, kind: str):
    """The per-head weights similarity `kind` reads, without the copying scores a head table adds; None for a kind
    that reads the run alone (JS, cosine, CKA, the R overlap): its random-init baseline then computes no weights of
    the twin (on SmolLM2 the twin's copying scores were 2 of the 9 CPU-s of opening Head similarity)."""
    if _model is None or "weights" not in metrics.SIMILARITIES[kind].needs:
        return None
    return compose.table_weights(_model, copying=False)


def metric_device(_model) -> str | None:
    """Where the per-text metrics run: the model's GPU when it is on one, else the CPU (None)."""
    device = getattr(_model, "device", None)
    return str(device) if device is not None and getattr(device, "type", "cpu") == "cuda" else None


@st.cache_resource(show_spinner="Computing the head table…", max_entries=16)
def head_table(key: AnalysisKey, _run, _model) -> pd.DataFrame:
    return metrics.head_table(_run, weights(_model), device=metric_device(_model))


@st.cache_resource(show_spinner=False, max_entries=32)
def head_rows(key: AnalysisKey, heads: tuple[int, ...], _run, _model) -> pd.DataFrame:
    """`head_table`'s rows of `heads` (flat indices layer · H + head), in that order: of a dense run computed for
    those heads alone (`metrics.select_heads`: every column is the head's own, so the rows are the whole table's),
    of a long run (its scan's summary, already made) or a run with hidden tokens read from the whole table."""
    if not _run.is_dense or _run.hidden is not None:  # hidden tokens decide whether the first key is a sink: the
        # whole table reads them (a sub-run does not carry them)
        return head_table(key, _run, _model).iloc[list(heads)].reset_index(drop=True)
    sub, sub_weights = metrics.select_heads(_run, list(heads), weights(_model))
    rows = metrics.head_table(sub, sub_weights, device=metric_device(_model))
    layers, hs = divmod(np.asarray(heads), _run.num_heads)
    rows["layer"] = np.asarray(_run.layer_ids)[layers]  # the sub-run's one layer and its heads 0..k-1: the run's own
    rows["head"] = hs
    return rows


@st.cache_resource(show_spinner=False, max_entries=16)
def learned_sink_share(key: AnalysisKey, _full_run) -> np.ndarray | None:
    """Each head's share given to a learned sink (`sinks.learned_sink_share`) of the run before hiding
    and the lens (key: that run's): a sum over every probability, once per analysis, not per rerun."""
    share = sinks.learned_sink_share(_full_run)
    return None if share is None else _frozen(share)


@st.cache_resource(show_spinner="Comparing weights and contributions…", max_entries=8)
def lens_divergence(key: AnalysisKey, _weights, _contributions) -> np.ndarray:
    """(layers, heads) JS divergence between each head's weights and contributions (key: the lens's)."""
    return _frozen(attribution.lens_divergence(_weights, _contributions))


@st.cache_resource(show_spinner="Comparing every pair of heads…", max_entries=32)
def similarity(key: AnalysisKey, kind: str, _run, _model) -> np.ndarray:
    if metrics.SIMILARITIES[kind].needs == "weights":
        return weight_similarity(key.model, key.layers, kind, _run, _model)
    return _frozen(metrics.head_similarity(_run, kind, weights=similarity_weights(_model, kind),
                                           device=metric_device(_model)))


@st.cache_resource(show_spinner="Comparing the heads' weights (once per model)…", max_entries=8)
def weight_similarity(model_key: ModelKey, layers: tuple[int, ...] | None, kind: str, _run, _model) -> np.ndarray:
    """Independent of the text, but not of which layers the run holds (its rows)."""
    return _frozen(metrics.head_similarity(_run, kind, weights=similarity_weights(_model, kind)))


@st.cache_resource(show_spinner="Building the same architecture at random initialisation…", max_entries=2)
def baseline_model(model_key: ModelKey, _model) -> mha_viz.LoadedModel:
    return mha_viz_models.random_twin(_model, seed=0)


@st.cache_resource(show_spinner="Running the random-init baseline…", max_entries=8)
def baseline_similarity(key: AnalysisKey, kind: str, _run, _model, _seq2seq=None) -> np.ndarray:
    """The same similarity on the random-init twin of the model, on the same tokens (`_seq2seq`:
    an encoder–decoder's whole result, whose part `key.part` is `_run`; the key says which)."""
    base = baseline_model(key.model, _model)
    if metrics.SIMILARITIES[kind].needs == "weights":  # no text involved: skip the forward pass
        return _frozen(metrics.head_similarity(_run, kind, weights=similarity_weights(base, kind)))
    n = _run.n if _run.hidden is None else _run.hidden.n_before  # the tokens before *Hide tokens*
    res = _seq2seq
    if base.is_encoder_decoder and res is not None:  # the same part, on the same source and target ids
        base_run = seq2seq.same_tokens(base, res).parts[key.part]
    else:
        with mha_viz.text.session_cap(key.cap):
            base_run = mha_viz.analyze(base, _run.text, max_tokens=n, layers=_run.layer_ids)
    if _run.hidden is not None and base_run.n == n:  # the same tokens hidden from the baseline
        hide = np.ones(n, dtype=bool)
        hide[_run.hidden.kept] = False
        base_run = base_run.drop_tokens(hide)
    return _frozen(metrics.head_similarity(base_run, kind, weights=similarity_weights(base, kind)))


@st.cache_resource(show_spinner="Laying out the heads (MDS)…", max_entries=16)
def head_map_points(key: AnalysisKey, kind: str, _dissimilarity: np.ndarray) -> np.ndarray:
    return _frozen(metrics.mds(_dissimilarity))


@st.cache_resource(show_spinner="Clustering the heads…", max_entries=16)
def cluster_order(key: AnalysisKey, kind: str, _dissimilarity: np.ndarray) -> np.ndarray:
    return _frozen(metrics.cluster_order(_dissimilarity))


# 4 entries: a rollout holds L·n² float32, up to the capture budget (SmolLM2 at 4,096 tokens: 1.9 GiB), more than a
# dense run (MHA_VIZ_DENSE_MB); 16 such could hold 30 GiB on one server
@st.cache_resource(show_spinner="Rolling attention out across layers…", max_entries=4)
def rollout(key: AnalysisKey, _run) -> np.ndarray:
    return _frozen(metrics.rollout(_run))


# 4 entries each: one layer's rollout or one head's holds n² float32, up to a third of the capture budget
@st.cache_resource(show_spinner="Rolling attention out up to this layer…", max_entries=4)
def rollout_layer(key: AnalysisKey, layer: int, _run) -> np.ndarray:
    """One layer's rollout alone, where every layer's is over the capture budget (`metrics.rollout_layer`)."""
    return _frozen(metrics.rollout_layer(_run, layer))


@st.cache_resource(show_spinner="Tracing the head back through the layers below…", max_entries=4)
def rollout_through_head(key: AnalysisKey, layer: int, head: int, _run, _below: np.ndarray | None) -> np.ndarray:
    """One head's rollout (`metrics.rollout_through_head`) from R_{l−1} (`_below`: the rollout of the layer below,
    which `key` and `layer` decide; None at layer 0): an n × n product, kept for every rerun."""
    return _frozen(metrics.rollout_through_head(_run, layer, head, below=_below))


@st.cache_resource(show_spinner="Computing attention flow (max-flow for every token pair)…", max_entries=16)
def flow(key: AnalysisKey, layer: int, _run) -> np.ndarray:
    return _frozen(metrics.flow(_run, layer))


def available(kind: str, run, model) -> str | None:
    """Why a similarity cannot be computed for this run, or None when it can."""
    needs = metrics.SIMILARITIES[kind].needs
    if kind == "cka" and run.n < 4:
        return "the debiased CKA needs at least 4 tokens"
    if "outputs" in needs and run.head_outputs is None:
        if getattr(run, "summary", None) is not None:  # a long run: rows recomputed, no head outputs kept
            return (f"a run of {run.n} tokens this long keeps no head outputs (it recomputes only the attention "
                    "rows a view draws): lower the token limit in the sidebar to compare them")
        return "this model's head outputs cannot be captured"
    w = similarity_weights(model, kind)
    if "weights" in needs and w is None:
        return "this model's per-head weights cannot be read"
    if "weights" in needs and metrics.missing_weights(kind, w):
        return (f"its {', '.join(metrics.missing_weights(kind, w))} are read only where mha-viz's own MHA computes the "
                f"model's attention, and it does not here ({model.stand_in})")
    return None


@st.cache_resource(show_spinner="Running the text through the model…", max_entries=4)
def recording(key: AnalysisKey, upto: int | None, _model, _full_run) -> teaching.Recording:
    """What the walkthrough reads (key: the text's, `AnalysisKey.with_text`; `_full_run`: its run with every token):
    a long run's own spill of each layer (`teaching.recording_of`: no second pass), else one pass over the text's
    first `upto` tokens (None: all)."""
    own = teaching.recording_of(_full_run)
    if own is not None:
        return own
    with mha_viz.text.session_cap(key.cap):
        return plans.run_admitted(teaching.plan_record(_model, key.text, min(key.cap, upto or key.cap)))


def _recording_for(key: AnalysisKey, start: int, _model, _full_run) -> teaching.Recording:
    """The recording a window from `start` reads: a decoder's window sees no later token, so a text that is not a
    long run is run up to the window's end only (at the text's start, its first 64 tokens: no more than before
    the walkthrough read anywhere); an encoder's reads the whole text."""
    _start, stop = teaching.window(_full_run.n, start)
    return recording(key, stop if _model.is_causal else None, _model, _full_run)


@st.cache_resource(show_spinner="Walking through the head…", max_entries=32)
def walkthrough(key: AnalysisKey, layer: int, head: int, start: int, _model, _full_run) -> teaching.Walkthrough:
    """One head's steps over the window from `start` (the Teaching and Queries and keys pages share them), from the
    text's recording: switching heads or layers runs no model."""
    return teaching.walkthrough(_model, key.text, layer, head, recording=_recording_for(key, start, _model, _full_run),
                                start=start)


def layer_probabilities(key: AnalysisKey, layer: int, start: int, _model, _full_run) -> np.ndarray:
    """Every head's probabilities (H, n, n) of one layer over the walkthrough's window (`walkthrough`'s key)."""
    return teaching.layer_probabilities(_model, _recording_for(key, start, _model, _full_run), layer, start)


@st.cache_resource(show_spinner="Splitting the score into what wrote it…", max_entries=32)
def qk_terms(key: AnalysisKey, layer: int, head: int, query: int, key_pos: int, _model) -> circuits.QKTerms:
    """`mha_viz.circuits.qk_terms` of the key's text (key: its text key), under its cap, admitted for its plan's need
    (raises admission.Busy when the server is full: call it through `resources.one_at_a_time`)."""
    with mha_viz.text.session_cap(key.cap):
        return plans.run_admitted(circuits.plan_qk_terms(_model, key.text, layer, head, query, key_pos,
                                                         max_tokens=key.cap))


@st.cache_resource(show_spinner="Splitting every score of the head…", max_entries=16)
def qk_pattern_terms(key: AnalysisKey, layer: int, head: int, _model) -> circuits.QKTerms:
    """`mha_viz.circuits.qk_pattern_terms` of the key's text (key: its text key), under its cap, admitted as
    `qk_terms` is."""
    with mha_viz.text.session_cap(key.cap):
        return plans.run_admitted(circuits.plan_qk_pattern_terms(_model, key.text, layer, head, max_tokens=key.cap))


@st.cache_resource(show_spinner="Reading how the heads compose…", max_entries=4)
def composition(model_key: ModelKey, _model) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """`composition_scores` (on the model's GPU when it is on one) and their random baseline: the weights
    alone, once per model."""
    scores, baseline = plans.run_admitted(circuit_need.plan_composition(_model, device=metric_device(_model)))
    return {k: _frozen(v) for k, v in scores.items()}, baseline


def ahead_of_visits(_model) -> None:
    """Start computing the model's weights-only results (composition and copying scores) in a thread of their
    own, where they take seconds, or reading back a large model's where an earlier process kept them
    (`circuits.ahead`): called once a session's page is drawn, so that the Head composition page finds them known."""
    if _model is not None:
        ahead.start(_model, device=metric_device(_model))


@st.cache_resource(show_spinner="Reading each head's OV circuit…", max_entries=4)
def copying(model_key: ModelKey, _model) -> np.ndarray:
    """`copying_scores`, once per model."""
    return _frozen(plans.run_admitted(circuit_need.plan_copying(_model)))


def _text_key(key: AnalysisKey) -> AnalysisKey:
    """What switching heads off depends on: the model, the text and the cap (not the layers captured
    or the tokens hidden from the run)."""
    return key.with_text(key.text)


@st.cache_resource(show_spinner="Running the model with every head on…", max_entries=16)
def _unablated(key: AnalysisKey, _model, _run=None) -> ablation_outcome.Outcome:
    with mha_viz.text.session_cap(key.cap):  # read off the run's forward where it made the same (`from_run`)
        return plans.run_admitted(ablation_outcome.plan_unablated(_model, key.text, max_tokens=key.cap, run=_run))


@st.cache_resource(show_spinner="Running with the heads switched off…", max_entries=64)
def _ablated(key: AnalysisKey, keep_bytes: bytes, mean_ablation: bool, _model) -> ablation_outcome.Outcome:
    keep = np.frombuffer(keep_bytes, dtype=bool).reshape(_model.num_layers, _model.num_heads)
    base = _unablated(key, _model)
    with mha_viz.text.session_cap(key.cap):
        return plans.run_admitted(ablation_outcome.plan_ablated(_model, key.text, keep, mean_ablation=mean_ablation,
                                                                base=base, max_tokens=key.cap))


def outcomes(key: AnalysisKey, keep: np.ndarray, mean_ablation: bool, model,
             run=None) -> tuple[ablation_outcome.Outcome, ...]:
    """(every head on, the heads where `keep` (layers, heads) is False off) on `key`'s text: the
    loss, the top-k predictions and the sentence embedding (`ablation_outcome`), each pass admitted for its plan's
    need (raises admission.Busy when the server is full: call it through `resources.one_at_a_time`). Cached per head
    set; with every head on, one Outcome serves both. Raises InputError for a text that cannot be
    scored. run: the text's analysis, whose forward may stand for the pass with every head on."""
    key = _text_key(key)
    base = _unablated(key, model, run)
    keep = np.ascontiguousarray(keep, dtype=bool)
    return base, (base if keep.all() else _ablated(key, keep.tobytes(), bool(mean_ablation), model))


@st.cache_resource(show_spinner="Scoring every head…", max_entries=8)
def gradient_importance(key: AnalysisKey, _model, _plan=None) -> np.ndarray:
    """key: the text scored (the user's, or the bundled paragraph) and the cap it is read under; `_plan`: its
    `ablation.plan_importance`, made before the page's button (else made here). Takes one of the server's analysis
    slots for the plan's need (raises admission.Busy when none is free: call it through
    `resources.one_at_a_time`)."""
    with mha_viz.text.session_cap(key.cap):
        return _frozen(plans.run_admitted(_plan or ablation.plan_importance(_model, key.text, max_tokens=key.cap)))


@st.cache_resource(show_spinner="Pruning heads in importance order and in 5 random orders…", max_entries=8)
def pruning(key: AnalysisKey, mean_ablation: bool, _model) -> pd.DataFrame:
    fractions = ablation.PRUNE_FRACTIONS
    imp = gradient_importance(key, _model)  # before taking a slot of its own: the importance takes one
    order = np.argsort(imp.ravel())
    orders = [order] + [np.random.default_rng(seed).permutation(imp.size) for seed in range(5)]
    with mha_viz.text.session_cap(key.cap):
        curves = plans.run_admitted(ablation.plan_pruning(_model, key.text, orders, fractions,
                                                          mean_ablation=mean_ablation, max_tokens=key.cap))
    by_importance, randoms = curves[0], curves[1:]
    return pd.DataFrame({"fraction of heads off": fractions, "importance order": by_importance,
                         "random mean": randoms.mean(0), "random sd": randoms.std(0),
                         **{f"random seed {s}": randoms[s] for s in range(5)}})


