"""Direct logit attribution through post-norm blocks (Gemma 2 and 3 put a norm between the
attention output and the residual stream). The independent check: with every norm's scale frozen
at this run's value, taking one head's write alone out of the residual stream (computed by the
model's own W_O, post-attention norm and LM head) changes the logit difference by exactly that
head's attribution. The sum identity `per_head.sum() + rest == logit` cannot see a wrong
projection (`rest` absorbs it); this test can."""

import pytest
import torch

import mha_viz
from mha_viz.interventions import attribution
from tests.helpers import byte_bpe_tokenizer

TEXT = "the quick brown fox jumps over the lazy"


def _gemma(tmp_path, which: str):
    tok = byte_bpe_tokenizer()
    shape = dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                 sliding_window=8, final_logit_softcapping=None, attn_logit_softcapping=None)
    if which == "gemma3":
        from transformers import Gemma3ForCausalLM as Model
        from transformers import Gemma3TextConfig as Config
    else:
        from transformers import Gemma2Config as Config
        from transformers import Gemma2ForCausalLM as Model
    torch.manual_seed(0)
    model = Model(Config(**shape))
    with torch.no_grad():  # norms away from their init (weight 0: scale 1), so a wrong reading shows
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(0, 0.5)
    folder = tmp_path / which
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _frozen(norm, factor):
    """Run `norm` (a Gemma RMSNorm: its own weight and 1 + weight) with 1/σ frozen at `factor`."""
    norm._norm = lambda x: x * factor
    return norm


@pytest.mark.parametrize("which", ["gemma3", "gemma2"])
def test_removing_one_heads_write_changes_the_logit_difference_by_its_attribution(tmp_path, which):
    model = mha_viz.load_model(_gemma(tmp_path, which), device="cpu")
    assert model.has_head_outputs
    hf = model.hf_model
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    p = ids.shape[1] - 1
    logits = hf(input_ids=ids).logits[0, p]
    target, wrong = [int(i) for i in logits.topk(2).indices]
    d = attribution.direct_logit(model, TEXT, target=target, wrong=wrong)

    layers = hf.model.layers
    z, factors, final = {}, {}, {}  # o_proj's input, each post-attention norm's 1/σ, the final residual and 1/σ

    def keep_z(i):
        return lambda _m, args: z.__setitem__(i, args[0].detach())

    def keep_factor(i):  # the module's own 1/σ: its _norm of the input, over the input
        return lambda m, args, _out: factors.__setitem__(i, (m._norm(args[0].float()) / args[0].float())[..., :1])
    hooks = [layer.self_attn.o_proj.register_forward_pre_hook(keep_z(i)) for i, layer in enumerate(layers)]
    hooks += [layer.post_attention_layernorm.register_forward_hook(keep_factor(i)) for i, layer in enumerate(layers)]
    hooks.append(hf.model.norm.register_forward_hook(lambda m, args, _out: final.update(
        r=args[0].detach(), f=(m._norm(args[0].float()) / args[0].float())[..., :1])))
    with torch.no_grad():
        hf(input_ids=ids)
    for h in hooks:
        h.remove()

    def difference(residual):  # the final norm (σ frozen) and the LM head on the residual at p
        with torch.no_grad():
            out = hf.lm_head(_frozen(hf.model.norm, final["f"][0, p])(residual))
        return float(out[target] - out[wrong])
    assert difference(final["r"][0, p]) == pytest.approx(float(logits[target] - logits[wrong]), abs=1e-4)

    H = model.num_heads
    checked = 0
    for i, layer in enumerate(layers):
        for h in range(H):
            alone = z[i].clone().view(1, ids.shape[1], H, -1)
            alone[:, :, [k for k in range(H) if k != h]] = 0  # head h's output only
            with torch.no_grad():
                write = layer.self_attn.o_proj(alone.view(1, ids.shape[1], -1))[0, p]
                write = _frozen(layer.post_attention_layernorm, factors[i][0, p])(write)
            change = difference(final["r"][0, p]) - difference(final["r"][0, p] - write)
            assert change == pytest.approx(float(d.per_head[i, h]), rel=1e-3, abs=1e-4), (i, h)
            checked += 1
    assert checked == model.num_layers * H
    # the sum identity still holds, though it is not the test of correctness
    assert float(d.per_head.sum() + d.rest) == pytest.approx(d.logit, rel=1e-4, abs=1e-4)


def test_a_model_without_post_norms_is_unchanged(llama_dir):
    """Llama adds the attention output to the residual stream itself: no norm on the path."""
    model = mha_viz.load_model(llama_dir, device="cpu")
    assert attribution.post_norms(model) == [None] * model.num_layers
