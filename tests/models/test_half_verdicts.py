"""The load check in half precision (`mha_viz_models.reading.verify.LayerCheck`): each layer of our MHA
against Hugging Face's attention on that layer's own input, within the rounding a float32 copy of the layer
shows. On random-init Llama, Gemma 3 and GPT-OSS with peaked heads, in bfloat16 and in float16, with our MHA
in place of theirs (a wrong layout is refused) and with theirs (our MHA does not stand in, and says why):
- the right layout is accepted, and the model really computes in that precision;
- a subtly wrong one is not: rotary pairs interleaved where the model splits halves, a q/k norm over
  the heads instead of each head's values, a learned sink logit dropped (planted by patching our MHA);
- a gap the float32 copy does not show (planted in half precision only) is not taken for rounding;
- scores that overflow float16 are refused, naming the precisions that hold them.
SmolLM2 in bfloat16 (pretrained): every layer within its bound, our MHA stands in."""

from __future__ import annotations

import pytest
import torch

import mha_viz
from mha_viz_models import ModelLoadError
from mha_viz_models.attention import fast_paths, rotary
from mha_viz_models.attention import mha as mha_module
from mha_viz_models.attention.mha import MultiHeadAttention
from mha_viz_models.device.precision import DTYPES
from mha_viz_models.reading import verify
from tests.helpers import save_peaked
from tests.models import architectures_2026, small_families

SHARP = 12.0  # q/k projections (Gemma 3: its q/k norms' weights) scaled up: peaked rows, where a wrong layout shows
HALVES = ("bfloat16", "float16")


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM, LlamaConfig(**architectures_2026.common())


def _gemma3():
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    return Gemma3ForCausalLM, Gemma3TextConfig(**architectures_2026.common(
        sliding_window=architectures_2026.WINDOW, query_pre_attn_scalar=16))


BUILDERS = {"llama": _llama, "gemma3": _gemma3, "gpt_oss": architectures_2026.BUILDERS["gpt_oss"]}


