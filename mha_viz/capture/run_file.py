"""A run as one `.npz` file and back: the raw data export of a run (`AttentionRun.save` / `load`).

The file holds plain numpy arrays only (strings as unicode arrays), written with
`np.savez_compressed` and read with `allow_pickle=False`, so a file from a stranger never runs
code. The saved run is the run as shown: a run with tokens hidden (`drop_tokens`) is saved with
those tokens gone and its rows renormalised; what was hidden is kept only as a label
(`hidden_label`) and is not restored. The value norms are kept where the run has them; a file
without them (older ones) loads as a run without them. A run saved as contributions (the sidebar's
lens) keeps its `lens` label, so that it loads as what it is. The run is any object with
`AttentionRun`'s fields (this module imports nothing from the package, so `capture` can call it).
"""

from __future__ import annotations

import io
import os
import zipfile
from typing import BinaryIO

import numpy as np

FORMAT_VERSION = 1
FLOAT16_MAX = float(np.finfo(np.float16).max)
ROW_SUM_ATOL = 1e-2  # float16 rounding of a 2,048-key row stays far below this

Target = str | os.PathLike | BinaryIO
_REQUIRED = ("format_version", "attentions", "tokens", "token_ids", "model_name", "layer_ids")
_STRING_LISTS = ("tokens", "raw_tokens")
_STRINGS = ("model_name", "text")


def _strings(values, name: str, arrays: dict) -> None:
    """Store strings as a unicode array, with their lengths: numpy drops trailing NUL characters
    of unicode items, the lengths put them back."""
    values = [str(v) for v in values]
    arrays[name] = np.array(values, dtype=str)
    arrays[name + "_len"] = np.array([len(v) for v in values], dtype=np.int64)


def _compact(a: np.ndarray, float16: bool) -> np.ndarray:
    """float16 when asked and every value fits, else float32."""
    a = np.asarray(a, dtype=np.float32)
    if float16 and np.isfinite(a).all() and (a.size == 0 or np.abs(a).max() <= FLOAT16_MAX):
        return a.astype(np.float16)
    return a


def arrays(run, *, float16: bool = False) -> dict[str, np.ndarray]:
    """The named arrays a run file holds: attentions (L, H, n, n), head_outputs (L, H, n, d_v)
    and value_norms (L, H, n) in float32 or float16 (the last two when the run has them), the
    per-token lists (n,), layer_ids (L,) and the scalars (0-d)."""
    out = {
        "format_version": np.array(FORMAT_VERSION, dtype=np.int64),
        "attentions": _compact(run.attentions, float16),
        "token_ids": np.array(run.token_ids, dtype=np.int64).reshape(-1),
        "layer_ids": np.array(run.layer_ids, dtype=np.int64).reshape(-1),
        "special_mask": np.array(run.special_mask, dtype=bool).reshape(-1),
        "word_ids": np.array(run.word_ids, dtype=np.int64).reshape(-1),
        "is_causal": np.array(bool(run.is_causal)),
        "num_kv_heads": np.array(int(run.num_kv_heads), dtype=np.int64),
        "num_input_tokens": np.array(int(run.num_input_tokens), dtype=np.int64),
        "num_input_tokens_is_estimate": np.array(bool(run.num_input_tokens_is_estimate)),
        "model_layers": np.array(int(run.model_layers), dtype=np.int64),
    }
    for name in _STRING_LISTS:
        _strings(getattr(run, name), name, out)
    for name in _STRINGS:
        _strings([getattr(run, name)], name, out)
    if run.head_outputs is not None:
        out["head_outputs"] = _compact(run.head_outputs, float16)
    if run.value_norms is not None:
        out["value_norms"] = _compact(run.value_norms, float16)
    if getattr(run, "layer_kv_heads", None):  # (layer number, its key/value heads) where the layers differ
        out["layer_kv_heads"] = np.array(sorted(run.layer_kv_heads.items()), dtype=np.int64).reshape(-1, 2)
    if run.hidden is not None:
        _strings([run.hidden.label], "hidden_label", out)
    if run.lens:  # the attentions hold contributions (the sidebar's lens), not weights: the run says so
        _strings([run.lens], "lens", out)
    if getattr(run, "precision", ""):  # what the model computed in (the arrays are float32 or float16 as saved)
        _strings([run.precision], "precision", out)
    return out


