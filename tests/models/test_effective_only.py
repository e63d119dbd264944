"""Models made of state-space or recurrent layers alone (issue 88): random-init Mamba, Mamba-2, Falcon-Mamba and RWKV
folders load as a
user's model (`mha_viz_models.loading.effective_only`), and a run holds each layer's effective attention as weights:
for every group, |A| with each row divided by its sum, against A computed here by `effective_layers` on the same
weights loaded by transformers alone (not through mha-viz's loader), and A itself rebuilds each layer's output
(tests/models/test_effective_attention.py); RWKV's rows are its recurrence's, written here. xLSTM stays refused with
its reason, and our MHA is refused on a model without softmax layers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz import needs
from mha_viz.budget import memory
from mha_viz_models.effective import effective_layers
from tests.models.effective_families import FAMILIES, save_random

pytestmark = pytest.mark.model
TEXT = "The keeper lit the lamp, and the boats came home one by one before the storm."


@pytest.fixture(scope="module", params=["mamba2", "mamba", "falcon_mamba", "rwkv", "xlstm"])
def folder(request, tmp_path_factory):
    return request.param, save_random(request.param, tmp_path_factory.mktemp(request.param))


def test_a_run_holds_each_groups_absolute_effective_attention_rows_normalised(folder):
    name, path = folder
    model = mha_viz.load_model(path, device="cpu")
    run = mha_viz.analyze(model, TEXT)
    cls, _config = FAMILIES[name]()
    theirs = cls.from_pretrained(path).eval()  # transformers alone
    ids = torch.tensor([model.tokenizer(TEXT)["input_ids"]])
    layers = effective_layers(theirs, ids)
    assert run.attentions.shape == (len(layers), model.num_heads, run.n, run.n) and run.n == ids.shape[1]
    for number, layer in enumerate(layers):
        a = np.abs(layer.matrix if layer.aggregated is None else layer.aggregated).astype(np.float64)
        want = a / a.sum(-1, keepdims=True)
        np.testing.assert_allclose(run.attentions[number], want, rtol=1e-5, atol=1e-6, err_msg=f"layer {number}")
    assert np.allclose(run.attentions.sum(-1), 1, atol=1e-5) and not np.triu(run.attentions, 1).any()
    assert run.head_outputs is None and not model.has_head_outputs and model.effective
    # no positions to run out of, nor a tokenizer's limit: long texts read (RWKV's config says its context_length)
    assert model.max_positions == (256 if name == "rwkv" else 32768)
    config = model.hf_model.config  # Mamba's and RWKV's: one block of channels' matrices at a time, beside the 8 means
    channels = model.num_heads if name in ("mamba2", "xlstm") else (getattr(config, "attention_hidden_size", None) or
                                                         config.intermediate_size) // 8 + 8
    assert needs.analysis(model, run.n).host == memory.analysis_need(model, run.n).host + 16 * channels * run.n ** 2
    assert needs.generation(model, run.n, 8) == needs.analysis(model, run.n)  # Generate: a capture at each step
    facts = model.facts()
    assert "effective attention" in facts["attention implementation"] and "no softmax" in facts["architecture"]
    with pytest.raises(mha_viz.ModelLoadError, match="no softmax attention layer"):
        mha_viz.load_model(path, device="cpu", local_attention=True)


def test_rwkvs_rows_sum_to_1_and_mix_the_values_as_its_recurrence_does(tmp_path):
    """RWKV's time mixing by its recurrence, written here from the layer's own parameters in float64 (numerator and
    denominator carried token by token, the token itself with its bonus u): Σ_s A[c, t, s] v_s[c] is wkv_t[c], and
    every row of A sums to 1 with no weight negative."""
    path = save_random("rwkv", tmp_path / "rwkv")
    cls, _config = FAMILIES["rwkv"]()
    hf = cls.from_pretrained(path).eval()
    ids = torch.randint(3, 300, (1, 40), generator=torch.Generator().manual_seed(2))
    attention = hf.rwkv.blocks[1].attention
    got: dict = {}
    hooks = [getattr(attention, part).register_forward_hook(lambda _m, _i, out, part=part: got.update({part: out}))
             for part in ("key", "value")]
    with torch.no_grad():
        hf(input_ids=ids, use_cache=False)
    for h in hooks:
        h.remove()
    k, v = got["key"][0].double(), got["value"][0].double()  # (n, c)
    w, u = -torch.exp(attention.time_decay.detach().double()), attention.time_first.detach().double()
    num, den, wkv = torch.zeros_like(k[0]), torch.zeros_like(k[0]), []
    for t in range(k.shape[0]):
        here = torch.exp(u + k[t])
        wkv.append((num + here * v[t]) / (den + here))
        num, den = torch.exp(w) * num + torch.exp(k[t]) * v[t], torch.exp(w) * den + torch.exp(k[t])
    layer = effective_layers(hf, ids, layers=[1])[0]
    a = layer.matrix.astype(np.float64)
    np.testing.assert_allclose(a.sum(-1), 1, atol=1e-6)
    assert (a >= 0).all() and not np.triu(a, 1).any()
    np.testing.assert_allclose(layer.mixed()[..., 0], torch.stack(wkv).numpy(), rtol=1e-5, atol=1e-6)


def test_mlstms_matrix_mixes_the_values_as_its_recurrence_does(tmp_path):
    """xLSTM's mLSTM by its recurrence, written here in float64 from the tensors its kernel is handed (queries, keys,
    values, both gates): the memory C_t = f̃_t C_{t−1} + ĩ_t k_t v_tᵀ and normaliser n_t carried token by token with
    the stabiliser m_t, h_t = C_tᵀ q̃_t / (max(|n_t · q̃_t|, e^{−m_t}) + ε). Σ_s A[h, t, s] v_s is h_t over 70 tokens
    (a chunk of the kernel's 64 and 6 by its step kernel), and the normaliser's floor e^{−m_t}, planted by gates that
    forget everything at once, is A's too."""
    path = save_random("xlstm", tmp_path / "xlstm")
    cls, _config = FAMILIES["xlstm"]()
    hf = cls.from_pretrained(path).eval()
    backend = hf.backbone.blocks[1].mlstm_layer.mlstm_backend
    ids = torch.randint(3, 300, (1, 70), generator=torch.Generator().manual_seed(3))
    for forget in (None, -40.0):  # the model's own gates; a forget gate shut (every earlier token dropped)
        got: dict = {}

        def before(_m, args, kwargs, forget=forget):
            if forget is not None:
                kwargs = {**kwargs, "fgate": torch.full_like(kwargs["fgate"], forget)}
            got.update({x: kwargs[x][0].double() for x in ("query", "key", "value", "igate", "fgate")})
            return args, kwargs

        hook = backend.register_forward_pre_hook(before, with_kwargs=True)
        try:
            layer = effective_layers(hf, ids, layers=[1])[0]
        finally:
            hook.remove()
        q, k, v, i, f = (got[x] for x in ("query", "key", "value", "igate", "fgate"))
        heads, n, d = q.shape
        h = torch.zeros(heads, n, v.shape[-1], dtype=torch.float64)
        floored = 0
        for head in range(heads):
            c, norm, m = torch.zeros(d, v.shape[-1], dtype=torch.float64), torch.zeros(d, dtype=torch.float64), 0.0
            for t in range(n):
                log_f = float(torch.nn.functional.logsigmoid(f[head, t]))
                m_new = max(log_f + m, float(i[head, t]))
                f_t, i_t = math.exp(log_f + m - m_new), math.exp(float(i[head, t]) - m_new)
                c = f_t * c + i_t * torch.outer(k[head, t], v[head, t])
                norm = f_t * norm + i_t * k[head, t]
                q_t = q[head, t] * d ** -0.5
                below = abs(float(norm @ q_t)) < math.exp(-m_new)
                floored += below
                h[head, t] = (q_t @ c) / (max(abs(float(norm @ q_t)), math.exp(-m_new)) + 1e-6)
                m = m_new
        assert forget is None or floored > 0  # the floor planted is reached
        np.testing.assert_allclose(layer.mixed(), h.transpose(0, 1).numpy(), rtol=1e-5,
                                   atol=1e-5 * float(h.abs().max()))
        assert not np.triu(layer.matrix, 1).any()


@pytest.mark.parametrize("name", ["mamba2", "xlstm"])
def test_a_long_run_of_mamba2_holds_what_its_dense_run_does(name, tmp_path, monkeypatch):
    """A long run of a model of Mamba-2 (or xLSTM) layers alone (every layer read by rows): the scan's head table, and
    every row,
    layer, column and pooled head a view asks for, made again a block of rows at a time (blocks of 16 rows here), equal
    the dense run's of the same 150 tokens; a long run is what analyze makes past MHA_VIZ_DENSE_MB, and is admitted
    with the layers' taps and a block of rows a thread, not every layer's matrices. Mamba-1's layers, made whole, have
    no long run: refused with the reason."""
    from mha_viz.metrics import head_table
    from mha_viz_models.effective import layer as effective_layer
    from tests.models.long_pairs import TEXT as LONG_TEXT
    from tests.models.long_pairs import assert_same_rows, assert_same_table

    monkeypatch.setattr(effective_layer, "MIN_ROWS", 16)
    monkeypatch.setattr(effective_layer, "ROW_CELLS", 1)
    model = mha_viz.load_model(save_random(name, tmp_path / name), device="cpu")
    dense = mha_viz.analyze(model, LONG_TEXT, max_tokens=150, dense=True)
    long = mha_viz.analyze(model, LONG_TEXT, max_tokens=150, dense=False)
    assert dense.is_dense and not long.is_dense and long.tokens == dense.tokens and long.n == 150
    assert_same_rows(long, dense)
    assert_same_table(long.summary.table, head_table(dense, None))
    assert not needs.is_long(model, 150)
    monkeypatch.setenv("MHA_VIZ_DENSE_MB", "0")
    assert needs.is_long(model, 150) and not mha_viz.analyze(model, LONG_TEXT, max_tokens=150).is_dense
    need = needs.analysis(model, 150).host
    assert need < memory.analysis_need(model, 150).host  # no layer's matrices held whole
    mamba = mha_viz.load_model(save_random("mamba", tmp_path / "mamba"), device="cpu")
    assert not needs.is_long(mamba, 150) and mha_viz.analyze(mamba, LONG_TEXT, max_tokens=150).is_dense
    with pytest.raises(mha_viz.InputError, match="no long run"):
        mha_viz.analyze(mamba, LONG_TEXT, max_tokens=150, dense=False)


@pytest.mark.parametrize("name", ["mamba2", "xlstm", "mamba"])
def test_generate_records_each_new_tokens_row_as_the_whole_sequences_run_holds_it(name, tmp_path, monkeypatch):
    """Generate on a model of effective layers alone runs the whole sequence at each step (no cache) and keeps its
    last row: for Mamba-2 and xLSTM made from the block of rows that holds it alone, for Mamba from the layer whole. The
    greedy tokens are those transformers' model picks step by step, and every row recorded, the prompt's
    and each new token's, is the row a run of the whole final sequence holds (its layers are causal). Blocks of 4
    rows here."""
    from mha_viz_models.effective import layer as effective_layer

    monkeypatch.setattr(effective_layer, "MIN_ROWS", 4)  # blocks of 4 rows: the last row's is not the first's
    monkeypatch.setattr(effective_layer, "ROW_CELLS", 1)
    path = save_random(name, tmp_path / name)
    model = mha_viz.load_model(path, device="cpu")
    gen = mha_viz.generate(model, TEXT, max_new_tokens=6, stop_at_eos=False)
    prompt = torch.tensor([gen.run.token_ids[:gen.num_prompt_tokens]])
    cls, _config = FAMILIES[name]()
    theirs, greedy = cls.from_pretrained(path).eval(), prompt[0].tolist()
    with torch.no_grad():  # greedy, the whole sequence each step (xLSTM's generate fails on its own cache's shapes)
        for _step in range(6):
            greedy.append(int(theirs(input_ids=torch.tensor([greedy]), use_cache=False).logits[0, -1].argmax()))
    assert gen.run.token_ids == greedy and len(greedy) == gen.num_prompt_tokens + 6
    final = model.capture(torch.tensor([gen.run.token_ids])).attentions  # the whole final sequence's run
    assert len(final) == gen.run.num_layers
    for layer, a in enumerate(final):
        np.testing.assert_allclose(gen.run.attentions[layer], a[0].numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=f"layer {layer}")
