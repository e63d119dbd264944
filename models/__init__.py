"""Models: our from-scratch multi-head attention and the loaders/adapters for pretrained models.

Nothing here imports `mha_viz`: this layer knows tensors and Hugging Face, not the app.
"""

from .adapters import UnsupportedArchitecture, install_local_attention
from .loading import BUNDLED, HUB_SUGGESTIONS, LoadedModel, ModelLoadError, load, random_twin, resolve_device
from .mha import MultiHeadAttention, apply_rotary

__all__ = [
    "BUNDLED", "HUB_SUGGESTIONS", "LoadedModel", "ModelLoadError", "MultiHeadAttention",
    "UnsupportedArchitecture", "apply_rotary", "install_local_attention", "load", "random_twin", "resolve_device",
]
