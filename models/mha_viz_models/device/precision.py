"""The precision a model computes in: the user's choice ("auto", "float32", "bfloat16", "float16")
turned into a torch dtype, and back into the name every page, report, run file and link states.

Whatever the model computes in, a capture's probabilities come out as float32 rows that sum to 1:
`as_probabilities` is where half-precision probabilities are widened and renormalised.
"""

from __future__ import annotations

import platform

import torch

from mha_viz_models.device.choices import PRECISIONS as CHOICES
from mha_viz_models.errors import ModelLoadError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
NAMES = {v: k for k, v in DTYPES.items()}
HALF = (torch.bfloat16, torch.float16)


def dtype_name(dtype: torch.dtype) -> str:
    """'float32', 'bfloat16', 'float16' (another dtype by torch's own name, without 'torch.')."""
    return NAMES.get(dtype, str(dtype).removeprefix("torch."))


def checkpoint_dtype(config) -> torch.dtype:
    """The dtype a checkpoint's weights were saved in, as its config says (float32 when it says
    none, or names one mha-viz does not run)."""
    saved = getattr(config, "dtype", None)
    if isinstance(saved, str):
        saved = DTYPES.get(saved.removeprefix("torch."))
    return saved if saved in NAMES else torch.float32


def runs_on(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether `device` computes in `dtype`: every CUDA GPU runs float16, bfloat16 needs one that
    supports it (Ampere or later); the CPU runs all three."""
    if device.type == "cuda" and dtype == torch.bfloat16:
        return bool(torch.cuda.is_bf16_supported())
    return True


def native(dtype: torch.dtype, device) -> bool:
    """Whether `device`'s hardware computes in `dtype` (float32 always). A CUDA GPU: float16, and bfloat16 on
    those that support it without emulation (Ampere or later). The CPU: bfloat16 with AVX512-BF16 or AMX (on
    ARM, its BF16 extension), float16 with AVX512-FP16 or AMX-FP16, as torch reports them; elsewhere PyTorch
    emulates their matrix products, much slower than float32's. Where torch cannot say, not native."""
    device = torch.device(device)
    if dtype == torch.float32 or device.type not in ("cpu", "cuda"):
        return True
    if device.type == "cuda":
        if dtype != torch.bfloat16:
            return True
        try:
            return bool(torch.cuda.is_bf16_supported(including_emulation=False))
        except TypeError:  # an older torch, which does not count emulation
            return bool(torch.cuda.is_bf16_supported())
    if dtype == torch.bfloat16:
        if platform.machine().lower() in ("arm64", "aarch64"):
            return _reports(torch.ops.mkldnn, "_is_mkldnn_bf16_supported")  # the ARM BF16 extension
        return _reports(torch.cpu, "_is_avx512_bf16_supported") or _reports(torch.cpu, "_is_amx_tile_supported")
    if dtype == torch.float16:  # oneDNN's float16 needs AVX512-FP16 or AMX-FP16 (ARM: its FP16 arithmetic)
        return _reports(torch.cpu, "_is_amx_fp16_supported") or _reports(torch.ops.mkldnn, "_is_mkldnn_fp16_supported")
    return False


def emulated_note(dtype: torch.dtype, device) -> str | None:
    """What to tell a user whose model computes in `dtype` on a `device` without native support for it
    (`native`); None where it has it."""
    if native(dtype, device):
        return None
    where = "this CPU" if torch.device(device).type == "cpu" else "this GPU"
    return (f"{dtype_name(dtype)} has no native support on {where}: PyTorch emulates its matrix products, which is "
            "much slower than float32 and may round differently from hardware that computes in it.")


def _reports(namespace, name: str) -> bool:
    """What torch's check `namespace.name()` says, False where this torch has no such check."""
    try:
        return bool(getattr(namespace, name)())
    except (AttributeError, RuntimeError):
        return False


def resolve_dtype(choice: str | torch.dtype | None, device: torch.device, *, saved: torch.dtype = torch.float32,
                  fixed: bool = False) -> torch.dtype:
    """The dtype to load in. `choice` "auto" (or None) is the checkpoint's own dtype `saved`,
    float32 where the device cannot run it or where `fixed` (the bundled models stay float32);
    an explicit choice is refused with a message where the device cannot run it."""
    if isinstance(choice, torch.dtype):
        choice = dtype_name(choice)
    choice = (choice or "auto").strip().lower().removeprefix("torch.")
    if choice in ("fp32", "float", "f32"):
        choice = "float32"
    elif choice in ("bf16",):
        choice = "bfloat16"
    elif choice in ("fp16", "half", "f16"):
        choice = "float16"
    if choice == "auto":
        if fixed or not runs_on(saved, device):
            return torch.float32
        return saved
    if choice not in DTYPES:
        raise ModelLoadError(f"Unknown precision '{str(choice)[:40]}': choose one of {', '.join(CHOICES)}.")
    dtype = DTYPES[choice]
    if not runs_on(dtype, device):
        raise ModelLoadError(f"This GPU ({torch.cuda.get_device_name(device)}) cannot compute in {choice}: "
                             "choose float16 or float32.")
    return dtype


def as_probabilities(probs: torch.Tensor) -> torch.Tensor:
    """Probabilities as float32 whose rows sum to 1: a half-precision softmax (Hugging Face's
    eager attention rounds its float32 softmax back to the model's dtype) is widened and each
    row divided by its sum; float32 is returned as it is. A row of zeros (a query that sees no
    key) stays zeros, and so does a row whose sum is further from 1 than rounding moves it (GPT-OSS's
    learned sinks take a share of each row: what the row lacks stays the sink's)."""
    if probs.dtype == torch.float32:
        return probs
    wide = probs.float()
    sums = wide.sum(-1, keepdim=True)
    rounded = (sums - 1).abs() <= ROW_ROUNDING
    return wide.div_(torch.where(rounded & (sums > 0), sums, torch.ones_like(sums)))


# how far from 1 half precision's rounding moves a row's sum: each probability is rounded to 8 bits
# (relative error ≤ 2⁻⁹), so the sum moves by at most 2⁻⁹ ≈ 0.002; a sink's share beyond 1 % is kept
ROW_ROUNDING = 0.01


# Why a model computing in a half precision can give NaN or infinity, and what to choose instead: said by the
# load-time probe (`mha_viz_models.loading.loader`) and by every live run's check (`mha_viz.capture.finite`).
NOT_FINITE = {
    "float16": ("float16 holds numbers up to 65,504 only, and this model's activations go past that",
                "bfloat16 (float32's range) or float32"),
    "bfloat16": ("bfloat16 has float32's range but rounds every number to about 3 significant digits, and this "
                 "model's numbers go wrong at that", "float32"),
}
