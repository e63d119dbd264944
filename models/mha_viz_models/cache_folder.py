"""mha-viz's cache folder, the one place its location is decided: converted GGUF weights (`loading.gguf_cache`),
the compiled metric loops (`mha_viz.compiled`) and stored corpus results are kept in folders under it."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """Where mha-viz keeps what it computes once: $MHA_VIZ_CACHE_DIR, else ~/.cache/mha-viz."""
    return Path(os.environ.get("MHA_VIZ_CACHE_DIR") or Path.home() / ".cache" / "mha-viz")
