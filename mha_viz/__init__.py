"""mha-viz core: capture every head's attention and turn it into arrays and figures.

Public API (docs/api.md lists every name of `__all__` once)::

    model = mha_viz.load_model("minilm", device="auto", local_attention=False)
    run = mha_viz.analyze(model, "The cat sat on the mat.")   # -> AttentionRun
    run.tokens, run.attentions  # (layers, heads, n, n) float32
    toks = mha_viz.tokenize(model, text, max_tokens=128)  # the one door from text to token ids
    table = mha_viz.head_table(run)  # one row per head; mha_viz.metrics, mha_viz.figures, mha_viz.corpus: the rest

Nothing in this package imports Streamlit except `mha_viz.ui`.
"""

from mha_viz.analyze_text import analyze
from mha_viz.capture.finite import NotFiniteError
from mha_viz.capture.generation import Generation, GenerationError, Step
from mha_viz.capture.run import AttentionRun
from mha_viz.capture.seq2seq import CrossAttention, EncoderDecoderRun
from mha_viz.capture.sinks import Hidden, drop_tokens, hide_mask
from mha_viz.circuits.composition import composition_baseline, composition_scores, copying_scores
from mha_viz.circuits.edges import Edges
from mha_viz.circuits.path_patching import Circuit, circuit, faithfulness_curve, path_patch, path_patch_many
from mha_viz.circuits.qk_terms import QKTerms, qk_pattern_terms, qk_terms
from mha_viz.corpus.engine import head_examples, head_statistics
from mha_viz.effective import EffectiveAttention, effective_attention
from mha_viz.export.lesson import Lesson, LessonError, lesson_json, read_lesson
from mha_viz.export.notebook import view_notebook
from mha_viz.export.notebook_view import NotebookView
from mha_viz.export.report import html_report
from mha_viz.generate_text import generate
from mha_viz.interventions.attribution import direct_logit, value_weighted
from mha_viz.interventions.estimate import estimate_heads, estimate_positions
from mha_viz.metrics.head_stats import head_table
from mha_viz.package_version import version as _version  # `__version__`
from mha_viz.scan.result import Scan
from mha_viz.scan.run import scan
from mha_viz.tasks.edges_set import TaskEdges, edge_attribution
from mha_viz.tasks.patching_set import TaskPatching, patch_heads
from mha_viz.tasks.prompt_set import PromptSet
from mha_viz.tasks.retrieval import retrieval_scores
from mha_viz.text.tokenize import InputError, Tokens, count_tokens, session_cap, token_limit, tokenize, unknown_tokens
from mha_viz.views.comparison import Comparison, compare
from mha_viz.views.overview import Overview, overview
from mha_viz.views.token_pair import heads_from_tokens
from mha_viz_models import BUNDLED, HUB_SUGGESTIONS, PRECISIONS, LoadedModel, ModelLoadError, emulated_note
from mha_viz_models import random_twin as random_baseline
from mha_viz_models.loading.loader import load_model

__version__ = _version()  # the repository's version when run from a clone, else the installed one

__all__ = [
    # models
    "BUNDLED", "HUB_SUGGESTIONS", "PRECISIONS", "LoadedModel", "ModelLoadError", "load_model", "random_baseline",
    "emulated_note",
    # text in
    "InputError", "Tokens", "count_tokens", "session_cap", "token_limit", "tokenize", "unknown_tokens",
    # a run captured
    "analyze", "AttentionRun", "NotFiniteError", "CrossAttention", "EncoderDecoderRun", "Hidden", "drop_tokens",
    "hide_mask", "generate", "Generation", "GenerationError", "Step",
    # views, metrics, what heads write, a corpus, a report
    "compare", "Comparison", "overview", "Overview", "scan", "Scan", "head_table", "value_weighted", "direct_logit",
    "patch_heads", "PromptSet", "TaskPatching", "retrieval_scores", "heads_from_tokens", "effective_attention",
    "EffectiveAttention",
    "estimate_heads", "estimate_positions", "head_statistics", "head_examples", "html_report",
    "view_notebook", "NotebookView",
    # lessons a class follows
    "Lesson", "LessonError", "read_lesson", "lesson_json",
    # why a head looks where it looks, how heads compose
    "qk_terms", "qk_pattern_terms", "QKTerms", "composition_scores", "composition_baseline", "copying_scores",
    # circuits of heads
    "edge_attribution", "Edges", "TaskEdges", "path_patch", "path_patch_many", "circuit", "Circuit",
    "faithfulness_curve",
]
