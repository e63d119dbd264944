"""Loading the trained toy induction model (`toy.model`) as a `LoadedModel` like any other: each layer's
attention module is an adapter around our MHA, so every page reads it as it reads a Hugging Face model.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from mha_viz_models.device.placement import resolve_device
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.loading.loaded import LoadedModel
from mha_viz_models.toy.model import FOLDER, NAME, ToyConfig, ToyInductionModel, make_tokenizer


def load_toy(device: str = "cpu", local_attention: bool = True, progress=None, folder: Path = FOLDER, *,
             dtype: torch.dtype = torch.float32):
    """The trained toy model as a `LoadedModel`. Its attention is always ours (`local_attention`
    is accepted for the loader's signature and has no other option to choose)."""
    progress = progress or (lambda _f, _m: None)
    dev = resolve_device(device)
    progress(0.1, f"Loading the weights of '{NAME}'…")
    weights, config_file = folder / "model.safetensors", folder / "config.json"
    if not weights.exists() or not config_file.exists():
        raise ModelLoadError(
            f"The weights of '{NAME}' are missing from {folder}. Recreate them with "
            "`.venv/bin/python -m mha_viz_models.toy.train` (about a minute on a CPU)."
        )
    try:
        config = ToyConfig.from_dict(json.loads(config_file.read_text()))
        model = ToyInductionModel(config)
        model.load_state_dict(load_file(str(weights)))
    except Exception as exc:  # noqa: BLE001 - a damaged or mismatched file
        raise ModelLoadError(
            f"Cannot load the weights of '{NAME}' from {folder}: the file may be damaged "
            f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}). Recreate them with "
            "`.venv/bin/python -m mha_viz_models.toy.train`."
        ) from exc
    model.to(device=dev, dtype=dtype).eval().requires_grad_(False)  # gradients for activations only
    adapters = [layer.attn for layer in model.layers]
    h, d = config.num_attention_heads, config.hidden_size
    loaded = LoadedModel(
        name=NAME, hf_model=model, tokenizer=make_tokenizer(config.max_position_embeddings), device=dev,
        is_causal=True, local_attention=True, model_type=NAME, num_layers=config.num_hidden_layers,
        num_heads=h, num_kv_heads=h, d_model=d, d_k=adapters[0].mha.d_k,
        num_params=sum(p.numel() for p in model.parameters()), max_positions=config.max_position_embeddings,
        source=str(folder), adapters=adapters, attention_modules=[(a, "ours") for a in adapters], dtype=dtype,
    )
    progress(0.9, "Checking that every layer's attention can be captured…")
    loaded.forward(torch.tensor([[0, 3, 4]]))  # [BOS] a b
    progress(1.0, f"'{NAME}' ready.")
    return loaded
