"""Direct logit attribution checked by removal, on every family that has it. The check is made here,
from Hugging Face's own modules in float64 (a second copy of the model), not from mha-viz's read-out:
hooks keep each attention layer's z (the input of its W_O layer) and the final residual r at the
last position; head h's write is the model's own W_O layer applied to z with every other head's
slice zeroed (its bias left out), passed through the post-attention norm where the family has one;
then the model's own forward runs again with its final norm's output at that position replaced by
the norm applied to r − write, its scale frozen at the clean r's. Its own LM head, logit scale and
cap follow. With every norm's scale frozen the logit difference changes by exactly the head's
attribution; the sum identity `per_head.sum() + rest == logit` cannot see a wrong projection (rest
absorbs it), this can.

Gemma 2 soft-caps its logits (c · tanh(x / c)): there the attribution is the linear term through the
cap at this run's logits, checked against the removal of a scaled-down write, ε · write: the change
over ε · attribution tends to 1 as ε goes to 0, its error shrinking in proportion to ε."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import attribution
from mha_viz_models.reading import readout
from tests.helpers import save_peaked
from tests.models import architectures_2026 as arch
from tests.models.small_families import BUILDERS as QK_BUILDERS

TEXT = "The cat sat on the mat. The dog"
JITTER = 0.3  # every norm's weight moved off its init: a norm read wrongly cannot hide behind γ = 1
W_O = re.compile(r"(?:layers|\bh)\.(\d+)\.(?:self_attn|attn)\.(?:o_proj|out_proj|c_proj)$")  # each layer's W_O
FINAL_NORMS = ("model.norm", "transformer.ln_f", "model.final_layernorm", "model.embedding_norm")
POST_NORMED = {"gemma2", "gemma3", "olmo2"}  # the attention output passes post_attention_layernorm, then joins r


def _cohere():
    from transformers import CohereConfig, CohereForCausalLM
    return CohereForCausalLM, CohereConfig(  # LayerNorm without bias, logits × logit_scale (0.0625)
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=128)


def _gemma2(cap: float | None):
    cls, config = QK_BUILDERS["gemma2"]()
    config.final_logit_softcapping = cap
    return cls, config


SIMPLE = {  # GPT-2 (LayerNorm, biases), Llama (8 query heads, 2 KV heads), Qwen3, Gemma 2 (no cap) and 3, OLMo 2
    **{name: QK_BUILDERS[name] for name in ("gpt2", "llama", "qwen3", "gemma3", "olmo2")},
    "gemma2": lambda: _gemma2(None), "cohere": _cohere}
STREAMS = ("gemma3n",)  # several residual streams (AltUp), mixed by coefficients made from them: refused
FAMILIES = [*SIMPLE, *(name for name in arch.BUILDERS if name not in (*SIMPLE, *STREAMS, "deberta")), *arch.HYBRIDS]


def _save(name: str, out) -> str:
    if name in SIMPLE:
        return save_peaked(*SIMPLE[name](), out, jitter_norms=JITTER, seed=11)
    cls, config = {**arch.BUILDERS, **arch.HYBRIDS}[name]()
    return save_peaked(cls, config, out, sharpened=arch.SHARPENED, scale=arch.SHARP,
                       norm=arch.NORM_SHARP.get(name, arch.SHARP), jitter_norms=JITTER)


def _frozen(norm, x: torch.Tensor):
    """The norm module as an affine map with its scale frozen at its input x (d,): (w ↦ c(w) ⊙ k, β), read
    off the module itself. LayerNorm and RMSNorm are odd about their bias: norm(x) and norm(−x) give β
    and c(x) ⊙ k; a shift of x that leaves the output alone says it centres (c(w) = w − mean(w))."""
    with torch.no_grad():
        out, neg, shifted = (norm(v[None, None])[0, 0] for v in (x, -x, x + 0.5))
    centred = torch.allclose(shifted, out, rtol=1e-5, atol=1e-6)
    centre = (lambda w: w - w.mean()) if centred else (lambda w: w)
    k = (out - neg) / 2 / centre(x)
    return (lambda w: centre(w) * k), (out + neg) / 2


class Removal:
    """The model of `folder` in float64, run on `ids`: what taking writes out of its final residual
    at the last position does to the logit difference of its own forward."""

    def __init__(self, folder: str, ids: list[int], post_normed: bool):
        from transformers import AutoModelForCausalLM

        self.hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager",
                                                       experts_implementation="eager")  # grouped_mm: float32 only
        modules = dict(self.hf.named_modules())
        kinds = getattr(self.hf.config, "layer_types", None)  # MiniMax's lightning layers are self_attn too
        self.w_o = {int(m.group(1)): modules[n] for n in modules
                    if (m := W_O.search(n)) and (kinds is None or kinds[int(m.group(1))] != "linear_attention")}
        self.final = next(modules[n] for n in FINAL_NORMS if n in modules)
        self.post = {i: modules[f"model.layers.{i}"].post_attention_layernorm for i in self.w_o} if post_normed else {}
        self.ids, self.p = torch.tensor([ids]), len(ids) - 1
        self.heads = self.hf.config.num_attention_heads
        kept: dict = {}

        def keep(key):
            return lambda _m, args: kept.__setitem__(key, args[0][0, self.p].detach().clone())
        hooks = [m.register_forward_pre_hook(keep(("z", i))) for i, m in self.w_o.items()]
        hooks += [m.register_forward_pre_hook(keep(("post", i))) for i, m in self.post.items()]
        hooks.append(self.final.register_forward_pre_hook(keep("r")))
        try:
            with torch.no_grad():
                self.logits = self.hf(input_ids=self.ids).logits[0, self.p]
        finally:
            for h in hooks:
                h.remove()
        self.kept = kept
        self.target, self.wrong = (int(i) for i in self.logits.topk(2).indices)

    def write(self, layer: int, head: int) -> torch.Tensor:
        """Head `head` of layer `layer`'s write into the residual stream at the last position (d,)."""
        z = self.kept[("z", layer)].view(self.heads, -1)
        alone = torch.zeros_like(z)
        alone[head] = z[head]
        proj = self.w_o[layer]
        with torch.no_grad():
            out = proj(alone.reshape(1, 1, -1))[0, 0] - (0 if proj.bias is None else proj.bias)
        if layer in self.post:  # the post-attention norm, its scale that of this layer's whole attention output
            out = _frozen(self.post[layer], self.kept[("post", layer)])[0](out)
        return out

    def difference(self, removed: torch.Tensor | float = 0.0) -> float:
        """logit(target) − logit(wrong) from the model's own forward, the final norm's output at the last
        position replaced by the norm of r − removed with its scale frozen at r's."""
        frozen, beta = _frozen(self.final, self.kept["r"])

        def replace(_m, _args, out):
            out = out.clone()
            out[0, self.p] = frozen(self.kept["r"] - removed) + beta
            return out
        handle = self.final.register_forward_hook(replace)
        try:
            with torch.no_grad():
                logits = self.hf(input_ids=self.ids).logits[0, self.p]
        finally:
            handle.remove()
        return float(logits[self.target] - logits[self.wrong])


