"""Models: our from-scratch multi-head attention and the loaders/adapters for pretrained models.

Nothing here imports `mha_viz`: this layer knows tensors and Hugging Face, not the app.

The names below are imported on first use (`lazy_loader`), so that a process that reads only the light modules
(the `mha-viz` launcher: the bundled models' names, the precisions, the errors) never imports PyTorch or
transformers.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs={
    "attention.mha": ["MultiHeadAttention", "apply_rotary"],
    "device.placement": ["resolve_device"],
    "device.choices": ["PRECISIONS"],
    "device.precision": ["as_probabilities", "emulated_note"],
    "errors": ["ModelLoadError"],
    "families.builtin": ["UnsupportedArchitecture", "install_local_attention"],
    "loading.bundled": ["BUNDLED", "HUB_SUGGESTIONS"],
    "loading.loaded": ["LoadedModel"],
    "loading.loader": ["load", "random_twin"],
})

