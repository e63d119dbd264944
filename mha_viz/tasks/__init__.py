"""Tasks: a causal method run over a set of prompt pairs instead of one (`PromptSet`), each head's mean with
its bootstrap interval and, for patching, a sign-flip permutation p-value (docs/attribution.md, *Tasks*)."""

from mha_viz.tasks.edges_set import TaskEdges, edge_attribution
from mha_viz.tasks.patching_set import TaskPatching, patch_heads
from mha_viz.tasks.prompt_set import PromptSet
from mha_viz.tasks.retrieval import retrieval_scores

__all__ = ["PromptSet", "TaskEdges", "TaskPatching", "edge_attribution", "patch_heads", "retrieval_scores"]