@pytest.mark.parametrize("name", FAMILIES)
def test_removing_one_heads_write_changes_the_logit_difference_by_its_attribution(name, tmp_path):
    folder = _save(name, tmp_path / name)
    model = mha_viz.load_model(folder, device="cpu")
    removal = Removal(folder, mha_viz.tokenize(model, TEXT).ids, name in POST_NORMED)
    assert sorted(removal.w_o) == model.layer_ids  # the softmax layers, by the model's own numbers
    # a norm between the attention output and the residual stream where the family has one, none elsewhere
    assert [norm is not None for norm in attribution.post_norms(model)] == [name in POST_NORMED] * model.num_layers
    d = attribution.direct_logit(model, TEXT, target=removal.target, wrong=removal.wrong)
    assert not d.linearised and d.label == "Direct logit attribution"
    clean = removal.difference()
    # frozen at its own residual, the rebuilt norm is the model's: the clean logit difference comes back
    assert clean == pytest.approx(float(removal.logits[removal.target] - removal.logits[removal.wrong]), abs=1e-9)
    rows = [model.layer_ids.index(n) for n in (model.layer_ids[0], model.layer_ids[-1])]  # the first and last layer
    changes = torch.tensor([[clean - removal.difference(removal.write(model.layer_ids[row], head))
                             for head in range(model.num_heads)] for row in rows], dtype=torch.float64)
    # each head's own: the heads differ (a head read off another's slice would show), and each matches
    assert float(changes.std()) > 0.1 * float(changes.abs().max()) > 0
    torch.testing.assert_close(torch.as_tensor(d.per_head[rows], dtype=torch.float64), changes, rtol=1e-3,
                               atol=1e-4 * float(changes.abs().max()))
    assert float(d.per_head.sum() + d.rest) == pytest.approx(d.logit, rel=1e-4, abs=1e-4)