def _build(family: str, out) -> str:
    cls, config = BUILDERS[family]()
    path = save_peaked(cls, config, out, sharpened=architectures_2026.SHARPENED, scale=SHARP, norm=SHARP)
    if family == "gpt_oss":  # sink logits that take a visible share of each row (random init leaves them near 0)
        model = cls.from_pretrained(path)
        with torch.no_grad():
            for layer in model.model.layers:
                layer.self_attn.sinks.copy_(torch.linspace(-1.0, 3.0, config.num_attention_heads))
        model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family -> the folder of its random-init model, built the first time a test asks for it."""
    built: dict[str, str] = {}

    def folder(family: str) -> str:
        if family not in built:
            built[family] = _build(family, tmp_path_factory.mktemp(family))
        return built[family]
    return folder


def _load(path: str, dtype: str, local: bool):
    """(the model, None) when our MHA is accepted; (the model or None, the refusal (local attention) or why
    our MHA does not stand in) otherwise."""
    try:
        model = mha_viz.load_model(path, device="cpu", dtype=dtype, local_attention=local)
    except ModelLoadError as exc:
        assert local, exc  # with Hugging Face's attention the model loads, and says why ours does not stand in
        return None, str(exc)
    assert model.precision == dtype
    # the attention computes in it (GPT-OSS keeps its RMSNorms in float32 under float16: its own rule)
    assert {p.dtype for m, _ in model.attention_modules for p in m.parameters()} == {DTYPES[dtype]}
    assert model.hf_model.get_input_embeddings().weight.dtype == DTYPES[dtype]
    return model, model.stand_in


def _verdict(path: str, dtype: str, local: bool) -> str | None:
    return _load(path, dtype, local)[1]


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
@pytest.mark.parametrize("family", list(BUILDERS))
def test_the_right_layout_is_accepted(folders, family, dtype, local):
    model, why = _load(folders(family), dtype, local)
    assert why is None, why
    probs = torch.stack([a[0] for a in model.capture(verify.probe(model.hf_model.config.vocab_size, "cpu"))
                         .attentions]).float()
    assert probs.amax(-1).mean() > 0.5, "heads are not peaked: a wrong layout could hide in near-uniform rows"
    if family == "gpt_oss":  # the sinks take a share that a dropped one would give back to the tokens
        assert (1 - probs.sum(-1)).max() > 0.1


def _interleaved(monkeypatch) -> None:
    """RoPE turning adjacent pairs (0, 1), (2, 3)… by θ_0, θ_1… where the model turns i with i + d/2."""
    real = rotary.apply_rotary

    def interleaved(x, cos, sin, layout="halves"):
        if layout == "halves":  # each angle twice, [θ_0 … θ_{d/2−1}, θ_0 …]: once is enough
            cos, sin = cos[..., :cos.shape[-1] // 2], sin[..., :sin.shape[-1] // 2]
        return real(x, cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1), "pairs")
    monkeypatch.setattr(rotary, "apply_rotary", interleaved)


def _norm_over_heads(monkeypatch) -> None:
    """A per-head q/k RMSNorm whose statistic is taken over the heads instead of each head's d_k values."""
    real = MultiHeadAttention.split_heads

    def wrong_axis(self, x, heads, norm=None):
        right = real(self, x, heads, norm)  # (B, heads, n, d_k)
        if norm is None or self.norm_over_heads:
            return right
        y = x.view(*x.shape[:2], heads, self.d_k).transpose(1, 2).float()  # (B, heads, n, d_k)
        ms_dk, ms_heads = y.pow(2).mean(-1, keepdim=True), y.pow(2).mean(1, keepdim=True)
        return (right.float() * ((ms_dk + 1e-6) / (ms_heads + 1e-6)).sqrt()).to(x.dtype)
    monkeypatch.setattr(MultiHeadAttention, "split_heads", wrong_axis)


def _sink_dropped(monkeypatch) -> None:
    """The learned sink logit left out of the softmax: its share goes to the tokens."""
    monkeypatch.setattr(mha_module, "sink_column", lambda _sinks, scores, heads=None:
                        torch.full_like(scores[..., :1], float("-inf")))


DEFECTS = {"interleaved rotary": _interleaved, "q/k norm over the heads": _norm_over_heads,
           "sink dropped": _sink_dropped}
PLANTED = [("llama", "interleaved rotary"), ("gemma3", "interleaved rotary"), ("gpt_oss", "interleaved rotary"),
           ("gemma3", "q/k norm over the heads"), ("gpt_oss", "sink dropped")]  # each where the model has it


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
@pytest.mark.parametrize("family, defect", PLANTED)
def test_a_wrong_layout_is_refused(folders, family, defect, dtype, local, monkeypatch):
    DEFECTS[defect](monkeypatch)
    why = _verdict(folders(family), dtype, local)
    assert why is not None, f"{defect} accepted in {dtype}"
    assert "a float32 copy of that layer" in why and "rotary positions, masks or biases differ" in why, why
    assert f"on a test input in {dtype}" in why, why


@pytest.mark.parametrize("dtype", HALVES)
@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
def test_a_gap_the_float32_copy_does_not_show_is_not_rounding(folders, dtype, local, monkeypatch):
    """Scores moved in half precision only (the first key's by 1): the float32 copies agree, the half gap is
    beyond what the layer's rounding explains, and the message says rounding, not the architecture."""
    path = folders("llama")  # one family is enough: the check does not depend on it
    real = fast_paths.scaled_scores

    def shifted(q, k, scale):
        scores = real(q, k, scale)
        if q.dtype != torch.float32:
            scores[..., 0] += 1.0
        return scores
    monkeypatch.setattr(fast_paths, "scaled_scores", shifted)
    why = _verdict(path, dtype, local)
    assert why is not None and "more than that layer's rounding explains" in why, why
    assert "rotary positions" not in why and f"our MHA rounds differently from the model's own in {dtype}" in why
    if local:
        assert why.endswith("or load it in float32.")


