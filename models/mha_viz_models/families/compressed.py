"""DeepSeek-V4's attention: one key-value head whose keys are its values (K = V), queries through a low-rank pair,
a learned sink per head, compressed memory entries beside the tokens in its compressed layers
(`mha_viz_models.attention.memory`), and a grouped low-rank output projection. Hugging Face's attention runs; every
head's probabilities are read, over the tokens and over the entries. Its heads' outputs are not: o_a_proj maps each
group of heads' outputs together before o_b_proj, so no head has a W_O of its own, and the layers pass several
residual streams on (hyper-connections), mixed by weights computed from the streams."""

from __future__ import annotations

from torch import nn

UNREAD = ("DeepSeek-V4's heads write through a grouped low-rank output projection (o_a_proj maps each group of heads "
          "together, then o_b_proj), so no head has a W_O of its own, and its layers pass several residual streams "
          "on (hyper-connections): each head's output, its values and W_O are not read")
STAND_IN = "keys that are its values, compressed memory entries and a grouped low-rank output projection (DeepSeek-V4)"


def is_compressed(module: nn.Module) -> bool:
    """Whether `module` is such an attention layer (by its parts: the shared key-value projection, the low-rank
    query and output pairs, the sinks, and a compressor slot, None in its sliding layers)."""
    return hasattr(module, "compressor") and all(
        isinstance(getattr(module, a, None), nn.Module) for a in ("kv_proj", "q_b_proj", "o_a_proj", "o_b_proj")) \
        and isinstance(getattr(module, "sinks", None), nn.Parameter)
