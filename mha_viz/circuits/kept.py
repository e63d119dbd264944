"""A model's weights-only scores kept on disk, so that a process that loads the same weights reads them back instead of
computing them again: an app restarted, the second process of a deployment (`mha-viz app --processes N`), a notebook
after the app. On SmolLM2 on 2 cores the composition scores are 9.4 CPU-s and the copying scores 2.6, and reading
them back costs a hash of every weight (1.0 CPU-s for its 621 MB) and a file; an 8B model's composition scores are
half an hour of a CPU.

A file is named by the kind of scores, a hash of the code that computes them (`code_version`: this folder's and
mha_viz_models' sources, PyTorch's and transformers' versions) and a hash of everything the model computes with: every
tensor of its state_dict, its weights and persistent buffers (name, precision, shape and bytes; a weight tied to
another, the other's name) and the model's class; none once a weight was changed in place after the hash. The
same weights in another precision, one weight changed, or the code changed make another name. Files go under the cache
folder's `weights-scores/` (`cache_root`), compressed, written whole, readable by all and renamed into place; past
MAX_FILES the least recently used go (a read touches its file: `cache_folder.write_whole`, `prune`, `touch`, as the
corpus store keeps its results). Beside them, a hint a model (`hint`, at most MAX_HINTS) named by what costs nothing to
read (the code's version, the model's name and class, every weight's name, precision and shape) says that the weights
may be worth hashing to read them back unasked (`composition.recall`): an 8B model's hash is half a minute of a CPU, its
scores half an hour. A hint whose hash found nothing is removed (`forget_hint`), and made again by the next read of its
model's scores. A file that does not hold what was asked is removed and counts
as missing; one this process may not read is left, and the scores computed. `circuits.composition` decides what is
worth keeping (`hash_seconds`) and MHA_VIZ_KEEP_SCORES=0 keeps nothing."""

from __future__ import annotations

import functools
import hashlib
import logging
import threading
import weakref
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import transformers

import mha_viz_models
from mha_viz_models import LoadedModel
from mha_viz_models.cache_folder import cache_root, prune, remove, touch, write_whole
from mha_viz_models.loading import weight_versions

