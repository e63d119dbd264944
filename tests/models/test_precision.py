"""Models in half precision: bfloat16 probabilities within 2e-2 of float32's on the same weights
(Hugging Face's attention and ours), always float32 rows that sum to 1; head outputs, metrics,
attribution and generation in every precision; "auto" follows the checkpoint."""

import numpy as np
import pytest
import torch

import mha_viz
import mha_viz_models
from mha_viz.interventions import attribution
from mha_viz.metrics import head_table

TEXT = "The keys to the old wooden cabinet in the hall are missing, said the man."
FIDELITY = 2e-2  # the bound: bfloat16 against float32 on the same weights


def _pair(spec, **kw):
    full = mha_viz.load_model(spec, device="cpu", **kw)
    half = mha_viz.load_model(spec, device="cpu", dtype="bfloat16", **kw)
    _computes_in(full, torch.float32)
    _computes_in(half, torch.bfloat16)
    return full, half


def _computes_in(model, dtype: torch.dtype) -> None:
    """The weights really are `dtype` (not a float32 model that says so), the attention's and the embeddings'."""
    assert model.dtype == dtype and model.precision == {torch.float32: "float32", torch.bfloat16: "bfloat16",
                                                         torch.float16: "float16"}[dtype]
    assert model.hf_model.get_input_embeddings().weight.dtype == dtype
    assert {p.dtype for m, _ in model.attention_modules for p in m.parameters()} == {dtype}


@pytest.mark.model
@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
def test_minilm_bfloat16_within_fidelity_of_float32(local):
    full, half = _pair("minilm", local_attention=local)
    assert full.precision == "float32" and half.precision == "bfloat16"
    assert next(half.hf_model.parameters()).dtype == torch.bfloat16
    a, b = mha_viz.analyze(full, TEXT), mha_viz.analyze(half, TEXT)
    assert b.attentions.dtype == np.float32 and b.precision == "bfloat16" and a.precision == "float32"
    assert np.abs(b.attentions.sum(-1) - 1).max() < 1e-5
    gap = np.abs(a.attentions - b.attentions).max()
    assert 0 < gap < FIDELITY  # bfloat16 differs (it really computed in half), within the bound
    assert b.head_outputs.dtype == np.float32 and np.isfinite(b.head_outputs).all()
    assert half.facts()["precision"] == "bfloat16"


@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
def test_llama_gqa_bfloat16_within_fidelity(llama_dir, local):
    full, half = _pair(llama_dir, local_attention=local)
    text = "the quick brown fox jumps over the lazy dog and the cat"
    a, b = mha_viz.analyze(full, text), mha_viz.analyze(half, text)
    assert np.abs(b.attentions.sum(-1) - 1).max() < 1e-5
    assert np.triu(b.attentions, 1).max() == 0  # causal stays exactly causal
    assert 0 < np.abs(a.attentions - b.attentions).max() < FIDELITY
    assert np.abs(a.value_norms - b.value_norms).max() <= FIDELITY * np.abs(a.value_norms).max()
    # a metric on the half run is close to the float32 one (entropy of each head)
    ta, tb = head_table(a), head_table(b)
    assert np.abs(ta["entropy"].to_numpy() - tb["entropy"].to_numpy()).max() < 0.05


def test_gpt2_float16_and_lean_capture(gpt2_dir):
    full, half = _pair(gpt2_dir)
    f16 = mha_viz.load_model(gpt2_dir, device="cpu", dtype="float16")
    _computes_in(f16, torch.float16)
    text = "hello world, hello again world"
    ref = mha_viz.analyze(full, text)
    for m in (half, f16):
        for lean in (False, True):
            r = mha_viz.analyze(m, text, lean=lean)
            assert r.attentions.dtype == np.float32 and np.abs(r.attentions.sum(-1) - 1).max() < 1e-5
            assert 0 < np.abs(r.attentions - ref.attentions).max() < FIDELITY, (m.precision, lean)


def test_attribution_and_generation_in_bfloat16(llama_dir):
    full, half = _pair(llama_dir)
    text = "the quick brown fox jumps over the lazy"
    d = attribution.direct_logit(half, text)
    assert d.per_head.dtype != object and np.isfinite(d.per_head).all()
    # the decomposition holds in half precision too: heads plus the rest give the model's logit
    assert abs(d.per_head.sum() + d.rest - d.logit) < 2e-2 * max(1.0, abs(d.logit))
    ref = attribution.direct_logit(full, text, target=d.target)
    assert np.abs(ref.per_head - d.per_head).max() < 0.1 * max(1.0, np.abs(ref.per_head).max())
    g = mha_viz.generate(half, "the quick", max_new_tokens=3, stop_at_eos=False)
    assert len(g.steps) == 3 and g.run.precision == "bfloat16"
    assert g.run.attentions.dtype == np.float32
    assert np.abs(g.run.attentions.sum(-1) - 1).max() < 1e-5


