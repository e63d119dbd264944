"""Models larger than one card: where a model's layers live when accelerate spreads it over the
GPUs and the CPU (`device_map="auto"` under a `max_memory` budget), and reading the weights of a
layer whose parameters accelerate keeps off the device (offloaded to the CPU or to disk, seen as
`meta` tensors until a forward pass loads them).

Placement itself is accelerate's: nothing here decides where a layer goes.
"""

from __future__ import annotations

import contextlib
import copy
import re

import torch
from torch import nn

from mha_viz_models.errors import ModelLoadError

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)


def normalise_max_memory(max_memory: dict) -> dict:
    """accelerate's max_memory from what a user gives: GPU indices as ints (0, "0", "cuda:0"),
    "cpu" and "disk", sizes as bytes or strings such as "24GiB"; a clear ModelLoadError otherwise."""
    if not isinstance(max_memory, dict) or not max_memory:
        raise ModelLoadError("max_memory must map devices to sizes, e.g. {0: '24GiB', 'cpu': '64GiB'}.")
    out: dict = {}
    for dev, size in max_memory.items():
        key = str(dev).strip().lower().removeprefix("cuda:")
        if key.isdigit():
            index = int(key)
            if index >= torch.cuda.device_count():
                raise ModelLoadError(f"max_memory names GPU {index}, but this machine has "
                                     f"{torch.cuda.device_count()} CUDA GPU(s).")
            key = index
        elif key not in ("cpu", "disk", "mps"):
            raise ModelLoadError(f"max_memory names an unknown device '{str(dev)[:40]}': use GPU numbers, "
                                 "'cpu' or 'disk'.")
        if isinstance(size, str):
            if not _SIZE.match(size):
                raise ModelLoadError(f"max_memory's size '{size[:40]}' for {dev} is not a size such as '24GiB'.")
            out[key] = size.replace(" ", "")
        elif isinstance(size, (int, float)) and size > 0:
            out[key] = int(size)
        else:
            raise ModelLoadError(f"max_memory's size for {dev} must be a positive number of bytes or a size "
                                 "such as '24GiB'.")
    return out


def is_spread(model: nn.Module) -> bool:
    """Whether accelerate placed the model (a device map), rather than one `.to(device)`."""
    return bool(getattr(model, "hf_device_map", None))


def devices_used(model: nn.Module) -> list[str]:
    """The devices a spread model's device map names, in order of first use ("cuda:0", "cpu", "disk")."""
    seen: list[str] = []
    for where in (getattr(model, "hf_device_map", None) or {}).values():
        name = f"cuda:{where}" if isinstance(where, int) else str(where)
        if name not in seen:
            seen.append(name)
    return seen


def execution_device(module: nn.Module) -> torch.device:
    """Where `module` computes: the device of its first real parameter, else the execution
    device of accelerate's hook on it or its first hooked child (parameters offloaded as meta)."""
    for p in module.parameters():
        if p.device.type != "meta":
            return p.device
    for m in module.modules():
        hook = getattr(m, "_hf_hook", None)
        dev = getattr(hook, "execution_device", None)
        if dev is not None:
            return torch.device(f"cuda:{dev}" if isinstance(dev, int) else dev)
    return torch.device("cpu")


def input_device(model: nn.Module) -> torch.device:
    """Where a spread model's input ids go: the device its token embeddings compute on."""
    return execution_device(model.get_input_embeddings())


def has_offloaded(module: nn.Module) -> bool:
    """Whether any parameter of `module` is kept off its device by accelerate (a `meta` tensor)."""
    return any(p.device.type == "meta" for p in module.parameters())


def resident_copy(module: nn.Module) -> nn.Module:
    """A copy of an offloaded `module` with its weights loaded onto its execution device and
    accelerate's hooks removed: its weights can be read, and its layers run, outside a forward
    pass of the model. A module with no offloaded parameter is returned as it is."""
    if not has_offloaded(module):
        return module
    # heavy (accelerate): imported only for a spread model
    from accelerate.utils import align_module_device

    hooks = {id(m._hf_hook): None for m in module.modules() if getattr(m, "_hf_hook", None) is not None}
    with contextlib.ExitStack() as stack:
        for m in module.modules():  # accelerate hooks each leaf that holds parameters
            stack.enter_context(align_module_device(m))
        # the hooks are left out of the copy (they hold the map of every offloaded weight)
        kept = copy.deepcopy(module, memo=dict(hooks))
    for m in kept.modules():  # what attaching a hook set on each module: the class's forward again
        for attr in ("_hf_hook", "_old_forward", "forward"):
            m.__dict__.pop(attr, None)
    return kept


def resolve_device(device: str) -> torch.device:
    """'auto' (CUDA when available), 'cpu' or 'cuda' (or 'cuda:N')."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ModelLoadError(
                "CUDA was asked for, but this machine has no usable CUDA GPU (or PyTorch was "
                "installed without CUDA). Choose the device 'cpu' or 'auto'."
            )
        return torch.device(device)
    raise ModelLoadError(f"Unknown device '{device}': choose 'auto', 'cpu' or 'cuda'.")
