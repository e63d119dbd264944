"""The dense run and the long run of the same text (issue 52's fidelity tests: a long run's views against the
dense run's, where that fits): one place that loads a bundled model and analyses the sample text both ways."""

from __future__ import annotations

import functools
import tempfile

import numpy as np
import torch

import mha_viz
from mha_viz.metrics import row_blocks
from mha_viz.metrics.measures import METRICS
from mha_viz.views import detail
from tests.helpers import ROOT

TEXT = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()
# "smollm2-6": SmolLM2's first six layers with its own weights, a user's folder (`first_layers`). A long run and a dense
# run are compared layer by layer, each layer alike: six real layers hold what thirty do (grouped-query heads, RoPE)
# in a third of the time (the pair below 2.1 s against 6.0 s); the heads compared pairwise 54 against 270
FIRST_LAYERS = {"smollm2-6": ("smollm2", 6)}


def first_layers(name: str, layers: int, out: str) -> None:
    """Save bundled model `name` cut to its first `layers` layers (its weights, its tokenizer) in folder `out`, as a
    Hugging Face folder: what `mha_viz.load_model` reads as a user's model."""
    model = mha_viz.load_model(name, device="cpu")
    hf, config = model.hf_model, model.hf_model.config
    assert layers < config.num_hidden_layers
    cut = type(config).from_dict({**config.to_dict(), "num_hidden_layers": layers})
    if getattr(cut, "layer_types", None):
        cut.layer_types = list(config.layer_types[:layers])
    with torch.device("meta"):
        small = type(hf)(cut)
    kept = {k: v for k, v in hf.state_dict().items()
            if not k.startswith("model.layers.") or int(k.split(".")[2]) < layers}
    small.load_state_dict(kept, strict=True, assign=True)
    small.save_pretrained(out)
    model.tokenizer.save_pretrained(out)


def load(name: str):
    """A bundled model by its name, or one of FIRST_LAYERS' (saved once a process)."""
    return mha_viz.load_model(_folder(name).name if name in FIRST_LAYERS else name, device="cpu")


@functools.cache
def _folder(name: str) -> tempfile.TemporaryDirectory:
    """The folder of FIRST_LAYERS' `name`, kept (and so not removed) until the process ends."""
    kept = tempfile.TemporaryDirectory(prefix=f"{name}-")
    first_layers(*FIRST_LAYERS[name], kept.name)
    return kept


def dense_and_long(name: str, n: int = 600, text: str = TEXT):
    """(model, dense run, long run) of the first n tokens of `text` (fewer where the model reads fewer): made once a
    test process, for every file that compares a long run's views with the dense run's (the whole SmolLM2's pair
    cost about 6 s on 2 cores; its FIRST_LAYERS', 6 of 30 layers, 2.1 s, and 2.9 s to cut and save). The tests read
    them; what a test adds to the long run (its value norms) is what the app adds."""
    return _made(name, n, text)  # one key however the caller names the arguments


@functools.cache
def _made(name: str, n: int, text: str):
    model = load(name)
    cap = min(n, model.max_positions)
    dense = mha_viz.analyze(model, text, max_tokens=cap, dense=True)
    long = mha_viz.analyze(model, text, max_tokens=cap, dense=False)
    assert dense.is_dense and not long.is_dense and long.tokens == dense.tokens
    return model, dense, long


def assert_same_rows(ours, ref, atol: float = 1e-5) -> None:
    """`ours` (a long run) answers rows, layer_rows, head, column and pooled_head as the dense run `ref` holds
    them, within `atol`, on three layers (a head each) and three keys."""
    n, edges = ref.n, detail.block_edges(ref.n, 48)
    for layer in sorted({0, ref.num_layers // 2, ref.num_layers - 1}):
        head = (3 * layer + 1) % ref.num_heads
        a = ref.attentions[layer, head]
        np.testing.assert_allclose(ours.rows(layer, head, 5, 77), a[5:77], atol=atol)
        np.testing.assert_allclose(ours.rows(layer, head, n - 1, n), a[n - 1:], atol=atol)
        np.testing.assert_allclose(ours.layer_rows(layer, n // 6, n // 2), ref.attentions[layer, :, n // 6:n // 2],
                                   atol=atol)
        np.testing.assert_allclose(ours.head(layer, head), a, atol=atol)
        for key in (0, n // 3, n - 1):
            np.testing.assert_allclose(ours.column(layer, head, key), a[:, key], atol=atol)
        top, mean, _ = detail.pooled(a, 48)  # the whole head pooled at once, by the other code
        pooled_top, pooled_mean = ours.pooled_head(layer, head, edges)
        np.testing.assert_allclose(pooled_top, top, atol=atol)
        np.testing.assert_allclose(pooled_mean, mean, atol=1e-6)
        # every head of the layer at once, as rollout reads it: each block over only the keys it spans
        np.testing.assert_allclose(row_blocks.head_mean(ours, layer), ref.attentions[layer].mean(0, dtype=np.float64),
                                   atol=atol)


def assert_same_table(ours, ref) -> None:
    """A long run's head table `ours` (its scan's pattern columns) equals the dense run's `ref` within 1e-5
    (relative for the unbounded measures: entropy in nats, distance in tokens)."""
    numeric = [c for c in ours.columns if c not in ("layer", "head", "pattern")]
    assert len(numeric) >= 10 and set(numeric) <= set(ref.columns)
    for column in numeric:
        bounded = column in METRICS and METRICS[column].bounded
        np.testing.assert_allclose(ours[column].to_numpy(float), ref[column].to_numpy(float), atol=1e-5,
                                   rtol=0 if bounded else 1e-5, err_msg=column)
