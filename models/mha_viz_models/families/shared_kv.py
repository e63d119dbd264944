"""Gemma 3n's and Gemma 4's attention: Llama's projections with a norm over each head's queries, keys and values
(q_norm, k_norm, and v_norm without a scale), and KV sharing: the last `num_kv_shared_layers` layers make no keys
or values of their own (no k_proj, v_proj, k_norm or v_norm) and reuse those that the last earlier layer of their
type (sliding or full) made. Our MHA computes neither (a layer's keys come from another layer's input), so
Hugging Face's attention runs, and every per-head feature reads the heads' outputs z at o_proj's input and their
values at the v_norm whose output the layer reads: its own, or the earlier layer's (`ReusedValues`).
"""

from __future__ import annotations

from torch import nn

from mha_viz_models.attention.heads import ReusedValues, ValuePath

V_NORM = "a norm over each head's values (v_norm)"
SHARING = "keys and values that its later layers reuse from an earlier layer (KV sharing)"


def is_shared_kv(module: nn.Module) -> bool:
    """Whether `module` is such an attention layer (Llama's names, and `is_kv_shared_layer`, which every layer of
    these models has, sharing or not; a layer that makes its values, their v_norm)."""
    return hasattr(module, "is_kv_shared_layer") and all(
        hasattr(module, a) for a in ("q_proj", "o_proj", "scaling", "layer_idx", "head_dim")) and (
        module.is_kv_shared_layer or isinstance(getattr(module, "v_norm", None), nn.Module))


def sharing_modes(config) -> list:
    """Each layer's part in the sharing: None, "store" (a layer whose keys and values later ones reuse) or "reuse"
    (the config's `kv_sharing_modes`; every layer None where the config has none)."""
    modes = getattr(config, "kv_sharing_modes", None)
    return list(modes) if modes is not None else [None] * config.num_hidden_layers


def refusals(_module: nn.Module, config) -> list[str]:
    """What our MHA does not compute of these layers (it stands in for none of them)."""
    return [V_NORM] + ([SHARING] if "reuse" in sharing_modes(config) else [])


def producer(config, layer_idx: int) -> int:
    """The layer whose keys and values sharing layer `layer_idx` reads: the one that stores its type's."""
    kind = config.layer_types[layer_idx]
    stores = [i for i, mode in enumerate(sharing_modes(config))
              if mode == "store" and config.layer_types[i] == kind]
    if not stores:
        raise ValueError(f"layer {layer_idx} reuses the keys and values of a {kind} layer, and none stores them")
    return stores[0]


def values(module: nn.Module, config) -> ValuePath | ReusedValues:
    """Where a layer's values come out: its v_norm, (B, n, G, d) (a global Gemma 4 layer with keys as values
    normalises its keys' projection there too), or the storing layer's (`ReusedValues`)."""
    if module.is_kv_shared_layer:
        return ReusedValues(producer(config, module.layer_idx))
    return ValuePath(module.v_norm, module.k_proj.out_features // module.head_dim, module.head_dim, by_head=True)
