"""Which architectures mha-viz reads, and the message for one it cannot, decided from the
configuration alone (before any weight is loaded): models whose layers are not all attention
heads (state-space, recurrent and linear-attention layers), or that have no heads at all.
Encoder–decoders are read (their own path: `LoadedModel.capture_seq2seq`)."""

from __future__ import annotations

SUPPORTED = (
    "mha-viz reads transformers whose layers are softmax attention heads: encoders (BERT, RoBERTa, "
    "XLM-R, ELECTRA, DistilBERT, ALBERT, DeBERTa-v2, ModernBERT) and decoders (GPT-2, GPT-NeoX/Pythia, "
    "GPT-J, OPT, Falcon, Llama, Mistral, Qwen2, Qwen3, Gemma, Gemma 2, Phi-3) and encoder–decoders "
    "(T5, BART, Marian, mBART, Pegasus)"
)

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
# entries of a config's layer_types that are softmax attention
ATTENTION_LAYER_TYPES = {"full_attention", "sliding_attention", "chunked_attention", "attention"}


def refusal(config, spec: str) -> str | None:
    """Why `config` (of the model asked for as `spec`) cannot be read, or None when it can."""
    model_type = getattr(config, "model_type", "") or "unknown"
    instead = NOT_ATTENTION.get(model_type)
    if instead is None:
        others = sorted({str(t) for t in (getattr(config, "layer_types", None) or ())
                         if isinstance(t, str) and t not in ATTENTION_LAYER_TYPES})
        if others:
            instead = "layers of type " + ", ".join(others)
    if instead is not None:
        return (f"'{spec}' is a {model_type} model: it has {instead}, which have no attention "
                f"probabilities to show. {SUPPORTED}.")
    if not all(getattr(config, a, None) for a in ("num_attention_heads", "num_hidden_layers", "hidden_size")):
        return (f"'{spec}' is a {model_type} model without the layers of self-attention heads that "
                f"mha-viz captures. {SUPPORTED}.")
    return None
