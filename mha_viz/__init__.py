"""mha-viz core: capture every head's attention and turn it into arrays and figures.

Public API::

    model = mha_viz.load_model("minilm", device="auto", local_attention=False)
    run = mha_viz.analyze(model, "The cat sat on the mat.")   # -> AttentionRun (EncoderDecoderRun: encoder–decoders)
    run.tokens, run.attentions  # (layers, heads, n, n) float32
    toks = mha_viz.tokenize(model, text, max_tokens=128)  # the one door from text to token ids

Nothing in this package imports Streamlit except `mha_viz.ui`.
"""

from mha_viz.capture.generation import Generation, GenerationError, Step, generate
from mha_viz.capture.run import AttentionRun, load_model
from mha_viz.capture.seq2seq import CrossAttention, EncoderDecoderRun, analyze
from mha_viz.capture.sinks import Hidden, drop_tokens, hide_mask
from mha_viz.export.report import html_report
from mha_viz.text.tokenize import InputError, Tokens, count_tokens, session_cap, token_limit, tokenize, unknown_tokens
from mha_viz.views.comparison import Comparison, compare
from mha_viz.views.overview import Overview, overview
from mha_viz_models import BUNDLED, HUB_SUGGESTIONS, PRECISIONS, LoadedModel, ModelLoadError
from mha_viz_models import random_twin as random_baseline

__all__ = [
    "BUNDLED", "HUB_SUGGESTIONS", "PRECISIONS", "AttentionRun", "Comparison", "compare", "InputError", "LoadedModel",
    "ModelLoadError", "Generation", "GenerationError", "Hidden", "drop_tokens", "hide_mask", "Overview", "Step",
    "Tokens", "generate", "analyze", "html_report", "count_tokens", "load_model", "overview", "random_baseline",
    "session_cap", "token_limit", "tokenize", "unknown_tokens", "CrossAttention", "EncoderDecoderRun",
]
