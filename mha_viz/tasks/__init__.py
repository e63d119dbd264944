"""Tasks: a causal method run over a set of prompt pairs instead of one (`PromptSet`), each head's mean with
its bootstrap interval and, for patching, a sign-flip permutation p-value (docs/attribution.md, *Tasks*)."""

from mha_viz.tasks.circuit_set import TaskFaithfulness, TaskPathPatching, circuit, faithfulness_set, path_patch_many
from mha_viz.tasks.edges_set import TaskEdges, edge_attribution
from mha_viz.tasks.patching_set import TaskPatching, patch_heads
from mha_viz.tasks.prompt_set import PromptSet
from mha_viz.tasks.retrieval import find_retrieval, retrieval_scores

__all__ = ["PromptSet", "TaskEdges", "TaskFaithfulness", "TaskPatching", "TaskPathPatching", "circuit",
           "edge_attribution", "faithfulness_set", "find_retrieval", "patch_heads", "path_patch_many",
           "retrieval_scores"]
