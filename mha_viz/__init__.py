"""mha-viz core: capture every head's attention and turn it into arrays and figures.

The package's face is the names of a user's tasks (docs/api.md lists each once)::

    model = mha_viz.load_model("minilm", device="auto", local_attention=False)
    run = mha_viz.analyze(model, "The cat sat on the mat.")   # -> AttentionRun (a long text: mha_viz.scan)
    toks = mha_viz.tokenize(model, text, max_tokens=128)      # the one door from text to token ids
    table = mha_viz.head_table(run)                           # one row per head
    mha_viz.patch_heads(...), mha_viz.circuit(...), mha_viz.head_statistics(...), mha_viz.view_notebook(...)

Everything else sits in one namespace a feature: `mha_viz.text`, `mha_viz.capture` (hidden tokens, generation,
encoder–decoder runs), `mha_viz.views` (overview, two runs compared, heads from two tokens), `mha_viz.metrics`,
`mha_viz.interventions` (what heads write, estimates), `mha_viz.circuits`, `mha_viz.tasks`, `mha_viz.corpus`,
`mha_viz.export` (lessons, notebooks), `mha_viz.effective`, `mha_viz.figures`. The names the top level held before
issue 53 still work for one release, with a DeprecationWarning that names their new place (`MOVED`).

Nothing in this package imports Streamlit except `mha_viz.ui`.
"""

import importlib
import importlib.util
import warnings

from mha_viz.package_version import version as _version  # `__version__`

# the face: each name -> where it lives ("module:name"), imported on first use (`__getattr__`), so that a process
# that needs none of them (the `mha-viz` launcher, which only starts and watches the app's servers) never imports
# PyTorch or transformers: 429 MB and about 3.4 CPU-s less for it (measured, stop 116)
FACE = {
    # a model, and text into it
    "load_model": "mha_viz_models.loading.loader:load_model",
    "LoadedModel": "mha_viz_models:LoadedModel",
    "ModelLoadError": "mha_viz_models:ModelLoadError",
    "tokenize": "mha_viz.text.tokenize:tokenize",
    "InputError": "mha_viz.text.tokenize:InputError",
    # every head of a text: the run, and one pass over a long one
    "analyze": "mha_viz.analyze_text:analyze",
    "AttentionRun": "mha_viz.capture.run:AttentionRun",
    "scan": "mha_viz.scan.run:scan",
    "Scan": "mha_viz.scan.result:Scan",
    "head_table": "mha_viz.metrics.head_stats:head_table",
    # generation, two runs compared
    "generate": "mha_viz.generate_text:generate",
    "compare": "mha_viz.views.comparison:compare",
    # what heads do for a prediction: attribution, patching over a task, circuits
    "direct_logit": "mha_viz.tasks.dla_set:direct_logit",
    "estimate_heads": "mha_viz.tasks.estimate_set:estimate_heads",
    "patch_heads": "mha_viz.tasks.patching_set:patch_heads",
    "edge_attribution": "mha_viz.tasks.edges_set:edge_attribution",
    "circuit": "mha_viz.tasks.circuit_set:circuit",
    # a corpus, a notebook, a report (figures: `mha_viz.figures`)
    "head_statistics": "mha_viz.corpus.engine:head_statistics",
    "view_notebook": "mha_viz.export.notebook:view_notebook",
    "html_report": "mha_viz.export.report:html_report",
}

# `mha_viz.scan` is the function, not the package `mha_viz/scan/` of its modules: the package (a docstring) is
# imported here, before anything else can, and its name taken off the module, so that `mha_viz.scan` finds the
# function through `__getattr__` (a package's later submodule imports never set its name on the parent again)
importlib.import_module("mha_viz.scan")
del globals()["scan"]

__version__ = _version()  # the repository's version when run from a clone, else the installed one

__all__ = list(FACE)

# what the top level held before issue 53 -> where it lives now ("module:name"); read through `__getattr__`
MOVED = {
    **{name: f"mha_viz_models:{name}" for name in ("BUNDLED", "HUB_SUGGESTIONS", "PRECISIONS", "emulated_note")},
    "random_baseline": "mha_viz_models:random_twin",
    **{name: f"mha_viz.text:{name}" for name in ("Tokens", "count_tokens", "session_cap", "token_limit",
                                                 "unknown_tokens")},
    **{name: f"mha_viz.capture:{name}" for name in ("NotFiniteError", "CrossAttention", "EncoderDecoderRun",
                                                    "Hidden", "drop_tokens", "hide_mask", "Generation",
                                                    "GenerationError")},
    "Step": "mha_viz.capture:GenerationStep",  # one meaning per name: a lesson has its steps too
    **{name: f"mha_viz.views:{name}" for name in ("Comparison", "overview", "Overview", "heads_from_tokens")},
    **{name: f"mha_viz.interventions:{name}" for name in ("value_weighted", "estimate_positions")},
    **{name: f"mha_viz.effective:{name}" for name in ("effective_attention", "EffectiveAttention")},
    **{name: f"mha_viz.tasks:{name}" for name in ("PromptSet", "TaskPatching", "TaskEdges", "retrieval_scores")},
    **{name: f"mha_viz.export:{name}" for name in ("NotebookView", "Lesson", "LessonError", "read_lesson",
                                                   "lesson_json")},
    **{name: f"mha_viz.circuits:{name}" for name in ("qk_terms", "qk_pattern_terms", "QKTerms", "composition_scores",
                                                     "composition_baseline", "copying_scores", "Edges",
                                                     "path_patch", "path_patch_many", "Circuit",
                                                     "faithfulness_curve")},
    "head_examples": "mha_viz.corpus:head_examples",
}


def moved_to(name: str) -> str:
    """Where a name the top level held before issue 53 lives now, as a user writes it ("mha_viz.views.overview")."""
    module, attr = MOVED[name].split(":")
    return f"{module}.{attr}"


def __getattr__(name: str):
    """A name of the face (`FACE`): its object, imported now and kept; an old top-level name: its object, with a
    DeprecationWarning naming its new place; a feature's namespace that nothing imported yet (`mha_viz.effective`):
    imported."""
    if name in FACE:
        module, attr = FACE[name].split(":")
        value = globals()[name] = getattr(importlib.import_module(module), attr)
        return value
    if name not in MOVED:
        if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module 'mha_viz' has no attribute {name!r}")
    module, attr = MOVED[name].split(":")
    warnings.warn(f"mha_viz.{name} moved to {moved_to(name)}; the old name goes in the next release",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(module), attr)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(FACE))
