"""Why heads look where they look and how they compose: a score split into the writes behind its query
and key (`qk_terms`, over `sides`), the weights' composition and copying scores (`composition`), and
circuits: every edge between components estimated (`edges`) and checked by path patching (`path_patching`)."""

from mha_viz.circuits.composition import composition_baseline, composition_scores, copying_scores
from mha_viz.circuits.edges import Edges
from mha_viz.circuits.path_patching import (
    Circuit,
    circuit,
    curve_sizes,
    faithfulness_curve,
    path_patch,
    path_patch_many,
)
from mha_viz.circuits.score_terms import QKTerms, qk_pattern_terms, qk_terms

__all__ = ["Circuit", "Edges", "QKTerms", "circuit", "composition_baseline", "composition_scores", "copying_scores",
           "curve_sizes", "faithfulness_curve", "path_patch", "path_patch_many", "qk_pattern_terms", "qk_terms"]
