"""The exact effective attention of non-softmax token-mixing layers (mha_viz_models.effective):
for every hybrid family transformers ships whose layer kind is read, on a random-init config saved
to a folder and loaded as a user's model, Σ_s A[t, s] · v_s plus the separate parts reproduces the
layer's own output (a hook on the layer) within 1e-5 relative in float32, and A is causal. Mamba-2's
matrix is also checked against Ali et al.'s formula written out by a naive loop in float64, and the
chunked delta rule against the naive product over r of α_r (I − β_r k_r k_rᵀ)."""

from __future__ import annotations

import gc
import math
import weakref
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

import mha_viz
from mha_viz.drawing import effective as effective_figures
from mha_viz.metrics import effective_measures
from mha_viz_models.effective import NotExact, delta, effective_layers, mixing_layers, reconstruct, ssd
from tests.models.architectures_2026 import build
from tests.models.effective_families import BASE, FAMILIES, KIND, N, save_random


def load(name: str, path: str):
    """The HF model of `path` through mha-viz's loader as a user's folder (Mamba, Mamba-2 and Falcon-Mamba too, read
    as effective attention alone since issue 88)."""
    return mha_viz.load_model(path, device="cpu").hf_model


@pytest.fixture(scope="module", params=list(FAMILIES))
def family(request, tmp_path_factory):
    name = request.param
    model = load(name, save_random(name, tmp_path_factory.mktemp(name)))
    ids = torch.randint(3, 300, (1, N), generator=torch.Generator().manual_seed(1))
    outputs, handles = {}, []
    for number, _name, module, _kind in mixing_layers(model):
        handles.append(module.register_forward_hook(
            lambda _m, _a, out, number=number: outputs.__setitem__(number, _first(out)[0].detach())))
    try:
        layers = effective_layers(model, ids)
    finally:
        for h in handles:
            h.remove()
    return name, model, ids, layers, outputs


def _first(out):
    """A layer's output: MiniMax's and RecurrentGemma's layers return (output, state)."""
    return out[0] if isinstance(out, tuple) else out


def close(ours: torch.Tensor, theirs: torch.Tensor, rel: float = 1e-5) -> None:
    """Within `rel` of the reference's largest magnitude, element by element."""
    torch.testing.assert_close(ours.float(), theirs.float(), rtol=rel, atol=rel * float(theirs.abs().max()))


def test_the_matrices_and_parts_reproduce_each_layer_output(family):
    name, _model, _ids, layers, outputs = family
    assert layers and sorted(outputs) == [la.layer for la in layers]
    for la in layers:
        assert la.kind == KIND.get(name, "mamba2") and la.matrix.dtype == "float32"
        assert la.matrix.shape[1:] == (N, N) and la.values.shape[:2] == (N, la.matrix.shape[0])
        ref = outputs[la.layer]
        assert float(ref.abs().max()) > 1e-3  # a layer that writes nothing would pass any reconstruction
        close(reconstruct(la), ref)


def test_the_matrices_are_causal(family):
    *_, layers, _outputs = family
    for la in layers:
        upper = torch.ones(N, N, dtype=torch.bool).triu(1)
        assert float(abs(torch.as_tensor(la.matrix)[:, upper]).max()) == 0.0
        assert float(abs(la.matrix).max()) > 0


def test_a_layer_read_by_rows_makes_the_whole_matrix_block_by_block(family, monkeypatch):
    """by_rows: a layer of a kind that can (SSD, the delta rule, lightning, mLSTM) comes without its matrix; its
    blocks, in order, are the whole matrix's rows (blocks of 16 rows here, the delta rule's chunks of 64), and the
    layer's output rebuilt from them is the model's; the other kinds come whole."""
    from mha_viz_models.effective import each_layer
    from mha_viz_models.effective import layer as effective_layer

    monkeypatch.setattr(effective_layer, "MIN_ROWS", 16)
    monkeypatch.setattr(effective_layer, "ROW_CELLS", 1)
    _name, model, ids, layers, outputs = family
    for la, whole in zip(each_layer(model, ids, by_rows=True), layers, strict=True):
        if la.by_rows is None:
            np.testing.assert_array_equal(la.matrix, whole.matrix)
            continue
        assert la.matrix is None and la.kind in ("mamba2", "gated_deltanet", "kda", "lightning", "mlstm")
        blocks = list(la.blocks())
        assert [t0 for t0, _ in blocks] == list(range(0, N, 64 if "delta" in la.kind or la.kind == "kda" else 16))
        close(torch.as_tensor(np.concatenate([rows for _, rows in blocks], axis=1)), torch.as_tensor(whole.matrix),
              rel=1e-6)
        close(reconstruct(la), outputs[la.layer])


