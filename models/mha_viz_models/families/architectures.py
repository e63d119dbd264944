"""Which architectures mha-viz reads, and the message for one it cannot, decided from the
configuration alone (before any weight is loaded): models with no softmax-attention layer at all
(state-space, recurrent and linear-attention models), or with no heads. Hybrids, whose layers mix
softmax attention with other kinds (Qwen3-Next, Jamba, LFM2…), are read on their softmax layers
(`hybrid_layers`); a layer that holds both (Falcon-H1, Zamba2) is among the softmax layers and the
others. Encoder–decoders are read (their own path: `LoadedModel.capture_seq2seq`)."""

from __future__ import annotations

from mha_viz_models.attention.memory import MEMORY_LAYER_TYPES
from mha_viz_models.families.builtin import supported_models

SUPPORTED = (
    f"mha-viz reads transformers whose layers are softmax attention heads: {supported_models()}; and hybrids "
    "(softmax layers between linear-attention, state-space or convolution layers) on their softmax layers; and "
    "Mamba, Mamba-2, Falcon-Mamba, RWKV and xLSTM (mLSTM) as the effective attention of their layers"
)
# models of state-space or recurrent layers alone, each read as its effective attention (`loading.effective_only`)
EFFECTIVE_ONLY = frozenset({"mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm"})

# model types whose layers are not (all) softmax attention: what they have instead
NOT_ATTENTION = {
    "mamba": "state-space (Mamba) layers", "mamba2": "state-space (Mamba-2) layers",
    "falcon_mamba": "state-space (Mamba) layers", "rwkv": "RWKV's recurrent linear attention",
    "recurrent_gemma": "recurrent (Griffin) blocks", "xlstm": "xLSTM blocks",
    "jamba": "Mamba layers between its attention layers", "bamba": "Mamba-2 layers",
    "zamba": "Mamba layers", "zamba2": "Mamba-2 layers", "falcon_h1": "Mamba-2 heads beside attention",
    "granitemoehybrid": "Mamba-2 layers", "nemotron_h": "Mamba-2 layers", "lfm2": "short convolution layers",
    "qwen3_next": "linear attention (Gated DeltaNet) in most layers", "minimax": "lightning (linear) attention",
}
# a layer's attention shape: the attributes that must be one value across the layers mha-viz reads
ATTENTION_SHAPE = {"head_dim", "num_attention_heads", "num_key_value_heads", "qk_head_dim", "v_head_dim"}
# of those, what may differ between layers with every head's probabilities still read (not its output or values)
HEAD_SIZES = {"head_dim", "num_key_value_heads", "qk_head_dim", "v_head_dim"}
# entries of a config's layer_types that are softmax attention; "indexed_attention" (DeepSeek-V3.2's and GLM-5's
# sparse attention) is a softmax over the keys its indexer keeps, each row's others 0: Hugging Face's eager forward
# returns those rows, which sum to 1; DeepSeek-V4's compressed layers spread each row over the tokens, compressed memory
# entries and a sink (`mha_viz_models.attention.memory`): their rows over the tokens are read, the entries beside them
ATTENTION_LAYER_TYPES = {"full_attention", "sliding_attention", "chunked_attention", "attention", "indexed_attention",
                         *MEMORY_LAYER_TYPES}
# entries of a config's layer_types with no softmax over the tokens (recurrent, state-space, convolution layers)
NO_SOFTMAX_LAYER_TYPES = {"linear_attention", "mamba", "conv"}
# entries of layers that hold softmax attention and another token mixer: Falcon-H1's Mamba-2 heads beside its
# attention heads, Zamba2's Mamba-2 layer after its shared attention block; the layer is read as both
BOTH_LAYER_TYPES = {"hybrid", "hybrid_sliding"}  # Inkling: attention beside another mixer, full or sliding


def layer_kinds(config) -> list[str] | None:
    """Each layer's kind, from the config's `layer_types` (Qwen3-Next, LFM2…) or `layers_block_type`
    (Jamba), or None when the config does not list them."""
    for name in ("layer_types", "layers_block_type"):
        kinds = getattr(config, name, None)
        if isinstance(kinds, (list, tuple)) and kinds and all(isinstance(k, str) for k in kinds):
            return list(kinds)
    return None


def softmax_attentions(attentions, numbers, total: int):
    """A hybrid's softmax layers' entries of a model's `output_attentions`: those at `numbers` when the model returns
    one for each of its `total` layers (MiniMax's lightning layers return weights of their own, their blocks' state),
    else the entries as they are (other hybrids return the softmax layers' only)."""
    attentions = list(attentions or ())
    if numbers and len(attentions) == total != len(numbers):
        return [attentions[n] for n in numbers]
    return attentions