def test_auto_follows_the_checkpoint(llama_dir, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    saved = tmp_path / "llama-bf16"
    AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.bfloat16).save_pretrained(saved)
    AutoTokenizer.from_pretrained(llama_dir).save_pretrained(saved)
    assert mha_viz.load_model(saved, device="cpu").precision == "bfloat16"  # its own
    assert mha_viz.load_model(saved, device="cpu", dtype="float32").precision == "float32"
    assert mha_viz.load_model(llama_dir, device="cpu").precision == "float32"  # a float32 one stays


@pytest.mark.model
def test_bundled_models_stay_float32():
    assert mha_viz.load_model("toy-induction", device="cpu").precision == "float32"
    toy = mha_viz.load_model("toy-induction", device="cpu", dtype="bfloat16")
    run = mha_viz.analyze(toy, "a b c d a b c")
    assert run.precision == "bfloat16" and np.abs(run.attentions.sum(-1) - 1).max() < 1e-5


def test_the_random_baseline_computes_in_the_models_precision(llama_dir):
    half = mha_viz.load_model(llama_dir, device="cpu", dtype="bfloat16")
    twin = mha_viz_models.random_twin(half)
    assert next(twin.hf_model.parameters()).dtype == torch.bfloat16 and twin.precision == "bfloat16"
    run = mha_viz.analyze(twin, "the quick brown fox")
    assert run.precision == "bfloat16" and np.abs(run.attentions.sum(-1) - 1).max() < 1e-5


def test_the_lm_head_reads_the_last_rows_dense_with_the_same_logits(llama_dir):
    """A batch's last rows only (`logits_to_keep=1` on a batch of sequences, as real patching asks) reach the
    LM head as a strided view, rows a sequence apart; the load gives the head a dense copy (on a CPU, bfloat16's
    matmul copied its whole broadcast weight for a strided input: 1.05 s against 5 ms a call for SmolLM2's head).
    A loaded model and its random twin: the head reads contiguous rows, and the logits are the last row of the
    whole forward's, within bfloat16's rounding."""
    half = mha_viz.load_model(llama_dir, device="cpu", dtype="bfloat16")
    ids = torch.randint(0, half.hf_model.config.vocab_size, (3, 7), generator=torch.Generator().manual_seed(0))
    for model in (half, mha_viz_models.random_twin(half)):
        read = []
        hook = model.hf_model.get_output_embeddings().register_forward_pre_hook(
            lambda _m, args: read.append((args[0].shape, args[0].is_contiguous())))
        try:
            with torch.inference_mode():
                last = model.hf_model(input_ids=ids, logits_to_keep=1, use_cache=False).logits.float()
                whole = model.hf_model(input_ids=ids, use_cache=False).logits.float()
        finally:
            hook.remove()
        assert read == [((3, 1, 64), True), ((3, 7, 64), True)]
        assert (last[:, 0] - whole[:, -1]).abs().max() <= 2e-2 * whole[:, -1].abs().max()


def _gpt2_with(gpt2_dir, folder, value: float):
    """The random GPT-2 saved again with `value` as the first bias of layer 0's first LayerNorm: every
    token's attention input carries it."""
    from transformers import AutoTokenizer, GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(gpt2_dir)
    with torch.no_grad():
        model.transformer.h[0].ln_1.bias[0] = value
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(gpt2_dir).save_pretrained(folder)
    return folder


def test_a_float16_overflow_is_refused_with_the_precisions_that_hold_it(gpt2_dir, tmp_path):
    """1e5 is past float16's largest number (65,504) and well within bfloat16's and float32's: the
    checkpoint loads and runs in those two, and float16's refusal names them."""
    assert torch.isinf(torch.tensor(1e5).half()) and torch.isfinite(torch.tensor(1e5).bfloat16())
    folder = _gpt2_with(gpt2_dir, tmp_path / "big", 1e5)
    for dtype in ("float32", "bfloat16"):
        run = mha_viz.analyze(mha_viz.load_model(folder, device="cpu", dtype=dtype), "the quick brown fox")
        assert np.isfinite(run.attentions).all() and np.abs(run.attentions.sum(-1) - 1).max() < 1e-5
    with pytest.raises(mha_viz.ModelLoadError) as err:
        mha_viz.load_model(folder, device="cpu", dtype="float16")
    msg = str(err.value)
    assert "not finite (NaN or infinity) on a test input in float16" in msg and "65,504" in msg, msg
    assert msg.endswith("Choose bfloat16 (float32's range) or float32."), msg


def test_bfloat16_that_is_not_finite_is_not_told_to_choose_bfloat16(gpt2_dir, tmp_path):
    """A NaN planted in the checkpoint: in bfloat16 the load-time probe refuses it and says float32."""
    folder = _gpt2_with(gpt2_dir, tmp_path / "nan", float("nan"))
    with pytest.raises(mha_viz.ModelLoadError) as err:
        mha_viz.load_model(folder, device="cpu", dtype="bfloat16")
    msg = str(err.value)
    assert "not finite (NaN or infinity) on a test input in bfloat16" in msg, msg
    assert msg.endswith("Choose float32.") and "Choose bfloat16" not in msg, msg