def _read_with_input(name: str, tmp_path, layer: int):
    """Layer `layer` of a random-init `name` read at n = 12: our EffectiveLayer, the mixer, its input
    (float64) and its parameters (float64), for a formula written out by hand."""
    model = load(name, save_random(name, tmp_path / name))
    mixer = model.backbone.layers[layer].mixer
    ids = torch.randint(3, 300, (1, 12), generator=torch.Generator().manual_seed(2))
    seen = {}
    handle = mixer.register_forward_hook(lambda _m, args, _o: seen.__setitem__("x", args[0][0].detach()))
    try:
        ours = effective_layers(model, ids, layers=[layer])[0]
    finally:
        handle.remove()
    return ours, mixer, seen["x"].double(), {k: v.detach().double() for k, v in mixer.named_parameters()}


def _causal_conv(u: torch.Tensor, p: dict) -> torch.Tensor:
    """The depthwise causal convolution, one output at a time, float64."""
    w, k = p["conv1d.weight"][:, 0], p["conv1d.weight"].shape[-1]
    return torch.stack([sum(w[:, j] * u[t - (k - 1) + j] for j in range(k) if t - (k - 1) + j >= 0)
                        for t in range(u.shape[0])]) + p["conv1d.bias"]


def test_mamba2_against_the_hidden_attention_formula_by_a_naive_loop(tmp_path):
    """Ali et al. (arXiv 2403.01590): α[t, s] = C_t · (Π_{r=s+1..t} exp(Δ_r a)) · Δ_s B_s, written here
    from the layer's own parameters and its input, in float64, one (t, s) at a time, at n = 12."""
    ours, mixer, u, p = _read_with_input("mamba2", tmp_path, 0)
    d_in, heads, groups, state = mixer.intermediate_size, mixer.num_heads, mixer.n_groups, mixer.ssm_state_size
    _z, xbc, dt_raw = (u @ p["in_proj.weight"].t()).split([d_in, mixer.conv_dim, heads], dim=-1)
    _x, B, C = F.silu(_causal_conv(xbc, p)).split([d_in, groups * state, groups * state], dim=-1)
    dt = F.softplus(dt_raw + p["dt_bias"])
    a = -torch.exp(p["A_log"])
    expected = torch.zeros(heads, 12, 12, dtype=torch.float64)
    for h in range(heads):
        g = h // (heads // groups)
        for t in range(12):
            for s in range(t + 1):
                decay = math.prod(math.exp(float(dt[r, h] * a[h])) for r in range(s + 1, t + 1))
                cb = float(C[t, g * state:(g + 1) * state] @ B[s, g * state:(g + 1) * state])
                expected[h, t, s] = cb * decay * float(dt[s, h])
    close(torch.as_tensor(ours.matrix), expected.float())


def test_mamba1_against_the_hidden_attention_formula_by_a_naive_loop(tmp_path):
    """Ali et al.: α[c, t, s] = C_t · ((Π_{r=s+1..t} exp(Δ_r[c] A_c)) ⊙ B_s) Δ_s[c], written from the
    layer's own parameters and its input, float64, one (t, s) at a time, at n = 12; the block means too."""
    ours, mixer, u, p = _read_with_input("mamba", tmp_path, 1)
    d_in, state, rank = mixer.intermediate_size, mixer.ssm_state_size, mixer.time_step_rank
    x = F.silu(_causal_conv((u @ p["in_proj.weight"].t())[:, :d_in], p))
    dt_low, B, C = (x @ p["x_proj.weight"].t()).split([rank, state, state], dim=-1)
    dt = F.softplus(dt_low @ p["dt_proj.weight"].t() + p["dt_proj.bias"])
    a = -torch.exp(p["A_log"])
    expected = torch.zeros(d_in, 12, 12, dtype=torch.float64)
    for t in range(12):
        for s in range(t + 1):
            decay = torch.ones(d_in, state, dtype=torch.float64)
            for r in range(s + 1, t + 1):
                decay = decay * torch.exp(dt[r][:, None] * a)
            expected[:, t, s] = (decay * B[s][None, :]) @ C[t] * dt[s]
    close(torch.as_tensor(ours.matrix), expected.float())
    blocks = ours.aggregated.shape[0]
    assert "mean over each of" in ours.aggregation
    close(torch.as_tensor(ours.aggregated), expected.reshape(blocks, -1, 12, 12).mean(1).float())


def _naive_delta(q, k, beta, g):
    """A[t, s] = q_tᵀ Π_{r=t..s+1} ((I − β_r k_r k_rᵀ) Diag(α_r)) β_s k_s, float64, the product built over r
    (decay, then the removal term: the layers' order, which matters when α is per channel)."""
    heads, n, dk = k.shape
    out = torch.zeros(heads, n, n, dtype=torch.float64)
    for h in range(heads):
        for s in range(n):
            vec = beta[h, s] * k[h, s]  # what source s writes into the state, as a key-side vector
            for t in range(s, n):
                if t > s:
                    vec = torch.exp(g[h, t]) * vec
                    vec = vec - beta[h, t] * k[h, t] * (k[h, t] @ vec)
                out[h, t, s] = q[h, t] @ vec
    return out