@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
def test_scores_that_overflow_float16_are_refused(folders, tmp_path, local):
    """Layer 0's q and k projections scaled so that its scores pass float16's 65,504 (its softmax is then
    NaN) and stay far inside bfloat16's range: float16 is refused and names the two that hold them."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(folders("llama"), attn_implementation="eager")
    with torch.no_grad():
        attn = model.model.layers[0].self_attn
        attn.q_proj.weight.mul_(300.0)
        attn.k_proj.weight.mul_(300.0)
        ids = verify.probe(model.config.vocab_size, "cpu")
        scores = model.half()(input_ids=ids, output_attentions=True).attentions[0]
    assert not torch.isfinite(scores).all()  # Hugging Face's own float16 attention is not finite
    path = tmp_path / "overflow"
    model.float().save_pretrained(path)
    AutoTokenizer.from_pretrained(folders("llama")).save_pretrained(path)
    half = mha_viz.load_model(path, device="cpu", dtype="bfloat16", local_attention=local)
    assert half.precision == "bfloat16" and half.stand_in is None
    with pytest.raises(ModelLoadError) as err:
        mha_viz.load_model(path, device="cpu", dtype="float16", local_attention=local)
    msg = str(err.value)
    assert "gives attention that is not finite (NaN or infinity) on a test input in float16" in msg, msg
    assert "65,504" in msg and msg.endswith("Choose bfloat16 (float32's range) or float32."), msg


@pytest.mark.model
def test_smollm2_in_bfloat16_is_within_every_layers_bound():
    """The pretrained model a new user tries: each of its 30 layers within its own bound, the verdict says our
    MHA computes every layer, and the bounds are rounding-sized (none near the old single 0.15)."""
    model = mha_viz.load_model("smollm2", device="cpu", dtype="bfloat16")
    assert model.stand_in is None and model.facts()["our MHA"].startswith("computes every layer")
    checks = verify.recompute_checks(model, verify.probe(model.hf_model.config.vocab_size, "cpu"))
    assert len(checks) == 30 and all(c.ok for c in checks)
    assert max(c.gap32 for c in checks) < 1e-5 and 0 < min(c.gap for c in checks)
    assert max(c.bound for c in checks) < 0.1


EVERY_FAMILY = {**{f"small-{k}": v for k, v in small_families.BUILDERS.items()}, **architectures_2026.BUILDERS,
                **architectures_2026.HYBRIDS}


def _family_verdict(folder: str, dtype: str, local: bool) -> str:
    """What the load says of our MHA: "stands in", or the refusal / the reason it does not, its numbers cut
    (they differ between precisions)."""
    try:
        loaded = mha_viz.load_model(folder, device="cpu", local_attention=local, dtype=dtype)
    except ModelLoadError as exc:
        return "refused: " + str(exc).split(":")[0]
    return "stands in" if loaded.can_recompute else "does not stand in: " + str(loaded.stand_in).split("(")[0]


@pytest.mark.parametrize("family", sorted(EVERY_FAMILY))
def test_every_family_gets_the_same_verdict_in_bfloat16_as_in_float32(family, tmp_path):
    """The per-layer check runs on every family's own layer arguments (T5-style biases aside: encoder-decoders
    are not swapped): a family our MHA computes in float32 is not refused in bfloat16 by the check itself."""
    cls, config = EVERY_FAMILY[family]()
    folder = save_peaked(cls, config, tmp_path / family, sharpened=architectures_2026.SHARPENED, scale=3.0)
    for local in (False, True):
        f32 = _family_verdict(folder, "float32", local)
        assert _family_verdict(folder, "bfloat16", local) == f32, (family, local, f32)
