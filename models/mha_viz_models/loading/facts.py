"""What a loaded model is, as plain strings: the rows of the Model facts page and the HTML report."""

from __future__ import annotations

from mha_viz_models.device.precision import emulated_note


def describe(loaded) -> dict[str, str]:
    """The facts of a `LoadedModel`: its architecture, shape, precision, device, which attention
    computes it and which per-head features its heads' outputs allow."""
    kv = f"{loaded.num_kv_heads}" + (
        f" (grouped-query: {loaded.num_heads // loaded.num_kv_heads} query heads share each)"
        if loaded.num_kv_heads != loaded.num_heads else " (plain multi-head attention)")
    by_layer = loaded.layer_kv_heads
    if by_layer:  # Gemma 4: its global layers' count differs
        kv = "; ".join(f"{count} in layers {', '.join(str(i) for i, c in by_layer.items() if c == count)}"
                       for count in sorted(set(by_layer.values()), reverse=True)) + " (grouped-query)"
    kind = ("encoder–decoder" if loaded.is_encoder_decoder else "causal decoder" if loaded.is_causal
            else "bidirectional encoder")
    rows = {
        "model": loaded.name, "architecture": f"{loaded.model_type} ({kind})",
        "layers": loaded.num_layers, "attention heads per layer": loaded.num_heads, "key/value heads per layer": kv,
        "d_model": loaded.d_model, "d_k (per head)": loaded.d_k, "parameters": f"{loaded.num_params:,}",
        "max positions": loaded.max_positions, "device": loaded.device_text,
        "precision": loaded.precision,
        "attention implementation": loaded.implementation, "loaded from": loaded.source,
    }
    if getattr(loaded, "effective", ""):  # Mamba, RWKV, xLSTM…: the run's groups are heads or blocks of channels
        rows["architecture"] = f"{loaded.model_type} (causal decoder of {loaded.effective} layers, no softmax)"
        rows["attention heads per layer"] = (f"{loaded.num_heads} groups of its effective attention (a Mamba-2 or "
                                             "mLSTM head, or a block of a Mamba or RWKV layer's channels averaged)")
        rows.pop("key/value heads per layer")
    if (note := emulated_note(loaded.dtype, loaded.device)) is not None:  # float16 on most CPUs
        rows["precision on this device"] = note
    if loaded.other_layers:  # a hybrid: its softmax layers are the ones shown
        rows["layers"] = (f"{loaded.num_layers} softmax-attention layers "
                          f"({', '.join(map(str, loaded.layer_numbers))}) of {loaded.total_layers}")
        rows["other layers (no attention pattern)"] = "; ".join(
            f"{kind}: {', '.join(map(str, numbers))}" for kind, numbers in loaded.other_layers.items())
    if not loaded.is_encoder_decoder:
        rows["heads' outputs z"] = (
            "read at the input of each layer's W_O (head outputs, attribution, patching, switching heads off)"
            if loaded.has_head_outputs else f"not read: {loaded.unread}")
        if loaded.has_head_outputs:
            rows["heads' values"] = ("read (the contributions lens)" if loaded.reads_values
                                     else f"not read: {loaded.unread}")
            rows["our MHA"] = ("computes every layer (lean capture, the walkthrough, queries and keys, W_Q, W_K, W_V)"
                               if loaded.can_recompute else f"does not stand in: {loaded.stand_in}")
            if loaded.can_recompute and loaded.precision != "float32":  # what "computes" means in half precision
                rows["our MHA"] += (f"; in {loaded.precision} each layer is checked against the model's own within "
                                    "the rounding a float32 copy of that layer shows")
    if loaded.is_encoder_decoder:  # the rows above are the encoder's
        rows = {("encoder " + k if k in ("layers", "attention heads per layer") else k): v for k, v in rows.items()}
        rows["decoder layers (self- and cross-attention)"] = loaded.decoder_layers
        rows["decoder attention heads per layer"] = loaded.decoder_heads
    return {k: str(v) for k, v in rows.items()}
