"""A bundled model cut to its first layers, saved as a user's Hugging Face folder (its own weights and tokenizer):
what a test reads where the whole model's depth adds time and nothing the test checks. Each layer of SmolLM2 is
alike (grouped-query heads, RoPE), so six real layers hold what thirty do for a test that compares layer by layer or
opens pages on a run: "smollm2-6". tests/models/test_long_run.py checks the cut against the whole model."""

from __future__ import annotations

import functools
import tempfile

import torch

import mha_viz

FIRST_LAYERS = {"smollm2-6": ("smollm2", 6)}  # name: (bundled model, its first layers kept)


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


def folder(name: str) -> str:
    """The folder of FIRST_LAYERS' `name`: cut and saved once a process (about 3 s for SmolLM2's six layers)."""
    return _kept(name).name


@functools.cache
def _kept(name: str) -> tempfile.TemporaryDirectory:
    """The folder, kept (and so not removed) until the process ends."""
    kept = tempfile.TemporaryDirectory(prefix=f"{name}-")
    first_layers(*FIRST_LAYERS[name], kept.name)
    return kept