VERSION = 1  # bump when the files change form: older files are then never read
FOLDER = "weights-scores"
MAX_FILES = 64
MAX_HINTS = MAX_FILES // 2  # a model's hint stands for its two files (composition, copying)
HASH_RATE = 6e8  # bytes a second that `fingerprint` reads on one core (SmolLM2: 621 MB in 0.98 s)
HOST_COPY_RATE = 1.4 * 2**30  # bytes a second from a GPU to pageable host memory (the figure given for the lent
# H100/H200 machines; not measured here)
_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> (weights' version, hash or None)
_LOCK = threading.Lock()
log = logging.getLogger(__name__)


def _tensors(model: LoadedModel) -> list[tuple[str, torch.Tensor]]:
    return sorted(model.hf_model.state_dict(keep_vars=False).items())


def _tied(tensors: list[tuple[str, torch.Tensor]]) -> dict[str, str]:
    """name -> the first name of the very same tensor (the same memory, precision, shape and strides: an embedding
    tied to the unembedding), so that its bytes are read once."""
    first: dict[tuple, str] = {}
    tied: dict[str, str] = {}
    for name, t in tensors:
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            continue
        same = (t.device, t.untyped_storage().data_ptr(), t.storage_offset(), t.dtype, tuple(t.shape), t.stride())
        if same in first:
            tied[name] = first[same]
        else:
            first[same] = name
    return tied


def hash_seconds(model: LoadedModel) -> float:
    """About how long `fingerprint` takes for `model`: its weights read once (a tied one once), copied to the host
    first where they are on a GPU."""
    seconds = 0.0
    tensors = _tensors(model)
    tied = _tied(tensors)
    for _, t in (item for item in tensors if item[0] not in tied):
        nbytes = t.numel() * t.element_size()
        seconds += nbytes / HASH_RATE + (nbytes / HOST_COPY_RATE if t.device.type != "cpu" else 0.0)
    return seconds


def fingerprint(model: LoadedModel, going: Callable[[], bool] | None = None) -> str | None:
    """A hash of everything `model` computes with (see the module's docstring), once per loaded model; None where a
    weight is not in memory (a model spread to disk by accelerate), and once a weight was changed in place or replaced
    after the hash (a notebook's head zeroed: the hash names the weights before it, so nothing of that model is kept or
    read; its scores are computed again from the weights as they are, `weight_versions.version`).
    `going` is asked before each weight: where it says stop (the process exits), None, and nothing is remembered, so
    that a later call hashes them all."""
    now = weight_versions.version(model.hf_model)
    with _LOCK:
        known = _FINGERPRINTS.get(model.hf_model)
    if known is not None:
        return known[1] if known[0] == now else None
    try:  # listed only to hash them (SmolLM2's state_dict, sorted: 0.9 ms)
        tensors = _tensors(model)
    except Exception as exc:  # noqa: BLE001 - weights that cannot be listed: nothing kept, the scores computed
        log.warning("%s's weights could not be listed (%s: %s): its scores are not kept", model.name,
                    type(exc).__name__, exc)
        return None
    digest = hashlib.blake2b(type(model.hf_model).__qualname__.encode(), digest_size=16)
    found: str | None = None
    try:
        tied = _tied(tensors)
        for name, t in tensors:
            if going is not None and not going():
                return None  # stopped: not remembered
            if t.device.type == "meta":
                break
            if name in tied:  # its bytes hashed under the first name already
                digest.update(f"{name}|the same as|{tied[name]}|".encode())
                continue
            t = t.detach().to("cpu").contiguous()
            digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy())
        else:
            found = digest.hexdigest()
    except Exception as exc:  # noqa: BLE001 - a weight that cannot be read as bytes: nothing kept, the scores computed
        log.warning("%s's weights could not be hashed (%s: %s): its scores are not kept", model.name,
                    type(exc).__name__, exc)
    with _LOCK:
        _FINGERPRINTS[model.hf_model] = (now, found)
    return found


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """A hash of what the scores are computed by: the sources of this folder (`mha_viz.circuits`) and of
    mha_viz_models (the weights' layout, norms and readout), and PyTorch's and transformers' versions. Any change to
    them names new files, so a file is never read by code other than the one that wrote it."""
    digest = hashlib.blake2b(f"{VERSION}|{torch.__version__}|{transformers.__version__}".encode(), digest_size=8)
    for root in (Path(__file__).parent, Path(mha_viz_models.__file__).parent):
        for source in sorted(root.rglob("*.py")):
            digest.update(source.relative_to(root).as_posix().encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()


def folder() -> Path:
    return cache_root() / FOLDER


def hint(model: LoadedModel) -> Path:
    """The hint file of `model` (the module's docstring), named by the code's version too: no weight's bytes are
    read."""
    digest = hashlib.blake2b(f"{code_version()}|{model.name}|{type(model.hf_model).__qualname__}".encode(),
                             digest_size=16)
    for name, t in _tensors(model):
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
    return folder() / f"{digest.hexdigest()}.hint"


def hinted(model: LoadedModel) -> bool:
    """Whether scores of a model of `model`'s name, class and weights' shapes were kept here (its weights may differ:
    only their hash says)."""
    try:
        return hint(model).is_file()
    except Exception:  # noqa: BLE001 - weights that cannot be listed, a folder that cannot be read: no hint
        return False


def keep_hint(model: LoadedModel) -> None:
    """Make `model`'s hint, or mark it used (another user's is left as it is; a folder that cannot be written: no
    hint, nothing raised)."""
    try:
        touch(hint(model), make=True)
    except OSError as exc:
        log.warning("no hint kept for %s's scores: %s", model.name, exc)


def forget_hint(model: LoadedModel) -> None:
    """Remove `model`'s hint: its weights were hashed and no scores found (another model's of the same name and
    shapes), so that its next load hashes nothing unasked."""
    try:
        hint(model).unlink(missing_ok=True)
    except OSError:  # may not be removed here: hashed again next time, as now
        pass


def path(model: LoadedModel, kind: str, going: Callable[[], bool] | None = None) -> Path | None:
    """Where `model`'s scores of `kind` are kept (None: they cannot be, or the hash was stopped: `fingerprint`)."""
    found = fingerprint(model, going)
    return None if found is None else folder() / f"{kind}-{code_version()}-{found}.npz"


def read(model: LoadedModel, kind: str, shapes: dict[str, tuple[int, ...]],
         going: Callable[[], bool] | None = None) -> dict[str, np.ndarray] | None:
    """`model`'s kept scores of `kind`, each array of `shapes` (name -> shape, float32), or None: none kept, a
    file that does not hold them (removed), or the hash stopped by `going` (`fingerprint`)."""
    where = None
    try:
        where = path(model, kind, going)
        if where is None or not where.is_file():
            return None
        with np.load(where) as kept:
            arrays = {name: kept[name] for name in shapes}
        if any(a.shape != shapes[n] or a.dtype != np.float32 for n, a in arrays.items()):
            raise ValueError(f"shapes {[a.shape for a in arrays.values()]}, not {list(shapes.values())}")
    except (ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:  # not the scores: replaced
        if where is None:
            return None
        log.warning("kept scores %s unreadable (%s: %s): removed", where.name, type(exc).__name__, exc)
        remove(where)  # where this process may not remove it: read again and refused again
        return None
    except OSError as exc:  # a folder this process may not read: computed, the file left as it is
        log.warning("kept %s scores of %s not read: %s", kind, model.name, exc)
        return None
    touch(where)  # recently used: the last to go
    keep_hint(model)  # made again where a hash of other weights removed it
    return arrays


def write(model: LoadedModel, kind: str, arrays: dict[str, np.ndarray]) -> None:
    """Keep `arrays` as `model`'s scores of `kind` (a folder that cannot be written is logged, not raised)."""
    where = path(model, kind)
    if where is None:
        return
    try:  # half of the composition scores are NaN (no earlier head): compressed
        write_whole(where, lambda tmp: np.savez_compressed(tmp, **arrays))
    except OSError as exc:
        log.warning("could not keep %s's %s scores in %s: %s", model.name, kind, where.parent, exc)
        return
    keep_hint(model)
    prune(where.parent, MAX_FILES, suffix=".npz")
    prune(where.parent, MAX_HINTS, suffix=".hint")
