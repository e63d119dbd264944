"""A module written from text (a loop that `row_loop` or `row_triton` writes from the row table) into the compiled
loops' cache folder (`compiled.cache_folder`: Numba keeps what it compiles from a file there; Triton reads a
kernel's source from its file) and imported from there, once per text and process."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType

from mha_viz.compiled import cache_folder

_modules: dict[str, ModuleType] = {}
_lock = threading.Lock()


def imported(text: str, prefix: str) -> ModuleType:
    """The module whose source is `text`, named `prefix` and a hash of it: written (whole or not at all, for another
    process writing it at once) unless the file holds it already, and imported once a process."""
    name = f"{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    with _lock:
        if name in _modules:
            return _modules[name]
        folder = cache_folder() or Path(tempfile.mkdtemp(prefix="mha-viz-loops-"))
        path = folder / "loops" / f"{name}.py"
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            part = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            part.write_text(text, encoding="utf-8")
            part.replace(path)
        spec = importlib.util.spec_from_file_location(f"mha_viz_loops.{name}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _modules[name] = module
        return module