def write(target: Target, run, *, float16: bool = False) -> None:
    """Save `run` to a path (written as given, no '.npz' added) or a binary file object."""
    data = arrays(run, float16=float16)
    if isinstance(target, (str, os.PathLike)):
        with open(target, "wb") as f:
            np.savez_compressed(f, **data)
    else:
        np.savez_compressed(target, **data)


def to_bytes(run, *, float16: bool = False) -> bytes:
    """The file's bytes, e.g. for a download button."""
    buf = io.BytesIO()
    write(buf, run, float16=float16)
    return buf.getvalue()


def _declared(source) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Each member's shape and dtype from its header, before any data is read: object arrays
    and oversized arrays are refused without loading them."""
    out = {}
    with zipfile.ZipFile(source) as zf:
        for info in zf.infolist():
            with zf.open(info) as f:
                version = np.lib.format.read_magic(f)
                shape, _, dtype = (np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0(f))
            out[info.filename.removesuffix(".npy")] = (shape, dtype)
    return out


def _load(source, max_bytes: int | None) -> dict[str, np.ndarray]:
    """Every array of an npz file, or ValueError saying why the file is not one."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(bytes(source))
    unreadable = (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zipfile.LargeZipFile)
    try:
        declared = _declared(source)
    except unreadable as exc:
        raise ValueError(f"not a readable mha-viz run file (.npz): {exc}") from exc
    for name, (shape, dtype) in declared.items():
        if dtype.hasobject:
            raise ValueError(f"array {name!r} holds Python objects, which a run file never does "
                             "(loading them could run code); the file is refused")
    total = sum(int(np.prod(s)) * d.itemsize for s, d in declared.values())
    if max_bytes is not None and total > max_bytes:
        raise ValueError(f"the file's arrays would take {total / 2**20:.0f} MiB, over the limit of "
                         f"{max_bytes / 2**20:.0f} MiB")
    if hasattr(source, "seek"):
        source.seek(0)
    try:
        with np.load(source, allow_pickle=False) as z:
            return {name: z[name] for name in z.files}
    except unreadable as exc:
        raise ValueError(f"not a readable mha-viz run file (.npz): {exc}") from exc


def _read_strings(z: dict, name: str) -> list[str]:
    values = [str(v) for v in np.asarray(z[name]).reshape(-1)]
    lengths = z.get(name + "_len")
    if lengths is not None and len(lengths) == len(values):
        width = np.asarray(z[name]).dtype.itemsize // 4  # characters stored: a length past it is forged
        if any(not 0 <= int(k) <= width for k in lengths):
            raise ValueError(f"{name}_len says longer strings than the file holds")
        values = [v.ljust(int(k), "\x00") for v, k in zip(values, lengths)]
    return values


def _scalar(z: dict, name: str, kind: type, default):
    if name not in z:
        return default
    a = np.asarray(z[name])
    if a.size != 1:
        raise ValueError(f"{name} must be a single value; got shape {a.shape}")
    return kind(a.reshape(-1)[0])


