"""Circuits of edges (`mha_viz.edge_attribution`, `mha_viz.circuits.path_patching`): EAP equals a
first-order estimate made here from hooks on Hugging Face's own modules (Llama with grouped-query
attention, GPT-2), equals path patching on a model made linear on purpose, path patching and circuits
equal runs patched here by hand, the planted circuit of the toy induction model is found, and what
cannot be split is refused with a reason."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import mha_viz
from mha_viz.circuits.edges import Edges
from mha_viz_models.reading import split_run
from tests.helpers import byte_bpe_tokenizer
from tests.models.architectures_2026 import build

CLEAN, CORRUPTED = "one two three four five", "one two four three five"  # the same token count
# the toy model's pair: the clean text of the app's induction preset, and a corrupted text that repeats
# another sequence, so that both the current token (the induction head's query) and the token before
# each earlier one (its key, through the previous-token head) differ (see test_the_planted_...)
TOY_CLEAN, TOY_CORRUPTED = "q w e r t y u i o q w e r t y u i", "a s d f g h j k l a s d f g h j k"


# --- an independent computation from Hugging Face's modules ------------------------------------


class _HF:
    """Where Llama and GPT-2 keep what a receiver reads and a sender writes, as Hugging Face names it."""

    def __init__(self, model: mha_viz.LoadedModel) -> None:
        self.model, hf = model, model.hf_model
        self.llama = model.model_type == "llama"
        assert self.llama or model.model_type == "gpt2"
        self.blocks = hf.model.layers if self.llama else hf.transformer.h
        self.final = hf.model.norm if self.llama else hf.transformer.ln_f
        self.H, self.G, self.d = model.num_heads, model.num_kv_heads, model.d_model
        self.d_head = self.d // self.H

    def attn_norm(self, layer):
        return self.blocks[layer].input_layernorm if self.llama else self.blocks[layer].ln_1

    def mlp_norm(self, layer):
        return self.blocks[layer].post_attention_layernorm if self.llama else self.blocks[layer].ln_2

    def out_proj(self, layer):
        return self.blocks[layer].self_attn.o_proj if self.llama else self.blocks[layer].attn.c_proj

    def projection(self, layer: int, kind: str, index: int) -> tuple[nn.Module, slice]:
        """The module making head `index`'s q (a KV head's k or v) and that head's columns of its output."""
        width = self.d_head
        if self.llama:
            attn = self.blocks[layer].self_attn
            return getattr(attn, f"{kind}_proj"), slice(index * width, (index + 1) * width)
        offset = {"q": 0, "k": 1, "v": 2}[kind] * self.d  # GPT-2's fused c_attn: q, k, v side by side
        return self.blocks[layer].attn.c_attn, slice(offset + index * width, offset + (index + 1) * width)

    def head_writes(self, layer: int, z: torch.Tensor) -> list[torch.Tensor]:
        """z (n, H d_v), the output projection's input: each head's z_h W_O[h] (n, d), no bias."""
        w = self.out_proj(layer).weight  # Llama's Linear (d, H d_v); GPT-2's Conv1D (H d_v, d)
        out = []
        for h in range(self.H):
            hs = slice(h * self.d_head, (h + 1) * self.d_head)
            out.append(z[:, hs] @ (w[:, hs].T if self.llama else w[hs, :]))
        return out

    def writes(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every sender's write (n, d) in one plain forward: the embedding from the hidden states, each
        head's from the output projection's input, each MLP's output."""
        found: dict[str, torch.Tensor] = {}
        hooks = []
        for layer in range(len(self.blocks)):
            def take_z(_m, args, layer=layer):
                for h, w in enumerate(self.head_writes(layer, args[0][0].detach())):
                    found[f"L{layer}H{h}"] = w

            def take_mlp(_m, _args, out, layer=layer):
                found[f"L{layer} MLP"] = out[0].detach()
            hooks.append(self.out_proj(layer).register_forward_pre_hook(take_z))
            hooks.append(self.blocks[layer].mlp.register_forward_hook(take_mlp))
        try:
            with torch.no_grad():
                out = self.model.hf_model(input_ids=ids, output_hidden_states=True, use_cache=False)
        finally:
            for hook in hooks:
                hook.remove()
        found["embed"] = out.hidden_states[0][0].detach()
        return found

    def streams(self, ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """What each receiver reads in a plain forward (n, d): each layer's input (its attention's
        receivers), the stream its MLP reads, the final norm's input."""
        found: dict[str, torch.Tensor] = {}
        hooks = []
        for layer in range(len(self.blocks)):
            hooks.append(self.blocks[layer].register_forward_pre_hook(
                lambda _m, args, kwargs, layer=layer: found.__setitem__(
                    ("attn", layer), (args[0] if args else kwargs["hidden_states"])[0].detach()), with_kwargs=True))
            hooks.append(self.mlp_norm(layer).register_forward_pre_hook(
                lambda _m, args, layer=layer: found.__setitem__(("mlp", layer), args[0][0].detach())))
        hooks.append(self.final.register_forward_pre_hook(
            lambda _m, args: found.__setitem__("logits", args[0][0].detach())))
        try:
            with torch.no_grad():
                self.model.hf_model(input_ids=ids, use_cache=False)
        finally:
            for hook in hooks:
                hook.remove()
        return found

    def m(self, ids: torch.Tensor, a: int, b: int, receiver: str | None = None, add=None) -> torch.Tensor:
        """m = logit(a) − logit(b) at the last position of a forward in which `receiver` alone ("L1H3.q",
        "L0KV1.k", "L1 MLP", "logits") reads its stream plus `add` (n, d), which may require a gradient:
        q, k, v by recomputing that head's columns of q_proj / k_proj / v_proj (GPT-2: c_attn) from the
        layer's own norm of (layer input + add); the MLP's and the logits' input through a pre-hook on
        their norm (Llama's post_attention_layernorm, GPT-2's ln_2; the final norm)."""
        hooks = []
        if receiver is not None:
            kind, layer, index = _parse(receiver)
            if kind == "logits":
                hooks.append(self.final.register_forward_pre_hook(lambda _m, args: (args[0] + add, *args[1:])))
            elif kind == "mlp":
                hooks.append(self.mlp_norm(layer).register_forward_pre_hook(
                    lambda _m, args: (args[0] + add, *args[1:])))
            else:
                proj, cols = self.projection(layer, kind, index)
                kept = {}
                hooks.append(self.blocks[layer].register_forward_pre_hook(
                    lambda _m, args, kwargs: kept.__setitem__("x", args[0] if args else kwargs["hidden_states"]),
                    with_kwargs=True))

                def replace(module, _args, out):
                    mine = module.forward(self.attn_norm(layer)(kept["x"] + add))  # forward: no hook again
                    out = out.clone()
                    out[..., cols] = mine[..., cols]
                    return out
                hooks.append(proj.register_forward_hook(replace))
        try:
            logits = self.model.hf_model(input_ids=ids, use_cache=False).logits.float()
        finally:
            for hook in hooks:
                hook.remove()
        return logits[0, -1, a] - logits[0, -1, b]

    def gradient(self, ids, a, b, receiver: str) -> torch.Tensor:
        """∂m/∂(receiver's input) (n, d): the gradient of a zero tensor only that receiver reads."""
        eps = torch.zeros(ids.shape[1], self.d, requires_grad=True)
        with torch.enable_grad():
            (grad,) = torch.autograd.grad(self.m(ids, a, b, receiver, eps), eps)
        return grad


def _parse(receiver: str) -> tuple[str, int, int]:
    """"L1H3.q" -> ("q", 1, 3); "L0KV1.k" -> ("k", 0, 1); "L1 MLP" -> ("mlp", 1, -1); "logits"."""
    if receiver == "logits":
        return "logits", -1, -1
    if receiver.endswith(" MLP"):
        return "mlp", int(receiver[1:-4]), -1
    head, kind = receiver.split(".")
    layer, index = head[1:].replace("KV", "H").split("H")
    return kind, int(layer), int(index)


def _ids(model, text: str) -> torch.Tensor:
    return torch.tensor([mha_viz.tokenize(model, text).ids])


def _ends(model) -> tuple[int, int]:
    """The answer and wrong token whose logit difference the corrupted text moves most (a random-init
    model's own predictions barely differ between the texts): the largest signal for float32."""
    with torch.no_grad():
        diff = (model.hf_model(input_ids=_ids(model, CLEAN)).logits[0, -1]
                - model.hf_model(input_ids=_ids(model, CORRUPTED)).logits[0, -1])
    return int(diff.argmax()), int(diff.argmin())


def _receivers(model) -> list[str]:
    """A spread of receivers of every input kind: every layer's first and last q, k, v, each MLP, the logits."""
    kv = "KV" if model.num_kv_heads != model.num_heads else "H"
    names = []
    for layer in range(model.num_layers):
        names += [f"L{layer}H0.q", f"L{layer}H{model.num_heads - 1}.q"]
        for kind in ("k", "v"):
            names += [f"L{layer}{kv}0.{kind}", f"L{layer}{kv}{model.num_kv_heads - 1}.{kind}"]
        names.append(f"L{layer} MLP")
    return names + ["logits"]


@pytest.fixture(scope="module")
def llama(llama_dir):
    return mha_viz.load_model(llama_dir, device="cpu")


@pytest.fixture(scope="module")
def gpt2(gpt2_dir):
    return mha_viz.load_model(gpt2_dir, device="cpu")


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


# --- 1. EAP is a first-order estimate -----------------------------------------------------------


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_eap_equals_a_first_order_estimate_made_from_hooks_on_hugging_faces_modules(name, request):
    model = request.getfixturevalue(name)
    edges = mha_viz.edge_attribution(model, CLEAN, CORRUPTED, *_ends(model), method="eap")
    ref = _HF(model)
    ids_c, ids_x = _ids(model, CLEAN), _ids(model, CORRUPTED)
    a, b = edges.answer, edges.wrong
    assert float(ref.m(ids_c, a, b)) == pytest.approx(edges.m_clean, abs=1e-4)
    assert float(ref.m(ids_x, a, b)) == pytest.approx(edges.m_corrupted, abs=1e-4)
    clean, corrupt = ref.writes(ids_c), ref.writes(ids_x)
    scores = edges.scores.set_index(["sender", "receiver"])["score"]
    want, got, kinds = [], [], []
    for receiver in _receivers(model):
        grad = ref.gradient(ids_c, a, b, receiver)
        senders = edges.scores.loc[edges.scores.receiver == receiver, "sender"]
        assert len(senders) > 0
        for sender in senders:
            want.append(float(((corrupt[sender] - clean[sender]) * grad).sum()))
            got.append(float(scores[(sender, receiver)]))
            kinds.append(_parse(receiver)[0])
    want, got, kinds = np.asarray(want), np.asarray(got), np.asarray(kinds)
    scale = np.abs(want).max()
    tol = 1e-4 * scale  # float32: the scores of a random-init model are small (its heads barely move m)
    for kind in ("q", "k", "v", "mlp", "logits"):  # a dozen or more edges of each input, each kind moving m
        assert (kinds == kind).sum() >= 12 and np.abs(want[kinds == kind]).max() > 10 * tol, kind
    np.testing.assert_allclose(got, want, atol=tol)
    # the senders' writes and the receivers' gradients: not one edge of the graph is left out
    g = split_run.graph_of(model)
    assert len(edges.scores) == g.allowed.sum() == g.edge_count
    assert set(edges.scores.sender) == set(clean)


def test_eap_ig_averages_the_gradient_at_the_interpolated_embeddings(llama):
    """EAP-IG with 2 steps is the mean of the gradients at embeddings ½ and all the way from the corrupted
    text's to the clean one's, each taken from Hugging Face's modules with the embedding replaced by hand;
    with 1 step it is EAP."""
    a, b = _ends(llama)
    ig = mha_viz.edge_attribution(llama, CLEAN, CORRUPTED, a, b, method="eap-ig", steps=2)
    eap = mha_viz.edge_attribution(llama, CLEAN, CORRUPTED, a, b, method="eap")
    one = mha_viz.edge_attribution(llama, CLEAN, CORRUPTED, a, b, method="eap-ig", steps=1)
    np.testing.assert_allclose(one.scores["score"], eap.scores["score"], atol=1e-6 * np.abs(eap.scores["score"]).max())
    ref, embed = _HF(llama), llama.hf_model.get_input_embeddings()
    ids_c, ids_x = _ids(llama, CLEAN), _ids(llama, CORRUPTED)
    with torch.no_grad():
        e_c, e_x = embed(ids_c), embed(ids_x)
    clean, corrupt = ref.writes(ids_c), ref.writes(ids_x)
    scores = ig.scores.set_index(["sender", "receiver"])["score"]
    want, got = [], []
    for receiver in ("L1H0.q", "L1KV1.k", "L1KV0.v", "L0 MLP", "logits"):
        grads = []
        for alpha in (0.5, 1.0):
            point = e_x + alpha * (e_c - e_x)
            hook = embed.register_forward_hook(lambda _m, _a, _o, point=point: point)
            try:
                grads.append(ref.gradient(ids_c, a, b, receiver))
            finally:
                hook.remove()
        grad = (grads[0] + grads[1]) / 2
        for sender in ig.scores.loc[ig.scores.receiver == receiver, "sender"]:
            want.append(float(((corrupt[sender] - clean[sender]) * grad).sum()))
            got.append(float(scores[(sender, receiver)]))
    want, got = np.asarray(want), np.asarray(got)
    np.testing.assert_allclose(got, want, atol=1e-4 * np.abs(want).max())
    # the two differ: the gradient at the half-way point is another one
    assert not np.allclose(ig.scores["score"], eap.scores["score"], atol=1e-3 * np.abs(eap.scores["score"]).max())


# --- 2. on a linear model, EAP is path patching -------------------------------------------------


class _Ones(nn.Module):
    def forward(self, x):
        return torch.ones_like(x)


def _linear_llama(folder) -> mha_viz.LoadedModel:
    """A random-init 2-layer Llama (4 query heads, 2 KV heads) with nothing nonlinear left: q_proj and
    k_proj zero (every head's pattern is the uniform causal one, whatever it reads), the MLP's gate a
    constant 1 (down(up(x)): linear), and every RMSNorm frozen at a fixed σ (x · w / σ), once its edge
    graph is found (which fits each norm to an RMSNorm on a probe)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_bpe_tokenizer()
    torch.manual_seed(11)
    net = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                       max_position_embeddings=64, initializer_range=0.2))
    net.save_pretrained(folder)
    tok.save_pretrained(folder)
    model = mha_viz.load_model(str(folder), device="cpu")
    split_run.graph_of(model)  # found (kept while the model lives) where the norms still are RMSNorms
    hf = model.hf_model
    norms = [hf.model.norm]
    for layer in hf.model.layers:
        layer.self_attn.q_proj.weight.zero_()
        layer.self_attn.k_proj.weight.zero_()
        layer.mlp.act_fn = _Ones()
        norms += [layer.input_layernorm, layer.post_attention_layernorm]
    sigma = {}

    def keep(norm, args):
        sigma.setdefault(norm, float(args[0].pow(2).mean().sqrt()))
    hooks = [n.register_forward_pre_hook(keep) for n in norms]
    with torch.no_grad():
        hf(input_ids=_ids(model, CLEAN))  # each norm's σ of the clean text, frozen from here on
    for h in hooks:
        h.remove()
    for n in norms:
        n.register_forward_hook(lambda m, args, _out: args[0] * m.weight / sigma[m])
    return model


def test_on_a_linear_model_eap_is_path_patching_for_every_edge(tmp_path):
    model = _linear_llama(tmp_path)
    for method in ("eap", "eap-ig"):
        edges = mha_viz.edge_attribution(model, CLEAN, CORRUPTED, method=method)
        real = mha_viz.circuits.path_patch_many(model, CLEAN, CORRUPTED, edges.scores, edges.answer, edges.wrong)
        est = edges.scores["score"].to_numpy()
        moved = np.abs(real) > 1e-3 * np.abs(real).max()
        assert np.abs(real).max() > 1e-2 and set(edges.scores.input[moved]) == {"v", "mlp", "logits"}
        np.testing.assert_allclose(est, real, atol=1e-5)
        # q and k read nothing here (the patterns are fixed): no score, no effect
        qk = edges.scores.input.isin(["q", "k"]).to_numpy()
        assert qk.any() and np.abs(est[qk]).max() < 1e-6 and np.abs(real[qk]).max() < 1e-6
        # and linear all the way: the effects of the edges into the logits add up to their whole input
        # patched, the corrupted run's last stream
        into_logits = edges.scores.receiver.to_numpy() == "logits"
        assert real[into_logits].sum() == pytest.approx(edges.m_corrupted - edges.m_clean, abs=1e-4)


# --- 3. path patching is what it says -----------------------------------------------------------


def test_a_split_run_with_zero_corrections_is_the_models_own_run(llama):
    g = split_run.graph_of(llama)
    ids = _ids(llama, CLEAN)
    R = len(g.receivers)
    with torch.inference_mode():
        plain = llama.hf_model(input_ids=ids, use_cache=False).logits[0, -1]
        provider = split_run.Fixed(list(range(R)), torch.zeros(R, ids.shape[1], llama.d_model))
        split = split_run.run(llama, g, provider, input_ids=ids.expand(R, -1))[:, -1]
    torch.testing.assert_close(split, plain.expand(R, -1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_path_patching_an_edge_equals_that_receiver_given_that_senders_write_by_hand(name, request):
    """path_patch_many: the clean run with receiver r's input alone plus Δ_s (the sender's corrupted
    write minus its clean one), here through hooks on the model's own modules."""
    model = request.getfixturevalue(name)
    ref = _HF(model)
    ids_c, ids_x = _ids(model, CLEAN), _ids(model, CORRUPTED)
    clean, corrupt = ref.writes(ids_c), ref.writes(ids_x)
    pairs = []
    for receiver in _receivers(model):
        layer = _parse(receiver)[1] if receiver != "logits" else model.num_layers
        pairs.append(("embed", receiver))
        if layer != 0:
            pairs.append((f"L{layer - 1}H1", receiver))
        if receiver.endswith("MLP"):
            pairs.append((f"L{layer}H2", receiver))
        if receiver == "logits":
            pairs += [(f"L{model.num_layers - 1}H0", receiver), (f"L{model.num_layers - 1} MLP", receiver)]
    a, b = _ends(model)
    got = mha_viz.circuits.path_patch_many(model, CLEAN, CORRUPTED, pairs, a, b)
    with torch.no_grad():
        m_clean = float(ref.m(ids_c, a, b))
        want = np.array([float(ref.m(ids_c, a, b, r, corrupt[s] - clean[s])) - m_clean for s, r in pairs])
    assert np.abs(want).max() > 1e-3  # a random-init model's edges move m by little: compared to 1e-5
    np.testing.assert_allclose(got, want, atol=1e-5)
    one = mha_viz.circuits.path_patch(model, CLEAN, CORRUPTED, *pairs[-1], a, b)
    assert one == pytest.approx(want[-1], abs=1e-4)


@pytest.mark.parametrize("name", ["llama", "gpt2"])
def test_the_edges_into_a_receiver_patched_together_are_its_whole_input_patched(name, request):
    """The circuit of every edge but those into receiver r: r alone reads the corrupted run's stream
    (the sum of every earlier sender's corrupted write), everything else reads the clean one; made here
    by giving r, in the clean run, the corrupted run's stream at its place."""
    model = request.getfixturevalue(name)
    ref = _HF(model)
    ids_c, ids_x = _ids(model, CLEAN), _ids(model, CORRUPTED)
    stream_c, stream_x = ref.streams(ids_c), ref.streams(ids_x)
    edges = mha_viz.edge_attribution(model, CLEAN, CORRUPTED, *_ends(model))
    a, b = edges.answer, edges.wrong
    scores = edges.scores
    got, want = [], []
    for receiver in _receivers(model):
        kind, layer, _ = _parse(receiver)
        key = "logits" if kind == "logits" else ("mlp" if kind == "mlp" else "attn", layer)
        rest = scores[scores.receiver != receiver]
        got.append(mha_viz.circuit(model, CLEAN, CORRUPTED, rest, a, b).m_circuit)
        with torch.no_grad():
            want.append(float(ref.m(ids_c, a, b, receiver, stream_x[key] - stream_c[key])))
    got, want = np.asarray(got), np.asarray(want)
    assert np.abs(want - edges.m_clean).max() > 1e-3
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert want[-1] == pytest.approx(edges.m_corrupted, abs=1e-4)  # the logits read the corrupted stream: m_corr


# --- 4. a circuit of every edge, of none ----------------------------------------------------------


@pytest.mark.parametrize("name", ["toy", "llama"])
def test_every_edge_is_faithful_and_no_edge_is_not(name, request):
    model = request.getfixturevalue(name)
    clean, corrupted = (TOY_CLEAN, TOY_CORRUPTED) if name == "toy" else (CLEAN, CORRUPTED)
    edges = mha_viz.edge_attribution(model, clean, corrupted, *(_ends(model) if name == "llama" else ()))
    full = mha_viz.circuit(model, clean, corrupted, edges.scores, edges.answer, edges.wrong)
    empty = mha_viz.circuit(model, clean, corrupted, [], edges.answer, edges.wrong)
    assert full.faithfulness == pytest.approx(1.0, abs=1e-4) and empty.faithfulness == pytest.approx(0.0, abs=1e-4)
    assert full.m_circuit == pytest.approx(edges.m_clean, abs=1e-4)
    assert empty.m_circuit == pytest.approx(edges.m_corrupted, abs=1e-4)
    curve = mha_viz.circuits.faithfulness_curve(model, clean, corrupted, edges, [0, len(edges.scores), 10**6])
    np.testing.assert_allclose(curve.faithfulness, [0.0, 1.0, 1.0], atol=1e-4)
    assert curve.k.tolist() == [0, len(edges.scores), len(edges.scores)]


# --- 5. the planted circuit ------------------------------------------------------------------------


def test_the_toy_models_induction_circuit_is_found(toy):
    """Which layer-0 head is the previous-token head and which layer-1 heads are induction heads is
    read off their attention; then the top edge into each induction head's key is the previous-token
    head, into its query the embedding (the current token), and the top 10 edges (EAP-IG) restore most of m.

    With the app's preset pair (the corrupted text keeps the second half) the top 10 edges measured
    0.69 and the query's top edge cannot be the embedding: the current token is the same in both texts."""
    run = mha_viz.analyze(toy, TOY_CLEAN)
    att, toks = np.asarray(run.attentions), run.tokens
    n = att.shape[-1]
    prev = [np.mean([att[0, h, i, i - 1] for i in range(1, n)]) for h in range(toy.num_heads)]
    previous = int(np.argmax(prev))
    assert prev[previous] > 0.8

    def induction(h):  # attention to the token after an earlier copy of the current one
        return np.mean([sum(att[1, h, i, j] for j in range(1, i) if toks[j - 1] == toks[i])
                        for i in range(n) if any(toks[j - 1] == toks[i] for j in range(1, i))])
    heads = [h for h in range(toy.num_heads) if induction(h) > 0.5]
    assert heads
    edges = mha_viz.edge_attribution(toy, TOY_CLEAN, TOY_CORRUPTED, method="eap-ig")
    assert edges.answer_text == "o" and edges.m_clean > 5 and edges.m_corrupted < -5  # copied, and not
    s = edges.scores

    def top_into(receiver):
        into = s[s.receiver == receiver]
        return into.sender.iloc[int(np.argmax(into.score.abs().to_numpy()))]
    for h in heads:
        assert top_into(f"L1H{h}.k") == f"L0H{previous}"
        assert top_into(f"L1H{h}.q") == "embed"
    assert mha_viz.circuit(toy, TOY_CLEAN, TOY_CORRUPTED, edges.top(10)).faithfulness >= 0.8


# --- 6. refusals -----------------------------------------------------------------------------------


def _gemma2(folder) -> str:
    from transformers import Gemma2Config, Gemma2ForCausalLM

    tok = byte_bpe_tokenizer()
    torch.manual_seed(5)
    Gemma2ForCausalLM(Gemma2Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                   max_position_embeddings=64)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def test_what_cannot_be_split_is_refused_with_a_reason(llama, bert_dir, t5_dir, tmp_path):
    olmo2 = mha_viz.load_model(build("olmo2", tmp_path / "olmo2"), device="cpu")
    gemma2 = mha_viz.load_model(_gemma2(tmp_path / "gemma2"), device="cpu")
    for model in (olmo2, gemma2):  # a norm over all the heads' output before the stream
        with pytest.raises(mha_viz.InputError, match=r"cannot be split: layer 0's heads write through one norm"):
            mha_viz.edge_attribution(model, CLEAN, CORRUPTED)
        with pytest.raises(mha_viz.InputError, match="no head has a write of its own"):
            mha_viz.circuit(model, CLEAN, CORRUPTED, [])
    for folder in (bert_dir, t5_dir):  # an encoder, an encoder–decoder
        with pytest.raises(mha_viz.InputError, match="not a decoder"):
            mha_viz.edge_attribution(mha_viz.load_model(folder, device="cpu"), "a b", "c d")
    with pytest.raises(ValueError, match="method"):
        mha_viz.edge_attribution(llama, CLEAN, CORRUPTED, method="foo")
    with pytest.raises(mha_viz.InputError, match="no sender 'L7H0'"):
        mha_viz.circuits.path_patch(llama, CLEAN, CORRUPTED, "L7H0", "logits")
    with pytest.raises(mha_viz.InputError, match="no receiver 'L0H0.k'"):  # GQA: the k receivers are L0KV{g}.k
        mha_viz.circuits.path_patch(llama, CLEAN, CORRUPTED, "embed", "L0H0.k")
    with pytest.raises(mha_viz.InputError, match="L1H0 does not write before L0H0.q reads"):
        mha_viz.circuits.path_patch(llama, CLEAN, CORRUPTED, "L1H0", "L0H0.q")
    with pytest.raises(mha_viz.InputError, match="L0H3 does not write before L0H5.q reads"):  # the same layer
        mha_viz.circuit(llama, CLEAN, CORRUPTED, [("embed", "logits"), ("L0H3", "L0H5.q")])
    # a sequential MLP reads its own layer's heads
    mha_viz.circuits.path_patch(llama, CLEAN, CORRUPTED, "L0H3", "L0 MLP")


# --- 7. saved and read back -----------------------------------------------------------------------


def test_edges_saved_as_json_read_back_the_same(llama):
    edges = mha_viz.edge_attribution(llama, CLEAN, CORRUPTED, method="eap-ig", steps=3)
    back = Edges.from_json(edges.to_json(note="kept"))
    pd.testing.assert_frame_equal(back.scores, edges.scores[["sender", "receiver", "input", "score"]])
    for key in ("method", "steps", "m_clean", "m_corrupted", "answer", "wrong", "model", "tokens", "answer_text",
                "wrong_text"):
        assert getattr(back, key) == getattr(edges, key), key
    assert back.extra == {**edges.extra, "note": "kept"} and (back.method, back.steps) == ("eap-ig", 3)
    pd.testing.assert_frame_equal(back.top(5), edges.top(5))
    with pytest.raises(ValueError, match="not a circuit saved by mha-viz"):
        Edges.from_json('{"edges": 3}')


def test_a_split_refused_in_half_precision_says_to_use_float32():
    """SmolLM2 in bfloat16: the split's logits differ by 0.15 (relative), where float32 splits it exactly; the
    refusal names the precision and what to pick, which a float32 refusal (a model the split does not fit) does not."""
    half = split_run.logits_gap(0.15, torch.bfloat16, 30)
    assert "a gap of 0.15 in bfloat16" in half and "30 layers" in half and "pick float32" in half, half
    whole = split_run.logits_gap(0.15, torch.float32, 30)
    assert whole == "its attention computed head by head gives other logits (a gap of 0.15)"