def test_several_residual_streams_are_refused_with_their_reason(tmp_path):
    """Gemma 3n's layers take and return AltUp streams (streams, B, n, d), each layer mixing them by coefficients
    computed from the streams, and the last averages them at a renormalised magnitude: a head's write reaches the
    logits along no linear path. Direct attribution is refused with that reason; it had treated the first stream as
    the residual and the post-attention norm as the only step, giving numbers."""
    model = mha_viz.load_model(_save("gemma3n", tmp_path / "gemma3n"), device="cpu")
    with pytest.raises(mha_viz.InputError, match=r"several residual streams on \(AltUp\)"):
        attribution.direct_logit(model, TEXT)
    patched = attribution.patch_heads(model, TEXT, TEXT.replace("cat", "dog"))  # what runs the model itself works
    assert patched.restored.shape == (model.num_layers, model.num_heads) and np.isfinite(patched.restored).all()


SCALARS = (0.5, 2.0, 0.25, 3.0)  # Gemma 4's layer_scalar of each layer, away from the 1 a random init has


def test_a_stream_scaled_by_each_layer_scales_every_heads_write_with_it(tmp_path):
    """Gemma 4 multiplies the whole stream by its layer's `layer_scalar` as each layer ends, so a head's write
    reaches the final norm multiplied by the scalars of its own layer and of every later one: removing that much
    changes the logit difference by the head's attribution (read without the scalars, the first layer's heads were
    off by 0.75, the last layer's by 3)."""
    from transformers import AutoModelForCausalLM, Gemma4ForCausalLM, Gemma4TextConfig

    config = Gemma4TextConfig(**arch.common(sliding_window=arch.WINDOW, vocab_size_per_layer_input=400,
                                            hidden_size_per_layer_input=8, per_layer_config={"03": {"head_dim": 16}},
                                            layer_types=["sliding_attention"] * 3 + ["full_attention"]))
    folder = save_peaked(Gemma4ForCausalLM, config, tmp_path / "gemma4", sharpened=arch.SHARPENED, scale=2.0,
                         norm=2.0, jitter_norms=JITTER)
    hf = AutoModelForCausalLM.from_pretrained(folder)
    for block, scalar in zip(hf.model.layers, SCALARS):
        block.layer_scalar.fill_(scalar)
    hf.save_pretrained(folder)
    model = mha_viz.load_model(folder, device="cpu")
    assert [float(b.layer_scalar) for b in model.hf_model.model.layers] == list(SCALARS)
    removal = Removal(folder, mha_viz.tokenize(model, TEXT).ids, post_normed=True)
    d = attribution.direct_logit(model, TEXT, target=removal.target, wrong=removal.wrong)
    clean = removal.difference()
    for layer in (0, 3):
        factor = float(np.prod(SCALARS[layer:]))  # 0.75 for the first layer, 3 for the last
        changes = [clean - removal.difference(factor * removal.write(layer, head)) for head in range(model.num_heads)]
        assert d.per_head[layer] == pytest.approx(changes, rel=1e-3, abs=1e-4 * max(map(abs, changes)))
    assert float(d.per_head.sum() + d.rest) == pytest.approx(d.logit, rel=1e-4, abs=1e-4)


def test_gemma_2_with_its_default_cap_is_attributed_through_it(tmp_path):
    """A Gemma 2 checkpoint caps its logits at 30 (the config's default): attributed, not refused, and said
    to be linearised; at 30 a random model's logits are barely bent, so the removal of a whole write
    still changes the logit difference by the attribution, to first order."""
    cls, config = QK_BUILDERS["gemma2"]()
    assert config.final_logit_softcapping == 30.0
    folder = save_peaked(cls, config, tmp_path / "gemma2-default", jitter_norms=JITTER, seed=11)
    model = mha_viz.load_model(folder, device="cpu")
    removal = Removal(folder, mha_viz.tokenize(model, TEXT).ids, post_normed=True)
    d = attribution.direct_logit(model, TEXT, target=removal.target, wrong=removal.wrong)
    assert d.linearised and d.softcap == 30.0 and d.label.endswith("(linearised through soft-capping)")
    # what reads the logits linearly (copying scores, circuits) still finds no read-out there
    assert readout.of(model) is None and readout.of(model, through_cap=True).softcap == 30.0
    clean, last = removal.difference(), model.layer_ids[-1]
    changes = [clean - removal.difference(removal.write(last, head)) for head in range(model.num_heads)]
    assert d.per_head[-1] == pytest.approx(changes, rel=1e-3, abs=1e-4 * max(map(abs, changes)))


