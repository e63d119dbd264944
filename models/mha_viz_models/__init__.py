"""Models: our from-scratch multi-head attention and the loaders/adapters for pretrained models.

Nothing here imports `mha_viz`: this layer knows tensors and Hugging Face, not the app.
"""

from .errors import ModelLoadError
from .families import UnsupportedArchitecture, install_local_attention
from .loaded import LoadedModel
from .loading import load, random_twin
from .mha import MultiHeadAttention, apply_rotary
from .precision import CHOICES as PRECISIONS
from .precision import as_probabilities
from .registry import BUNDLED, HUB_SUGGESTIONS
from .resolve import resolve_device

__all__ = [
    "BUNDLED", "HUB_SUGGESTIONS", "LoadedModel", "ModelLoadError", "MultiHeadAttention",
    "UnsupportedArchitecture", "PRECISIONS", "apply_rotary", "as_probabilities", "install_local_attention", "load",
    "random_twin", "resolve_device",
]
