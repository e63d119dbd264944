"""A GGUF file converted once to a float32 safetensors folder in mha-viz's cache, which later loads read. Once across
processes too: several processes that load the same file on a cold cache (the test suite's workers, the app processes
of `mha-viz app --processes N`) each converted it at once, about 30 s of CPU and the whole float32 model each; now one
converts while the others wait on a lock file beside the folder, then read what it wrote."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path

from mha_viz_models.cache_folder import cache_root, exclusive
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.progress import Progress


def gguf_cache(folder: Path, gguf: Path, progress: Progress) -> Path:
    """Convert a GGUF file once to a safetensors folder; later loads read that (seconds)."""
    target = cache_root() / "gguf" / f"{gguf.stem}-{content_key(gguf)}"
    if _ready(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _converting(target, gguf, progress):
        if _ready(target):  # another process converted it while this one waited
            return target
        _convert(folder, gguf, target, progress)
    return target


EDGE = 4 << 20  # bytes read at each end of the file for its key


def content_key(gguf: Path) -> str:
    """The cache's key of a GGUF file: its size and its first and last EDGE bytes (its header and metadata, and the
    last tensors' data), with the transformers version that dequantizes it. Not its path nor its time: the same
    file installed into another environment (a new virtual environment, a fresh clone's) finds its conversion
    instead of adding another float32 copy (about 520 MB for SmolLM2) to the cache."""
    digest = hashlib.sha256(f"{version('transformers')}|{gguf.stat().st_size}".encode())
    with open(gguf, "rb") as f:
        digest.update(f.read(EDGE))
        f.seek(max(0, f.seek(0, os.SEEK_END) - EDGE))
        digest.update(f.read(EDGE))
    return digest.hexdigest()[:16]


def _ready(target: Path) -> bool:
    return (target / "config.json").exists() and (target / "model.safetensors").exists()


def _converting(target: Path, gguf: Path, progress: Progress):
    """Inside: this process alone converts `gguf` to `target` (an exclusive lock on a file beside it; where the
    system has no `fcntl`, no lock: each process converts, and the folder's atomic rename keeps it whole)."""
    return exclusive(target.parent / f".{target.name}.lock", lambda: progress(
        0.1, f"Waiting for another process converting {gguf.name} to float32 (first time only)…"))


def _convert(folder: Path, gguf: Path, target: Path, progress: Progress) -> None:
    """Read the GGUF file (dequantized by transformers) and write it to `target` as float32 safetensors."""
    import torch  # heavy, as transformers: imported only to convert (the app's launcher checks a lesson's models
    from transformers import AutoModelForCausalLM, AutoTokenizer  # through this module, and never converts)

    progress(0.1, f"Converting {gguf.name} to float32 (first time only, about 30 s)…")
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name)
    except Exception as exc:  # noqa: BLE001 - any failure here means the file cannot be used
        raise ModelLoadError(f"Could not read the GGUF file {gguf}: {exc}") from exc
    # The dequantized weights are plain float32: drop the GGUF marker so they can be saved.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)  # atomic: a half-written cache is never seen
        except OSError:
            if not (target / "model.safetensors").exists():  # not another process's finished copy
                shutil.rmtree(target, ignore_errors=True)
                os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
