"""The precision choice (`mha_viz_models.device.precision`): names to dtypes, "auto", refusals, and half-precision
probabilities widened to float32 rows that sum to 1."""

import pytest
import torch

from mha_viz_models import ModelLoadError, as_probabilities
from mha_viz_models.device.precision import checkpoint_dtype, dtype_name, resolve_dtype

CPU = torch.device("cpu")


@pytest.mark.parametrize("choice, want", [
    ("float32", torch.float32), ("bfloat16", torch.bfloat16), ("float16", torch.float16),
    ("bf16", torch.bfloat16), ("fp16", torch.float16), ("FP32", torch.float32), (torch.bfloat16, torch.bfloat16),
])
def test_explicit_choices(choice, want):
    assert resolve_dtype(choice, CPU, saved=torch.float32) == want


def test_auto_is_the_checkpoints_own_but_bundled_models_stay_float32():
    assert resolve_dtype("auto", CPU, saved=torch.bfloat16) == torch.bfloat16
    assert resolve_dtype(None, CPU, saved=torch.float16) == torch.float16
    assert resolve_dtype("auto", CPU, saved=torch.float32) == torch.float32  # a float32 checkpoint stays
    assert resolve_dtype("auto", CPU, saved=torch.bfloat16, fixed=True) == torch.float32
    assert resolve_dtype("bfloat16", CPU, saved=torch.float32, fixed=True) == torch.bfloat16  # asked for


def test_auto_falls_back_where_the_device_cannot_run_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_dtype("auto", torch.device("cuda"), saved=torch.bfloat16) == torch.float32
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "an old GPU")
    with pytest.raises(ModelLoadError, match="cannot compute in bfloat16"):
        resolve_dtype("bfloat16", torch.device("cuda"))


def test_unknown_precision_is_a_message():
    with pytest.raises(ModelLoadError, match="Unknown precision 'int8'.*auto, float32, bfloat16, float16"):
        resolve_dtype("int8", CPU)


def test_checkpoint_dtype_from_config():
    class Config:
        dtype = "bfloat16"
    assert checkpoint_dtype(Config()) == torch.bfloat16
    Config.dtype = torch.float16
    assert checkpoint_dtype(Config()) == torch.float16
    Config.dtype = None
    assert checkpoint_dtype(Config()) == torch.float32
    Config.dtype = "int8"
    assert checkpoint_dtype(Config()) == torch.float32
    assert dtype_name(torch.bfloat16) == "bfloat16" and dtype_name(torch.float64) == "float64"


def test_half_probabilities_become_float32_rows_that_sum_to_one():
    g = torch.Generator().manual_seed(0)
    exact = torch.softmax(torch.randn(3, 4, 50, 50, generator=g) * 4, dim=-1)
    half = exact.to(torch.bfloat16)
    assert (half.float().sum(-1) - 1).abs().max() > 1e-4  # rounding moved the sums: there is work to do
    wide = as_probabilities(half)
    assert wide.dtype == torch.float32
    assert (wide.sum(-1) - 1).abs().max() < 1e-6
    assert (wide - exact).abs().max() < 1e-2  # bfloat16 keeps 8 bits of each probability
    zero = torch.zeros(2, 5, dtype=torch.float16)
    assert torch.equal(as_probabilities(zero), torch.zeros(2, 5))  # a query that sees nothing stays 0
    same = exact.float()
    assert as_probabilities(same) is same


def _cpu(monkeypatch, *, bf16=False, amx=False, fp16=False, machine="x86_64"):
    """The CPU's half-precision features as torch reports them."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_amx_fp16_supported", lambda: fp16)
    monkeypatch.setattr("platform.machine", lambda: machine)


def test_native_precision_on_the_cpu_follows_what_torch_reports(monkeypatch):
    from mha_viz_models.device.precision import emulated_note, native

    _cpu(monkeypatch)
    assert native(torch.float32, "cpu") and emulated_note(torch.float32, CPU) is None
    assert not native(torch.bfloat16, CPU)
    assert emulated_note(torch.bfloat16, CPU).startswith("bfloat16 has no native support on this CPU")
    _cpu(monkeypatch, bf16=True)
    assert native(torch.bfloat16, CPU) and emulated_note(torch.bfloat16, CPU) is None
    _cpu(monkeypatch, amx=True)  # AMX's tiles compute bfloat16
    assert native(torch.bfloat16, CPU)
    _cpu(monkeypatch, fp16=True)
    assert native(torch.float16, CPU) and not native(torch.bfloat16, CPU)
    monkeypatch.delattr(torch.cpu, "_is_avx512_bf16_supported")  # a torch that cannot say: not native
    assert not native(torch.bfloat16, CPU)


def test_native_precision_on_cuda(monkeypatch):
    from mha_viz_models.device.precision import native

    seen = {}

    def supported(including_emulation=True):
        seen["emulation"] = including_emulation
        return False
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", supported)
    assert not native(torch.bfloat16, "cuda") and seen["emulation"] is False  # emulation is not native
    assert native(torch.float16, "cuda") and native(torch.float32, "cuda")


def test_a_layer_check_tells_rounding_from_a_wrong_layout():
    """`verify.LayerCheck`: the half-precision gap may pass the float32 copy's by ROUNDING times the layer's
    rounding; a float32 copy that disagrees is a wrong layout whatever the bound; NaN is never rounding."""
    from mha_viz_models.reading.verify import FLOOR, ROUNDING, TOLERANCE, LayerCheck, explain, first_failure

    rounding = LayerCheck(gap=0.02, gap32=1e-6, rounding=0.01)
    assert rounding.ok and rounding.bound == pytest.approx(1e-6 + ROUNDING * 0.01 + FLOOR)
    beyond = LayerCheck(gap=1e-6 + ROUNDING * 0.01 + 2 * FLOOR, gap32=1e-6, rounding=0.01)
    assert not beyond.ok and not beyond.layout_differs
    layout = LayerCheck(gap=0.5, gap32=0.5, rounding=0.4)  # within its bound, but float32 disagrees
    assert layout.gap <= layout.bound and layout.layout_differs and not layout.ok
    assert not LayerCheck(float("nan"), 0.0, 0.0).ok and not LayerCheck(0.0, float("nan"), 0.0).ok
    assert LayerCheck(0.0, TOLERANCE, 0.0).ok and not LayerCheck(0.0, 2 * TOLERANCE, 0.0).ok
    assert first_failure([rounding, rounding]) is None and first_failure([rounding, layout, beyond]) == (1, layout)
    assert "rotary positions, masks or biases differ" in explain(3, layout, "bfloat16")
    said = explain(3, beyond, "float16")
    assert "layer 3" in said and "rounds differently" in said and "rotary" not in said
