"""Turning what the user typed (bundled name, hub id, folder; device) into what gets loaded."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mha_viz_models.errors import ModelLoadError
from mha_viz_models.loading.bundled import BUNDLED
from mha_viz_models.loading.gguf_cache import gguf_cache
from mha_viz_models.progress import Progress

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


def resolve_spec(spec: str, progress: Progress, allow_pickle: bool = False) -> tuple[str, str]:
    """Return (what from_pretrained reads: a folder or a hub id, a name to show). A GGUF
    folder is converted (once) to a cached safetensors folder."""
    spec = spec.strip()
    folder, name, gguf = _located(spec, allow_pickle)
    if folder is None:
        return spec, spec
    return (str(gguf_cache(folder, gguf, progress)) if gguf is not None else str(folder)), name


def check_spec(spec: str, allow_pickle: bool = False) -> None:
    """Whether `spec` can be loaded here, found without loading it: ModelLoadError, with the
    message loading would give, for a bundled model whose package is missing, a folder that holds
    no model (or only pickled weights, unless `allow_pickle`), a path that is not there, a name
    that is neither, and a hub id that is not cached on this machine while the Hub is unreachable
    (HF_HUB_OFFLINE). A hub id is not looked up online: whether the Hub has it is known at load."""
    spec = spec.strip()
    if spec in BUNDLED:
        BUNDLED[spec].locate()
        return
    folder, _, _ = _located(spec, allow_pickle)
    if folder is None and hub_offline() and not _cached(spec):
        raise hub_error(spec, OSError("offline"))


def _cached(repo_id: str) -> bool:
    """Whether the Hugging Face cache of this machine holds `repo_id`'s config."""
    from huggingface_hub import try_to_load_from_cache  # heavy: only a hub id checked offline needs it

    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except (ValueError, OSError):  # not a valid repo id for the cache
        return False


def hub_offline() -> bool:
    """Whether this process was told the Hugging Face Hub cannot be reached (HF_HUB_OFFLINE)."""
    return os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")


def _located(spec: str, allow_pickle: bool) -> tuple[Path | None, str, Path | None]:
    """(the model's folder, or None for a hub id; the name to show; the GGUF file to convert, or
    None), every check of the folder done; ModelLoadError for what cannot be loaded."""
    if not spec:
        raise ModelLoadError("No model given: pick a bundled model or type a hub id or a folder.")
    if spec in BUNDLED:
        folder, name = BUNDLED[spec].locate(), spec
    else:
        folder, name = Path(spec).expanduser(), spec
        if "\x00" in spec:
            raise ModelLoadError("The model name contains a NUL character; type it again.")
        if not folder.exists():
            if spec.startswith(("/", ".", "~")) or "\\" in spec:
                raise ModelLoadError(f"There is no folder '{spec[:200]}' on this machine.")
            if not _HUB_ID.match(spec):
                raise ModelLoadError(
                    f"'{spec[:80]}' is neither a folder on this machine nor a Hugging Face model "
                    "id (like 'gpt2' or 'owner/model-name')."
                )
            return None, spec, None
        if not folder.is_dir():
            raise ModelLoadError(f"'{spec[:200]}' is a file; give the folder that holds the model.")
    ggufs = sorted(folder.glob("*.gguf"))
    if (folder / "config.json").exists():
        if not any((folder / f).exists() for f in _WEIGHT_FILES):
            raise ModelLoadError(
                f"The folder '{folder}' has a config.json but no weights (model.safetensors or "
                "pytorch_model.bin). Copy the weights next to config.json."
            )
        safe = any((folder / f).exists() for f in _WEIGHT_FILES if "safetensors" in f)
        if not safe and not allow_pickle:
            raise ModelLoadError(
                f"The folder '{folder}' has only pickled weights (pytorch_model.bin), which can run "
                "code when they are read. mha-viz reads safetensors or GGUF: convert them with "
                "save_pretrained(..., safe_serialization=True), or, on your own machine only, set "
                "MHA_VIZ_ALLOW_PICKLE=1."
            )
        return folder, name, None
    if ggufs:
        return folder, name, ggufs[0]
    raise ModelLoadError(
        f"The folder '{folder}' holds no model: a model folder has a config.json with weights "
        "(model.safetensors) and tokenizer files, or a .gguf file."
    )


def hub_error(spec: str, exc: Exception) -> ModelLoadError:
    """The error to show when a hub id could not be fetched: offline, or not on the Hub."""
    offline = hub_offline() or "offline" in str(exc).lower() \
        or "connect" in str(exc).lower() or "resolve" in str(exc).lower()
    if offline:
        return ModelLoadError(
            f"'{spec}' is not on this machine and the Hugging Face Hub cannot be reached. "
            "Connect to the internet once so it can be downloaded (it is then cached), give the "
            f"path of a local folder holding it, or pick a bundled model ({', '.join(BUNDLED)})."
        )
    return ModelLoadError(f"'{spec}' was not found on the Hugging Face Hub ({type(exc).__name__}). "
                          "Check the spelling, or give a local folder.")


# the tokens read at most where neither the config nor the tokenizer says: a transformer's, and a model of recurrent
# or state-space layers alone (no positions to run out of; a long text is what people bring them)
POSITIONS_LIMIT, RECURRENT_LIMIT = 4096, 32768


def max_positions(config, tokenizer, unbounded: int = POSITIONS_LIMIT) -> int:
    """The most tokens a model reads: its config's positions, else its tokenizer's limit up to `unbounded`."""
    return int(next((getattr(config, a) for a in ("max_position_embeddings", "n_positions")
                     if getattr(config, a, None)), None) or min(int(tokenizer.model_max_length), unbounded))