def _check(z: dict) -> None:
    """ValueError for a file this version cannot read: a newer format, missing arrays, shapes
    or kinds that do not fit together, probabilities that are not probabilities."""
    missing = [name for name in _REQUIRED if name not in z]
    if missing:
        raise ValueError(f"not an mha-viz run file: missing {', '.join(missing)}")
    version = _scalar(z, "format_version", int, 0)
    if version > FORMAT_VERSION:
        raise ValueError(f"this run file has format version {version}, from a newer mha-viz; this one "
                         f"reads versions up to {FORMAT_VERSION}")
    a = z["attentions"]
    if a.ndim != 4 or a.shape[-1] != a.shape[-2] or a.dtype.kind != "f":
        raise ValueError(f"attentions must be floats of shape (layers, heads, n, n); got {a.dtype} {a.shape}")
    L, H, n = a.shape[:3]
    lengths = {"tokens": n, "raw_tokens": n, "special_mask": n, "word_ids": n, "layer_ids": L}
    for name, want in lengths.items():
        if name in z and np.asarray(z[name]).shape != (want,):
            raise ValueError(f"{name} must have shape ({want},) for attention over {n} tokens in {L} "
                             f"layers; got {np.asarray(z[name]).shape}")
    if len(z["token_ids"]) not in (0, n):
        raise ValueError(f"token_ids must be empty or {n} ids; got {len(z['token_ids'])}")
    for name in ("token_ids", "layer_ids", "word_ids"):
        if name in z and z[name].size and z[name].dtype.kind not in "iu":
            raise ValueError(f"{name} must be integers; got {z[name].dtype}")
    kv = _scalar(z, "num_kv_heads", int, 0)
    if kv < 0 or (kv and H % kv):
        raise ValueError(f"num_kv_heads ({kv}) must divide the number of heads ({H})")
    model_layers = _scalar(z, "model_layers", int, 0)
    ids = z["layer_ids"]
    if model_layers and ids.size and not (0 <= ids.min() and ids.max() < model_layers):
        raise ValueError(f"layer_ids must lie in 0..{model_layers - 1}; got {z['layer_ids'].tolist()}")
    out = z.get("head_outputs")
    if out is not None and (out.ndim != 4 or out.shape[:3] != (L, H, n) or out.dtype.kind != "f"):
        raise ValueError(f"head_outputs must be floats of shape ({L}, {H}, {n}, d_v); "
                         f"got {out.dtype} {out.shape}")
    norms = z.get("value_norms")
    if norms is not None and (norms.shape != (L, H, n) or norms.dtype.kind != "f"):
        raise ValueError(f"value_norms must be floats of shape ({L}, {H}, {n}); got {norms.dtype} {norms.shape}")
    if norms is not None and not (np.isfinite(norms).all() and (norms >= 0).all()):
        raise ValueError("value_norms must be finite and non-negative (they are norms)")
    if not np.isfinite(a).all() or (a < 0).any():
        raise ValueError("attentions must be finite and non-negative")
    sums = a.sum(-1, dtype=np.float64)
    if (np.minimum(np.abs(sums - 1), sums) > ROW_SUM_ATOL).any():  # empty rows (hidden tokens) sum to 0
        raise ValueError("every attention row must sum to 1 (or to 0 for a row left empty by hidden tokens)")


def read(source: Target | bytes, *, max_bytes: int | None = None) -> dict:
    """The constructor fields of the run saved in `source` (a path, a binary file object or the
    file's bytes): `AttentionRun(**read(source))`. Arrays come back float32. `max_bytes`:
    refuse a file whose arrays would take more memory than this, before loading any.
    Raises ValueError saying what is wrong with a file that is not a run file."""
    z = _load(source, max_bytes)
    _check(z)
    fields = {
        "attentions": np.asarray(z["attentions"], dtype=np.float32),
        "tokens": _read_strings(z, "tokens"),
        "token_ids": [int(i) for i in z["token_ids"]],
        "model_name": _read_strings(z, "model_name")[0] if z["model_name"].size else "array",
        "layer_ids": [int(i) for i in z["layer_ids"]],
        "is_causal": _scalar(z, "is_causal", bool, False),
        "num_kv_heads": _scalar(z, "num_kv_heads", int, 0),
        "num_input_tokens": _scalar(z, "num_input_tokens", int, 0),
        "num_input_tokens_is_estimate": _scalar(z, "num_input_tokens_is_estimate", bool, False),  # newer files
        "model_layers": _scalar(z, "model_layers", int, 0),
        "text": _read_strings(z, "text")[0] if "text" in z and z["text"].size else "",
    }
    if "raw_tokens" in z:
        fields["raw_tokens"] = _read_strings(z, "raw_tokens")
    if "special_mask" in z:
        fields["special_mask"] = [bool(b) for b in z["special_mask"]]
    if "word_ids" in z:
        fields["word_ids"] = [int(i) for i in z["word_ids"]]
    if "head_outputs" in z:
        fields["head_outputs"] = np.asarray(z["head_outputs"], dtype=np.float32)
    if "value_norms" in z:  # files written before value norms have none: the run says so
        fields["value_norms"] = np.asarray(z["value_norms"], dtype=np.float32)
    if "layer_kv_heads" in z:  # Gemma 4: each layer's key/value heads where they differ
        pairs = np.asarray(z["layer_kv_heads"]).reshape(-1, 2)
        fields["layer_kv_heads"] = {int(layer): int(count) for layer, count in pairs}
    if "lens" in z and z["lens"].size:
        fields["lens"] = _read_strings(z, "lens")[0]
    if "precision" in z and z["precision"].size:  # files written before precisions were chosen have none
        fields["precision"] = _read_strings(z, "precision")[0]
    return fields


def hidden_label(source: Target | bytes) -> str | None:
    """The label of the tokens that were hidden when the run was saved, if any (not restorable)."""
    z = _load(source, None)
    return _read_strings(z, "hidden_label")[0] if "hidden_label" in z else None
