"""Head metrics, vectorized over all heads (definitions: `docs/head-metrics.md`).

One module an idea, every public name re-exported here (`from mha_viz import metrics;
metrics.head_table(...)`):

- `measures`: `Measure`, `METRICS`, `SIMILARITIES` (each measure's one-line formula and what
  high and low values mean, for the UI), the smoothing constants and the pattern-class
  thresholds; `metrics_for` and `needing` (which measures a run gets, from each one's `needs`);
  its docstring says what adding a head metric takes.
- `head_stats`: `head_table`, per-head pattern statistics and pattern classes (section 1),
  plus the importance norms of section 3 when the run has head outputs and the weights are given.
- `similarity`: `head_similarity`, every pair of heads compared (section 2): JS divergence and
  cosine of patterns, output CKA (debiased), residual correlation, the seed's R_ij, QK / OV
  weight cosines; `select_heads`, `as_similarity`, `as_dissimilarity`.
- `diversity`: `diversity`, `layer_diversity`, `diversity_table`: the diversity D of sets of heads.
- `across_layers`: `rollout`, `rollout_layer`, `rollout_through_head`, `flow`: attention across layers (section 4).
- `layout`: `cluster_order`, `mds`: layouts of a dissimilarity matrix for the views.
- `indexer_picks`: `sparse_selection`: a sparse-attention layer's picked keys against its dense softmax;
  `sparse_picks`: the picks alone, as indices (what a long run keeps).
- `memory_shares`: `memory_split`: a compressed layer's rows split among tokens, memory entries and the sink.
- `head_writes`: `Weights` and what each head writes (shared by head_stats and similarity).

Functions take an `AttentionRun` (and, where weights matter, the dict of
`LoadedModel.head_weights()`) and return plain numpy / pandas.
"""

from mha_viz.metrics.across_layers import FLOW_MAX_TOKENS, flow, rollout, rollout_layer, rollout_through_head
from mha_viz.metrics.chat_shares import role_mass
from mha_viz.metrics.head_diversity import diversity, diversity_table, layer_diversity
from mha_viz.metrics.head_stats import classify, detection_patterns, head_columns, head_table
from mha_viz.metrics.head_writes import Weights
from mha_viz.metrics.indexer_picks import sparse_picks, sparse_selection
from mha_viz.metrics.layout import cluster_order, mds
from mha_viz.metrics.measures import (
    BLOCK_MASS,
    BROAD_NORM_ENTROPY,
    DIAGONAL_MASS,
    METRICS,
    MIXED_MASS,
    MIXED_PART,
    SIMILARITIES,
    SINK_MASS,
    VERTICAL_MASS,
    Measure,
    metrics_for,
    needing,
)
from mha_viz.metrics.memory_shares import memory_split
from mha_viz.metrics.mixing_measures import EFFECTIVE_MEASURES, effective_measures
from mha_viz.metrics.output_norms import head_output_norms
from mha_viz.metrics.row_table import PUNCTUATION
from mha_viz.metrics.similarity import as_dissimilarity, as_similarity, head_similarity, missing_weights, select_heads

__all__ = [
    "BLOCK_MASS", "BROAD_NORM_ENTROPY", "DIAGONAL_MASS", "EFFECTIVE_MEASURES", "FLOW_MAX_TOKENS", "METRICS",
    "MIXED_MASS", "MIXED_PART", "PUNCTUATION", "SIMILARITIES", "SINK_MASS", "VERTICAL_MASS", "Measure", "Weights",
    "as_dissimilarity", "as_similarity", "classify",
    "cluster_order", "detection_patterns", "effective_measures", "diversity", "diversity_table", "flow", "head_columns",
    "head_output_norms", "head_similarity", "head_table", "layer_diversity", "mds", "memory_split", "metrics_for",
    "missing_weights", "needing", "role_mass", "rollout", "rollout_layer", "rollout_through_head", "select_heads",
    "sparse_picks", "sparse_selection",
]

# one meaning per name (issue 53): `importance` is the app's gradient importance (`interventions.ablation`); what
# was `metrics.importance` is each head's output norms, kept under its old name for one release
RENAMED = {"importance": "head_output_norms"}


def __getattr__(name: str):
    """An old name of this package: its object, with a DeprecationWarning naming the new one."""
    if name not in RENAMED:
        raise AttributeError(f"module 'mha_viz.metrics' has no attribute {name!r}")
    import warnings

    warnings.warn(f"mha_viz.metrics.{name} is now mha_viz.metrics.{RENAMED[name]}; the old name goes in the next "
                  "release", DeprecationWarning, stacklevel=2)
    return globals()[RENAMED[name]]
