"""Models with no softmax layer at all whose every token mixer is exactly linear in its values (issue 88): Mamba,
Mamba-2, Falcon-Mamba, RWKV and xLSTM (its mLSTM). Each layer is read as its effective attention
(`mha_viz_models.effective`): output_t = Σ_s A[g, t, s] · v_s[g] + …, A computed exactly from the layer's own
tensors in the model's forward. A is signed and its rows do not sum to 1, so what the run holds, and every page
draws as a head's weights, is each row of |A| divided by its sum: how the layer's mixing spreads over the earlier
tokens, whatever its sign (a row of zeros, which no trained layer gives, is put on its own token). A group (a "head"
of the run) is a Mamba-2 or mLSTM head, or a block of a Mamba or RWKV layer's channels averaged (its channels are
thousands: `selective.py`'s eight blocks).

transformers' xLSTM has mLSTM blocks alone; an sLSTM (not linear in its values) would be refused by the probe of its
layers (`effective.kinds`: no kind reads it)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from mha_viz_models.device.placement import devices_used
from mha_viz_models.effective import selective
from mha_viz_models.effective.kinds import mixing_layers
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.loading import effective_run
from mha_viz_models.loading.loaded import LoadedModel
from mha_viz_models.loading.resolve import Progress
from mha_viz_models.reading.records import Capture

PROBE_TOKENS = 12
UNREAD = "its layers are read as effective attention (no softmax): no head has queries, keys or an output"


@dataclass
class EffectiveModel(LoadedModel):
    """A `LoadedModel` whose capture reads each layer's effective attention (`effective_run.capture`): one sequence
    at a time, no head outputs, no lean capture."""

    def capture(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_options) -> Capture:
        input_ids = input_ids.to(self.device)
        mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(self.device)
        return effective_run.capture(self, input_ids, mask)

    @property
    def implementation(self) -> str:
        return f"effective attention of its {self.effective} layers: |A| a group, each row divided by its sum"


def shape(hf_model, config) -> dict:
    """The run's layers and groups of a model made of effective layers alone: num_layers (every mixer), num_heads
    (the groups a layer's weights are drawn in), d_k (the width of a group's values), the kind's name; ModelLoadError
    where a mixer is not one read exactly."""
    found = mixing_layers(hf_model)
    if not found or any(kind is None for *_rest, kind in found):
        raise ModelLoadError(f"'{config.model_type}' has token-mixing layers mha-viz does not read exactly.")
    kinds = {kind.NAME for *_rest, kind in found}
    numbers = [number for number, *_rest in found]
    if numbers != list(range(len(numbers))):
        raise ModelLoadError(f"'{config.model_type}' mixes tokens in layers {numbers}, not in each of its layers.")
    if getattr(config, "num_heads", None) and getattr(config, "head_dim", None):  # Mamba-2: its heads
        heads, width = int(config.num_heads), int(config.head_dim)
    elif getattr(config, "num_heads", None) and getattr(config, "v_head_dim", None):  # xLSTM: its mLSTM heads
        heads, width = int(config.num_heads), int(config.v_head_dim)
    else:  # Mamba-1 and RWKV: the blocks of channels the views aggregate
        heads = selective.BLOCKS
        channels = getattr(config, "attention_hidden_size", None) or getattr(config, "intermediate_size", None)
        width = int(channels or config.hidden_size * 2) // heads  # RWKV's attention width, Mamba's inner one
    return {"num_layers": len(numbers), "num_heads": heads, "d_k": width, "kind": " and ".join(sorted(kinds))}


def check(loaded, vocab_size: int) -> None:
    """The probe every load runs: one capture of PROBE_TOKENS tokens, its rows finite and summing to 1."""
    ids = torch.randint(3, max(4, min(vocab_size, 1000)), (1, PROBE_TOKENS), generator=torch.Generator().manual_seed(0))
    cap = loaded.capture(ids)
    for number, a in enumerate(cap.attentions):
        if a.shape[1:] != (loaded.num_heads, PROBE_TOKENS, PROBE_TOKENS) or not torch.isfinite(a).all() \
                or float((a.sum(-1) - 1).abs().max()) > 1e-4:
            raise ModelLoadError(f"'{loaded.name}': layer {number}'s effective attention is not a finite "
                                 f"({loaded.num_heads}, n, n) matrix of rows summing to 1 on a test input.")


def load(model, config, tokenizer, name: str, source: str, dev, want, local_attention: bool, *, max_positions: int,
         progress: Progress) -> LoadedModel:
    """A model of effective layers alone (`effective_only`), checked on a probe."""
    if local_attention:
        raise ModelLoadError(f"Our MHA cannot stand in for '{name}': it has no softmax attention layer. Use Hugging "
                             "Face's attention (its layers are shown as their effective attention).")
    found = shape(model, config)
    model.requires_grad_(False)
    loaded = EffectiveModel(
        name=name, hf_model=model, tokenizer=tokenizer, device=dev, is_causal=True, local_attention=False,
        model_type=config.model_type, num_layers=found["num_layers"], num_heads=found["num_heads"],
        num_kv_heads=found["num_heads"], d_model=config.hidden_size, d_k=found["d_k"],
        num_params=sum(p.numel() for p in model.parameters()), max_positions=max_positions,
        source=source, unread=UNREAD, reads_values=False, effective=found["kind"], dtype=want,
        stand_in="it has no softmax attention layer", placement=tuple(devices_used(model)))
    progress(0.9, "Checking that every layer's effective attention can be read…")
    check(loaded, config.vocab_size)
    progress(1.0, f"'{name}' ready.")
    return loaded
