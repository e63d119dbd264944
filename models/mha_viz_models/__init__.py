"""Models: our from-scratch multi-head attention and the loaders/adapters for pretrained models.

Nothing here imports `mha_viz`: this layer knows tensors and Hugging Face, not the app.
"""

from mha_viz_models.attention.mha import MultiHeadAttention, apply_rotary
from mha_viz_models.device.placement import resolve_device
from mha_viz_models.device.precision import CHOICES as PRECISIONS
from mha_viz_models.device.precision import as_probabilities, emulated_note
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.families.builtin import UnsupportedArchitecture, install_local_attention
from mha_viz_models.loading.bundled import BUNDLED, HUB_SUGGESTIONS
from mha_viz_models.loading.loaded import LoadedModel
from mha_viz_models.loading.loader import load, random_twin

__all__ = [
    "BUNDLED", "HUB_SUGGESTIONS", "LoadedModel", "ModelLoadError", "MultiHeadAttention",
    "UnsupportedArchitecture", "PRECISIONS", "apply_rotary", "as_probabilities", "emulated_note",
    "install_local_attention", "load",
    "random_twin", "resolve_device",
]
