"""The precision choice (`mha_viz_models.loading.precision`): names to dtypes, "auto", refusals, and half-precision
probabilities widened to float32 rows that sum to 1."""

import pytest
import torch

from mha_viz_models import ModelLoadError, as_probabilities
from mha_viz_models.loading.precision import checkpoint_dtype, dtype_name, resolve_dtype

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