@pytest.mark.parametrize("per_channel", [False, True], ids=["gated DeltaNet", "KDA"])
def test_the_chunked_delta_rule_is_the_naive_product(per_channel):
    """The WY form by chunks of 8 over 30 tokens (inside a chunk, across chunks, a short last chunk)
    equals the naive product, removal terms kept."""
    gen = torch.Generator().manual_seed(3)
    heads, n, dk = 2, 30, 6
    q = delta.l2norm(torch.randn(heads, n, dk, generator=gen, dtype=torch.float64)) * dk ** -0.5
    k = delta.l2norm(torch.randn(heads, n, dk, generator=gen, dtype=torch.float64))
    beta = torch.rand(heads, n, generator=gen, dtype=torch.float64) * 0.9 + 0.1
    g = -torch.rand(heads, n, dk if per_channel else 1, generator=gen, dtype=torch.float64) * 0.5
    chunked = delta.delta_matrix(q.float(), k.float(), beta.float(), (g if per_channel else g[..., 0]).float(), chunk=8)
    close(chunked, _naive_delta(q, k, beta, g.expand(heads, n, dk)).float())


def test_the_ssd_matrix_reproduces_the_scan_before_gate_and_norm(tmp_path):
    """y = Σ_s A · x_s + D · x_t is what the layer hands its gated norm (a hook on the norm)."""
    model = load("bamba", save_random("bamba", tmp_path / "b"))
    mixer = model.model.layers[0].mamba
    seen = {}
    handle = mixer.norm.register_forward_hook(lambda _m, args, _o: seen.__setitem__("y", args[0][0].detach()))
    try:
        (la,) = effective_layers(model, torch.randint(3, 300, (1, 40), generator=torch.Generator().manual_seed(4)))
    finally:
        handle.remove()
    close(ssd.scan_output(la), seen["y"])


def test_the_public_entry_reads_a_loaded_hybrid(tmp_path):
    model = mha_viz.load_model(save_random("qwen3_next", tmp_path / "q"), device="cpu")
    run = mha_viz.effective.effective_attention(model, "The cat sat on the mat. The dog sat on the log.")
    assert run.layer_ids == [0] and run.layers[0].kind == "gated_deltanet" and len(run.tokens) == run.layers[0].n
    written = []
    handle = model.hf_model.model.layers[0].linear_attn.register_forward_hook(
        lambda _m, _a, out: written.append(out[0].detach()))
    try:
        with torch.no_grad():
            model.hf_model(input_ids=torch.tensor([run.token_ids]), use_cache=False)
    finally:
        handle.remove()
    close(torch.as_tensor(run.output(0)), written[0])
    with pytest.raises(NotExact, match="those are: 0"):
        mha_viz.effective.effective_attention(model, "The cat sat.", layers=[1])


def test_each_reduced_holds_one_layers_matrices_at_a_time_and_gives_what_the_whole_run_does(tmp_path):
    """`each_reduced` hands each layer to the reducer as it is made: when the reducer sees a layer, no layer handed
    before is alive (the thumbnails and measures of a long text hold one layer's n × n matrices, not every
    layer's); what it returns, and the run's shares, are the whole run's."""
    model = mha_viz.load_model(build("qwen3_next", tmp_path), device="cpu")  # gated DeltaNet in layers 0 and 2
    text = "The cat sat on the mat. The dog sat on the log."
    handed: list = []
    alive_before: list[int] = []

    def reduce(run, la):
        gc.collect()
        alive_before.append(sum(ref() is not None for ref in handed))
        handed.append(weakref.ref(la))
        return effective_figures.layer_thumbnails(la), effective_measures(replace(run, layers=[la]))
    run, rows = mha_viz.effective.each_reduced(model, text, reduce)
    whole = mha_viz.effective.effective_attention(model, text)
    assert len(rows) == len(whole.layers) == 2 and alive_before == [0, 0]
    assert run.layers == [] and run.mixing_shares() == pytest.approx(whole.mixing_shares())
    got = effective_figures.stacked([r[0] for r in rows], run.mixing_shares())
    want = effective_figures.thumbnails(whole)
    assert got.layers == want.layers and got.labels == want.labels
    torch.testing.assert_close(torch.as_tensor(got.pooled), torch.as_tensor(want.pooled), equal_nan=True)
    torch.testing.assert_close(torch.as_tensor(got.largest), torch.as_tensor(want.largest), equal_nan=True)
    measured = pd.concat([r[1] for r in rows], ignore_index=True)
    pd.testing.assert_frame_equal(measured, whole.measures())


def test_a_layer_kind_not_made_exact_is_refused_with_its_reason():
    from transformers import ZambaConfig, ZambaForCausalLM
    config = ZambaConfig(**{**BASE, "num_hidden_layers": 3}, n_mamba_heads=2, mamba_d_state=8,
                         layers_block_type=["mamba", "hybrid", "hybrid"])  # its shared block ties two hybrids
    torch.manual_seed(0)
    model = ZambaForCausalLM(config).eval()
    assert [kind for _n, _name, _m, kind in mixing_layers(model)][:1] == [None]
    with pytest.raises(NotExact, match="Layer 0 .*Zamba's multi-head Mamba-1"):
        effective_layers(model, torch.tensor([[5, 6, 7]]))
