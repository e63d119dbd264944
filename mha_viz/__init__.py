"""mha-viz core: capture every head's attention and turn it into arrays and figures.

Public API::

    model = mha_viz.load_model("minilm", device="auto", local_attention=False)
    run = mha_viz.analyze(model, "The cat sat on the mat.")   # -> AttentionRun
    run.tokens, run.attentions  # (layers, heads, n, n) float32

Nothing in this package imports Streamlit except `mha_viz.ui`.
"""

from models import BUNDLED, HUB_SUGGESTIONS, LoadedModel, ModelLoadError
from models import random_twin as random_baseline

from .capture import AttentionRun, InputError, Overview, analyze, load_model, overview, token_limit

__all__ = [
    "BUNDLED", "HUB_SUGGESTIONS", "AttentionRun", "InputError", "LoadedModel", "ModelLoadError",
    "Overview", "analyze", "load_model", "overview", "random_baseline", "token_limit",
]