def hybrid_layers(config) -> tuple[list[int], dict[str, list[int]]] | None:
    """For a hybrid (some layers softmax attention, others not): (the softmax layers' numbers, the
    other layers' numbers by kind); a layer of BOTH_LAYER_TYPES is in both. None for a model whose layers are all
    softmax attention, or that has none."""
    kinds = layer_kinds(config)
    if kinds is None:
        return None
    softmax = [i for i, k in enumerate(kinds) if k in ATTENTION_LAYER_TYPES or k in BOTH_LAYER_TYPES]
    others: dict[str, list[int]] = {}
    for i, k in enumerate(kinds):
        if k not in ATTENTION_LAYER_TYPES:
            others.setdefault(k, []).append(i)
    return (softmax, others) if softmax and others else None


def per_layer_values(config) -> dict[str, list]:
    """A heterogeneous config's per-layer attributes (transformers' `per_layer_config`: Gemma 4's head sizes) that
    differ between its layers: {name: each layer's value}; {} for any other config."""
    if not getattr(config, "is_heterogeneous", False):
        return {}
    layers = config.per_layer_config
    values = {name: [getattr(layers[i], name, None) for i in range(len(layers))]
              for name in sorted(config.per_layer_attributes or ())}
    return {name: v for name, v in values.items() if len(set(map(repr, v))) > 1}


def _a(word: str) -> str:
    """`word` after its article: "a llama", "an xlstm" (a model type read as its letters)."""
    return f"{'an' if word[:1].lower() in 'aeiox' else 'a'} {word}"


def _said(values: dict[str, list]) -> str:
    """Per-layer values as "head_dim 16, 32", each name's distinct values in order."""
    return "; ".join(f"{name} {', '.join(sorted({str(x) for x in v}, key=lambda x: (len(x), x)))}"
                     for name, v in values.items())


def kv_heads_by_layer(config) -> dict[int, int]:
    """{layer number: its key/value heads} of a config whose layers differ in their count (Gemma 4's global layers
    may share fewer key/value heads than its sliding ones: `num_global_key_value_heads`); {} for any other."""
    counts = per_layer_values(config).get("num_key_value_heads") if config is not None else None
    return {i: int(c) for i, c in enumerate(counts or ()) if c}


def head_sizes_differ(config) -> str | None:
    """How the head sizes of a heterogeneous config differ between its layers ("head_dim 16, 32": Gemma 4's global
    layers have larger heads than its sliding ones), or None where they do not."""
    differ = {name: v for name, v in per_layer_values(config).items() if name in HEAD_SIZES}
    return _said(differ) if differ else None


def open_per_layer(config, spec: str) -> str | None:
    """Why a heterogeneous `config` cannot be read (its layers differ in head count: each layer's probabilities are
    (heads, n, n), stacked over the layers), or None. A config whose layers differ only in their heads' sizes (Gemma 4)
    or outside attention may then be read as a whole (transformers refuses a global read of a per-layer attribute
    otherwise: the loader reads config.head_dim); the heads' outputs of one whose head sizes differ are not read
    (`head_sizes_differ`)."""
    differ = per_layer_values(config)
    shaped = {name: v for name, v in differ.items() if name in ATTENTION_SHAPE - HEAD_SIZES}
    if shaped:
        return (f"'{spec}' is {_a(getattr(config, 'model_type', '') or 'heterogeneous')} model whose attention layers "
                f"differ in shape ({_said(shaped)}, by layer): mha-viz reads models whose attention layers share one "
                f"head count, and cannot read this one yet.")
    if getattr(config, "is_heterogeneous", False):
        config.allow_global_per_layer_attribute_access = True
    return None


def refusal(config, spec: str) -> str | None:
    """Why `config` (of the model asked for as `spec`) cannot be read, or None when it can (a hybrid
    can: its softmax layers are read)."""
    why = open_per_layer(config, spec)
    if why is not None:
        return why
    model_type = getattr(config, "model_type", "") or "unknown"
    if model_type in EFFECTIVE_ONLY:
        return None
    kinds = set(layer_kinds(config) or ())
    instead = None if hybrid_layers(config) is not None else NOT_ATTENTION.get(model_type)
    others = sorted(k for k in kinds if k not in ATTENTION_LAYER_TYPES)
    if instead is None and others and hybrid_layers(config) is None:  # listed layers, none of them attention
        unread = [k for k in others if k not in NO_SOFTMAX_LAYER_TYPES]
        if unread:  # a kind this version does not know: not said to have no probabilities (it may have)
            return (f"'{spec}' is {_a(model_type)} model: its layers are of type {', '.join(others)}, which mha-viz "
                    f"does not read yet. {SUPPORTED}.")
        instead = "layers of type " + ", ".join(others)
    if instead is not None:
        return (f"'{spec}' is {_a(model_type)} model: it has {instead}, which have no attention "
                f"probabilities to show. {SUPPORTED}.")
    if not all(getattr(config, a, None) for a in ("num_attention_heads", "num_hidden_layers", "hidden_size")):
        return (f"'{spec}' is {_a(model_type)} model without the layers of self-attention heads that "
                f"mha-viz captures. {SUPPORTED}.")
    return None
