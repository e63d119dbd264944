"""The 2026 frontier families (issue 89), as random-init configs saved to a folder and loaded as a user's model:
DeepSeek-V3.2 and GLM-5, whose `indexed_attention` layers keep each query's top keys by an indexer (Hugging Face's
eager forward returns those rows: a softmax over the selection, every other key 0); Gemma 4, whose config holds
per-layer attributes (transformers refuses a global read of them: the loader read `config.head_dim` and raised its
error raw), read with every head's attention where its layers' heads differ in size; and Gemma 3n, whose later layers
reuse an earlier layer's keys and values. Every heterogeneous config that transformers ships is read by the refusal
without raising."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.interventions import ablation, attribution
from mha_viz.metrics import head_table
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.families.architectures import head_sizes_differ, refusal
from tests.helpers import save_peaked
from tests.models import architectures_2026 as arch

pytestmark = pytest.mark.model

TEXT = "The cat sat on the mat and the dog ran to the park, then the cat sat on the mat again."
EXCEPTION_TEXT = ("Traceback", "Error", "Exception", "has no attribute", "NoneType")


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa"])
def test_sparse_attention_loads_and_its_rows_are_the_indexers_selection(family, tmp_path):
    """Loaded (it was refused: "indexed_attention … no attention probabilities"), every layer's capture equal to the
    model's own eager forward run here, each row a softmax over at most SPARSE_TOP_K keys (the indexer's), summing to
    1, and the head table made from them."""
    model = mha_viz.load_model(arch.build(family, tmp_path), device="cpu")
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    n = ids.shape[1]
    assert n > 2 * arch.SPARSE_TOP_K
    captured = model.capture(ids).attentions
    with torch.inference_mode():
        own = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False).attentions
    assert len(captured) == len(own) == model.num_layers
    for mine, theirs in zip(captured, own):
        torch.testing.assert_close(mine.float(), theirs.float(), atol=1e-5, rtol=0)
        kept = (theirs[0] > 0).sum(-1)  # (H, n): keys each row holds
        assert (kept <= arch.SPARSE_TOP_K).all() and (kept[:, -1] == arch.SPARSE_TOP_K).all()
        np.testing.assert_allclose(theirs[0].sum(-1).numpy(), 1.0, atol=1e-5)
    table = head_table(mha_viz.analyze(model, TEXT))
    assert len(table) == model.num_layers * model.num_heads
    assert np.isfinite(table["entropy"].to_numpy(float)).all()


@pytest.mark.parametrize("family", ["deepseek_v32", "glm_moe_dsa"])
def test_the_indexers_picks_against_the_dense_softmax(family, tmp_path):
    """`sparse_selection`: each indexed layer's picks and, per head and row, the dense softmax's mass on them and
    their overlap with its heaviest as many. The first layer against the same weights loaded again with the indexer
    keeping every key (its eager probabilities are the dense ones, computed apart; a later layer's input differs
    there), measured here by hand, and the model's sparse rows are the dense ones on the picks divided by that mass.
    Every layer: nothing outside the picks, a row that picked every key it sees keeps all, and each layer leaves some
    dense mass out (a layer whose dense call kept the picks would not). GLM-5's shared layers reuse the picks of the
    layer before."""
    import json
    import shutil

    from mha_viz.metrics import sparse_selection

    path = arch.build(family, tmp_path / "sparse")
    dense_path = tmp_path / "dense"
    shutil.copytree(path, dense_path)
    config = json.loads((dense_path / "config.json").read_text())
    config["index_topk"] = 10_000
    (dense_path / "config.json").write_text(json.dumps(config))
    model = mha_viz.load_model(path, device="cpu")
    got = sparse_selection(model, TEXT)
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    n = ids.shape[1]
    sparse = [a[0].double().numpy() for a in model.capture(ids).attentions]
    dense = mha_viz.load_model(str(dense_path), device="cpu").capture(ids).attentions[0][0].double().numpy()
    assert got.layers == tuple(range(model.num_layers))
    picked = got.picked[0]
    kept = (dense * picked).sum(-1)  # (H, n)
    np.testing.assert_allclose(got.row_kept[0], kept, atol=1e-5)
    np.testing.assert_allclose(sparse[0], dense * picked / kept[..., None], atol=1e-5)
    for h in range(model.num_heads):
        for i in range(n):
            k = int(picked[i].sum())
            heaviest = set(np.argsort(-dense[h, i], kind="stable")[:k])
            by_hand = len(heaviest & set(np.flatnonzero(picked[i]))) / k
            assert abs(got.overlap[0, h, i] - by_hand) <= 1 / k + 1e-9  # ties may count one more in
    whole = got.picked.sum(-1) == np.arange(1, n + 1)  # (S, n): rows that picked every key they see
    for s, layer in enumerate(got.layers):
        assert not (sparse[layer][:, ~got.picked[s]] > 0).any()  # nothing outside the picks
        np.testing.assert_allclose(got.row_kept[s][:, whole[s]], 1.0, atol=1e-5)
        assert (got.row_kept[s] < 1 - 1e-3).any() and (got.row_kept[s] > 0).all()
    if family == "glm_moe_dsa":  # layers 1 and 3 are "shared"
        assert (got.picked[1] == got.picked[0]).all() and (got.picked[3] == got.picked[2]).all()
        assert not (got.picked[2] == got.picked[0]).all()


def _gemma4(out, global_head_dim: int):
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig
    config = Gemma4TextConfig(**arch.common(
        sliding_window=arch.WINDOW, layer_types=["sliding_attention"] * 3 + ["full_attention"],
        per_layer_config={"03": {"head_dim": global_head_dim}}, vocab_size_per_layer_input=400,
        hidden_size_per_layer_input=8))
    return save_peaked(Gemma4ForCausalLM, config, out, sharpened=arch.SHARPENED, scale=2.0, norm=2.0)


def _captures_as_hugging_face(model, *, layers: int) -> None:
    """Every layer's capture of TEXT equals the model's own eager forward within 1e-5."""
    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    captured = model.capture(ids).attentions
    with torch.inference_mode():
        own = model.hf_model(input_ids=ids, output_attentions=True, use_cache=False).attentions
    assert len(captured) == len(own) == model.num_layers == layers
    for mine, theirs in zip(captured, own):
        torch.testing.assert_close(mine.float(), theirs.float(), atol=1e-5, rtol=0)


def test_gemma4_with_larger_global_heads_shows_every_heads_attention(tmp_path):
    """Its global layer's heads of 32 against the sliding layers' 16 (it raised transformers'
    AmbiguousGlobalPerLayerAttributeError from the loader, then was refused): loaded, every layer's capture equal to
    the model's own eager forward, the head table made from it and a long run's equal to it. Each head's output z and
    W_O are read, stacked at the largest size with zeros after a smaller head's: every layer's heads' z @ W_O sum to
    what its o_proj wrote (read here by a hook on Hugging Face's module), and the output measures are made. Our MHA in
    place is refused, naming the sizes."""
    folder = _gemma4(tmp_path, 32)
    model = mha_viz.load_model(folder, device="cpu")
    assert model.has_head_outputs and model.reads_values
    _captures_as_hugging_face(model, layers=4)
    run = mha_viz.analyze(model, TEXT)
    z, w_o = run.head_outputs, model.head_weights()["W_O"].numpy()
    assert z.shape[-1] == w_o.shape[2] == 32 and not z[:3, ..., 16:].any() and z[3, ..., 16:].any()
    written = []
    hooks = [m.o_proj.register_forward_hook(lambda _m, _i, out: written.append(out[0].float().numpy()))
             for m, _ in model.attention_modules]
    try:
        with torch.inference_mode():
            model.hf_model(input_ids=torch.tensor([run.token_ids]), use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    for layer in range(4):
        np.testing.assert_allclose(np.einsum("hnd,hdm->nm", z[layer], w_o[layer]), written[layer], atol=1e-4)
    table = head_table(run, model.head_weights())
    assert np.isfinite(table["output_norm"].to_numpy(float)).all()
    dla = attribution.direct_logit(model, TEXT)  # the heads' parts and the rest (from the residual) make the logit
    assert float(dla.per_head.sum() + dla.rest) == pytest.approx(float(dla.logit), rel=1e-4, abs=1e-5)
    assert np.isfinite(ablation.ablation_effects(model, TEXT, mean_ablation=True)).all()  # μ at each layer's size
    long = mha_viz.scan(model, TEXT)
    np.testing.assert_allclose(long.table["entropy"].to_numpy(float), table["entropy"].to_numpy(float), atol=1e-4)
    with pytest.raises(ModelLoadError) as refused:
        mha_viz.load_model(folder, device="cpu", local_attention=True)
    message = str(refused.value)
    assert "head_dim 16, 32" in message and "Hugging Face's attention" in message
    assert not [t for t in EXCEPTION_TEXT if t in message], message


def test_gemma4_whose_global_layer_shares_fewer_key_value_heads(tmp_path):
    """Its global layer's 4 query heads share 1 key/value head, the sliding layers' 2 (the 26B's global layers share
    2 of the sliding layers' 8): loaded, the capture equal to the model's own, each layer's heads' outputs and
    values read (the global layer's one key/value head's), and each layer's head named with its own
    KV head (the global count labelled every layer before); Model facts says both counts."""
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    from mha_viz.drawing import heads as head_figures
    config = Gemma4TextConfig(**arch.common(
        sliding_window=arch.WINDOW, layer_types=["sliding_attention"] * 3 + ["full_attention"],
        per_layer_config={"03": {"head_dim": 32, "num_key_value_heads": 1}}, vocab_size_per_layer_input=400,
        hidden_size_per_layer_input=8))
    model = mha_viz.load_model(save_peaked(Gemma4ForCausalLM, config, tmp_path, sharpened=arch.SHARPENED, scale=2.0,
                                           norm=2.0), device="cpu")
    assert model.has_head_outputs and model.reads_values
    _captures_as_hugging_face(model, layers=4)
    run = mha_viz.analyze(model, TEXT)
    assert [run.kv_heads(layer) for layer in range(4)] == [2, 2, 2, 1]
    assert head_figures.head_heatmap(run, 0, 3).layout.title.text.startswith("Layer 0, head 3, KV head 1")
    assert head_figures.head_heatmap(run, 3, 3).layout.title.text.startswith("Layer 3, head 3, KV head 0")
    assert [model.value_path(layer).heads for layer in range(4)] == [2, 2, 2, 1]  # each layer's own values
    assert np.isfinite(run.value_norms).all()
    assert model.facts()["key/value heads per layer"] == "2 in layers 0, 1, 2; 1 in layers 3 (grouped-query)"
    run.save(tmp_path / "run.npz")
    assert mha_viz.AttentionRun.load(tmp_path / "run.npz").layer_kv_heads == {0: 2, 1: 2, 2: 2, 3: 1}
    long = mha_viz.analyze(model, TEXT, dense=False)  # a long run: its scan's rows
    assert not long.is_dense and [long.kv_heads(layer) for layer in range(4)] == [2, 2, 2, 1]


def test_gemma4_with_one_head_size_loads_and_equals_hugging_face(tmp_path):
    model = mha_viz.load_model(_gemma4(tmp_path, 16), device="cpu")
    _captures_as_hugging_face(model, layers=4)


def _heterogeneous_configs():
    """Every config of the installed transformers whose defaults are heterogeneous (per-layer attributes), or whose
    text config is."""
    from transformers import CONFIG_MAPPING

    found = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in CONFIG_MAPPING.keys():
            try:
                config = CONFIG_MAPPING[name]()
            except Exception:  # noqa: BLE001 - a config that needs arguments: none of its defaults to read
                continue
            for part in (config, getattr(config, "text_config", None)):
                if getattr(part, "is_heterogeneous", False):
                    found.append((name, part))
    return found


def test_no_heterogeneous_config_raises_through_the_refusal():
    """transformers 5.23 ships several (Gemma 4 and its variants, Step 3.5, Dots3…): the refusal reads each
    without raising, and refuses exactly those whose attention differs in shape between layers, naming it."""
    found = _heterogeneous_configs()
    assert any(part.model_type == "gemma4_text" for _, part in found)
    for name, part in found:
        why = refusal(part, name)
        if why is not None:
            assert "differ in shape" in why or "no attention" in why or "without the layers" in why, why
            assert not [t for t in EXCEPTION_TEXT if t in why], why
        if part.model_type == "gemma4_text":  # its default: heads of 256 in sliding layers, 512 in global ones
            assert why is None and head_sizes_differ(part) == "head_dim 256, 512"


def test_gemma3n_reads_its_shared_layers_through_the_layer_that_stores_their_keys_and_values(tmp_path):
    """Gemma 3n's layers 2 and 3 make no keys or values (no k_proj, v_proj) and reuse layer 0's (sliding) and layer
    1's (full): loaded with every per-head feature (it had no attention module of a known family, so none), the
    capture equal to the model's own eager forward, each shared layer's values read at the v_norm of the layer that
    stores them, the contributions lens and the head table's output measures made, a long run through its own
    attention; our MHA in place refused with the two reasons."""
    folder = arch.build("gemma3n", tmp_path)
    model = mha_viz.load_model(folder, device="cpu")
    assert model.has_head_outputs and model.reads_values and not model.can_recompute
    assert "v_norm" in model.stand_in and "KV sharing" in model.stand_in
    _captures_as_hugging_face(model, layers=4)
    modules = [m for m, _ in model.attention_modules]
    assert [m.is_kv_shared_layer for m in modules] == [False, False, True, True]
    for layer, stores in ((0, 0), (1, 1), (2, 0), (3, 1)):
        assert model.value_path(layer).module is modules[stores].v_norm
    run = mha_viz.analyze(model, TEXT, lean=False)
    assert run.value_norms is not None and np.isfinite(np.asarray(run.value_norms)).all()
    table = head_table(run, model.head_weights())
    assert table["output_norm"].notna().all()
    long = mha_viz.scan(model, TEXT)
    np.testing.assert_allclose(long.table["entropy"].to_numpy(float), table["entropy"].to_numpy(float), atol=1e-4)
    with pytest.raises(ModelLoadError, match="v_norm"):
        mha_viz.load_model(folder, device="cpu", local_attention=True)

