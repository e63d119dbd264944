"""The public face of `mha_viz.metrics` (a package of one module an idea) and of the figure
modules: every name the single `metrics.py` exported is still there, and no module of the
metrics package or the figure modules reaches into another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mha_viz
from mha_viz import metrics

# Every public name of mha_viz/metrics.py before it became a package.
EXPORTED_BEFORE_SPLIT = [
    "BLOCK_MASS", "BROAD_NORM_ENTROPY", "DIAGONAL_MASS", "FLOW_MAX_TOKENS", "METRICS", "PUNCTUATION",
    "SIMILARITIES", "VERTICAL_MASS", "Measure", "Weights",
    "as_dissimilarity", "as_similarity", "classify", "cluster_order", "detection_patterns", "diversity",
    "diversity_table", "flow", "head_similarity", "head_table", "importance", "layer_diversity", "mds",
    "rollout", "rollout_through_head", "select_heads",
]

# head_table's columns without the DataFrame (the corpus job); the weights a similarity lacks; which
# measures a run gets and which need a part (from the catalogue's `needs`)
ADDED_SINCE = ["head_columns", "missing_weights", "metrics_for", "needing",
               "MIXED_MASS", "MIXED_PART", "SINK_MASS",  # the thresholds of the types beyond the sink
               "head_output_norms",  # `importance`, renamed (one meaning per name, issue 53)
               "EFFECTIVE_MEASURES", "effective_measures",  # a hybrid's other layers measured (issue 55)
               "rollout_layer",  # one layer's rollout alone, for texts too long for every layer's
               "sparse_selection",  # what a sparse layer's indexer keeps of the dense softmax (issue 89)
               "role_mass",  # where a chat's answer looks: each role's share of the assistant's rows (issue 88)
               "memory_split",  # a compressed layer's rows among tokens, memory entries and sink (issue 89)
               "sparse_picks"]  # the indexer's picks as indices, at any length (issue 89)

PACKAGE = Path(mha_viz.__file__).parent
SUBPACKAGES = ("metrics", "figures", "drawing")
# the measures, the figures' face, what figures share, and each feature's own figures
MODULES = ([p for sub in SUBPACKAGES for p in sorted((PACKAGE / sub).glob("*.py"))]
           + sorted((PACKAGE / "features").glob("*/*figures.py")))


@pytest.mark.parametrize("name", EXPORTED_BEFORE_SPLIT)
def test_every_name_exported_before_the_split_is_still_exported(name):
    if name in metrics.RENAMED:  # kept for one release under its old name, saying the new one
        with pytest.warns(DeprecationWarning, match=f"now mha_viz.metrics.{metrics.RENAMED[name]}"):
            assert getattr(metrics, name) is getattr(metrics, metrics.RENAMED[name])
        assert name not in metrics.__all__ and metrics.RENAMED[name] in metrics.__all__
        return
    assert hasattr(metrics, name)
    assert name in metrics.__all__


def test_all_lists_only_public_names_that_exist():
    assert all(not n.startswith("_") and hasattr(metrics, n) for n in metrics.__all__)
    kept = [n for n in EXPORTED_BEFORE_SPLIT if n not in metrics.RENAMED]
    assert sorted(metrics.__all__) == sorted(kept + ADDED_SINCE)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_modules_import_no_private_names_and_metrics_modules_not_their_package(path):
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{path.name} has no docstring"
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            private = [a.name for a in node.names if a.name.startswith("_") and a.name != "annotations"]
            assert not private, f"{path.name} imports private {private} from {node.module}"
            if path.parent.name in SUBPACKAGES and path.name != "__init__.py":
                # a submodule importing its own package would make a cycle through __init__
                assert (node.level, node.module) != (1, None), f"{path.name}: from . import …"
                assert node.module != f"mha_viz.{path.parent.name}", f"{path.name} imports its package"
