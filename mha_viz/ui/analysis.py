"""Metrics behind the metric views, cached so that switching views or options recomputes
nothing. Keys are the run's key from `state.Current`; arrays are shared read-only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import mha_viz
from mha_viz import metrics


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def weights(_model: mha_viz.LoadedModel):
    """The model's per-head weights, or None when its architecture does not expose them."""
    if _model is None or not _model.has_head_outputs:
        return None
    try:
        return _model.head_weights()
    except Exception:  # noqa: BLE001 - weight-based measures are then listed as unavailable
        return None


@st.cache_resource(show_spinner="Computing the head table…", max_entries=16)
def head_table(key: tuple, _run, _model) -> pd.DataFrame:
    return metrics.head_table(_run, weights(_model))


@st.cache_resource(show_spinner="Comparing every pair of heads…", max_entries=32)
def similarity(key: tuple, kind: str, _run, _model) -> np.ndarray:
    if metrics.SIMILARITIES[kind].needs == "weights":
        return weight_similarity(key[0], kind, _run, _model)
    return _frozen(metrics.head_similarity(_run, kind, weights=weights(_model)))


@st.cache_resource(show_spinner="Comparing the heads' weights (once per model)…", max_entries=8)
def weight_similarity(model_key: tuple, kind: str, _run, _model) -> np.ndarray:
    return _frozen(metrics.head_similarity(_run, kind, weights=weights(_model)))


@st.cache_resource(show_spinner="Building the same architecture at random initialisation…", max_entries=2)
def baseline_model(model_key: tuple, _model) -> mha_viz.LoadedModel:
    return mha_viz.random_baseline(_model, seed=0)


@st.cache_resource(show_spinner="Running the random-init baseline…", max_entries=8)
def baseline_similarity(key: tuple, kind: str, _run, _model) -> np.ndarray:
    base = baseline_model(key[0], _model)
    if metrics.SIMILARITIES[kind].needs == "weights":  # no text involved: skip the forward pass
        return _frozen(metrics.head_similarity(_run, kind, weights=weights(base)))
    base_run = mha_viz.analyze(base, _run.text, max_tokens=_run.n, layers=_run.layer_ids)
    return _frozen(metrics.head_similarity(base_run, kind, weights=weights(base)))


@st.cache_resource(show_spinner="Laying out the heads (MDS)…", max_entries=16)
def head_map(key: tuple, kind: str, _dissimilarity: np.ndarray) -> np.ndarray:
    return _frozen(metrics.mds(_dissimilarity))


@st.cache_resource(show_spinner="Clustering the heads…", max_entries=16)
def cluster_order(key: tuple, kind: str, _dissimilarity: np.ndarray) -> np.ndarray:
    return _frozen(metrics.cluster_order(_dissimilarity))


@st.cache_resource(show_spinner="Rolling attention out across layers…", max_entries=16)
def rollout(key: tuple, _run) -> np.ndarray:
    return _frozen(metrics.rollout(_run))


@st.cache_resource(show_spinner="Computing attention flow (max-flow for every token pair)…", max_entries=16)
def flow(key: tuple, layer: int, _run) -> np.ndarray:
    return _frozen(metrics.flow(_run, layer))


def available(kind: str, run, model) -> str | None:
    """Why a similarity cannot be computed for this run, or None when it can."""
    needs = metrics.SIMILARITIES[kind].needs
    if kind == "cka" and run.n < 4:
        return "the debiased CKA needs at least 4 tokens"
    if "outputs" in needs and run.head_outputs is None:
        return "this model's head outputs cannot be captured"
    if "weights" in needs and weights(model) is None:
        return "this model's per-head weights cannot be read"
    return None


@st.cache_resource(show_spinner="Walking through the head…", max_entries=16)
def walkthrough(key: tuple, layer: int, head: int, _model):
    from mha_viz import teaching
    return teaching.walkthrough(_model, key[1], layer, head)


@st.cache_resource(show_spinner="Running with the heads switched off…", max_entries=64)
def masked_loss(key: tuple, keep_bytes: bytes, mean_ablation: bool, _model) -> float:
    from mha_viz import ablation
    keep = np.frombuffer(keep_bytes, dtype=bool).reshape(_model.num_layers, _model.num_heads)
    return ablation.masked_loss(_model, key[1], keep, mean_ablation=mean_ablation, max_tokens=key[2])


@st.cache_resource(show_spinner="Scoring every head…", max_entries=8)
def importance(key: tuple, _model) -> np.ndarray:
    """key: (model key, text)."""
    from mha_viz import ablation
    return _frozen(ablation.head_importance(_model, key[1]))


@st.cache_resource(show_spinner="Pruning heads in importance order and in 5 random orders…", max_entries=8)
def pruning(key: tuple, mean_ablation: bool, _model) -> pd.DataFrame:
    from mha_viz import ablation
    from mha_viz.ui.teach_views import PRUNE_FRACTIONS
    imp = importance(key, _model)
    order = np.argsort(imp.ravel())
    by_importance = ablation.pruning_curve(_model, key[1], order, PRUNE_FRACTIONS, mean_ablation=mean_ablation)
    randoms = np.array([ablation.pruning_curve(_model, key[1], np.random.default_rng(seed).permutation(imp.size),
                                               PRUNE_FRACTIONS, mean_ablation=mean_ablation) for seed in range(5)])
    return pd.DataFrame({"fraction of heads off": PRUNE_FRACTIONS, "importance order": by_importance,
                         "random mean": randoms.mean(0), "random sd": randoms.std(0),
                         **{f"random seed {s}": randoms[s] for s in range(5)}})