CAP = 1.0  # tight enough that the cap bends this run's logits (the default, 30, barely touches a random model's)


def _capped(tmp_path, cap: float | None) -> tuple[str, mha_viz.LoadedModel]:
    folder = save_peaked(*_gemma2(cap), tmp_path / f"gemma2-cap-{cap}", jitter_norms=JITTER, seed=11)
    return folder, mha_viz.load_model(folder, device="cpu")


def test_soft_capped_attribution_is_the_first_order_change_of_removing_a_scaled_down_write(tmp_path):
    folder, model = _capped(tmp_path, CAP)
    removal = Removal(folder, mha_viz.tokenize(model, TEXT).ids, post_normed=True)
    d = attribution.direct_logit(model, TEXT, target=removal.target, wrong=removal.wrong)
    assert d.linearised and d.softcap == CAP and "linearised through soft-capping" in d.label
    uncapped = torch.atanh(removal.logits[[removal.target, removal.wrong]] / CAP) * CAP
    slopes = 1 - torch.tanh(uncapped / CAP) ** 2  # the cap's derivative at this run's two logits
    assert d.slopes == pytest.approx(slopes.tolist(), rel=1e-4)
    assert float(slopes.max()) < 0.9  # the cap bends here: an attribution that ignored it would be off by 10 %
    assert d.logit == pytest.approx(float(removal.logits[removal.target] - removal.logits[removal.wrong]), abs=1e-5)
    clean = removal.difference()
    last = model.layer_ids[-1]
    for number in (model.layer_ids[0], last):
        row = model.layer_ids.index(number)
        head = int(abs(d.per_head[row]).argmax())  # the layer's strongest head: rounding stays far below ε
        write, dla = removal.write(number, head), float(d.per_head[row, head])
        errors = [abs((clean - removal.difference(eps * write)) / (eps * dla) - 1) for eps in (1e-1, 1e-2, 1e-3)]
        assert errors[-1] < 1e-2, (number, head, errors)  # first order: the ratio tends to 1
        assert errors[0] > 1e-4  # the full write's change is not linear: the cap bends it
        for big, small in zip(errors, errors[1:]):  # the error shrinks as ε does, not to a floor
            assert 0.05 < small / big < 0.2, (number, head, errors)


def test_without_the_cap_the_linearised_attribution_is_each_tokens_exact_one_times_the_slope(tmp_path):
    """The same weights with and without the cap: each token's part is scaled by the cap's slope at its
    logit, nothing else (and without the cap the attribution is the exact one the removal test checks)."""
    _, capped = _capped(tmp_path, CAP)
    _, plain = _capped(tmp_path, None)
    top = attribution.direct_logit(capped, TEXT)
    d = attribution.direct_logit(capped, TEXT, target=top.target, wrong=(top.target + 7) % len(capped.tokenizer))
    target, other = (attribution.direct_logit(plain, TEXT, target=t) for t in (d.target, d.wrong))
    assert not target.linearised and target.slopes == (1.0,) and target.caveat == ""
    assert d.slopes[0] == pytest.approx(float(1 - torch.tanh(torch.tensor(target.logit / CAP)) ** 2), rel=1e-5)
    linear = d.slopes[0] * target.per_head - d.slopes[1] * other.per_head
    assert d.per_head == pytest.approx(linear, rel=1e-5, abs=1e-6)
    assert d.per_head.sum() + d.rest == pytest.approx(d.slopes[0] * target.logit - d.slopes[1] * other.logit,
                                                      rel=1e-4, abs=1e-5)
    # the logit lens of one head reads through the cap too: every score scaled by a slope below 1
    (capped_top, _), (plain_top, _) = (attribution.head_tokens(m, TEXT, 0, 0, k=1) for m in (capped, plain))
    assert 0 < capped_top[0][1] < plain_top[0][1]
