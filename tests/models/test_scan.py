"""`mha_viz.scan` against the dense computation, on texts where that fits: the head table against
`metrics.head_table` of `analyze`'s run; each row's kept keys, the rest and exact rows against the
probabilities recomputed whole from the same layer inputs (and `analyze`'s, within the rounding of
its eager forward). A block's scores are a matrix product of another shape than the whole matrix's,
which sums in another order: probabilities agree within 1e-6 and 2e-6 of their size (EXACT). Blocks
are made small here, so that a text spans many blocks and a sliding window's or a chunk's key span
leaves keys out of the blocks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import mha_viz
from mha_viz.metrics import head_table
from mha_viz.metrics.head_stats import classify
from mha_viz.metrics.measures import METRICS
from mha_viz.scan import eager as scan_eager
from mha_viz.scan import rows as scan_rows
from tests.helpers import class_inputs, save_peaked
from tests.models import architectures_2026
from tests.tolerance import assert_same_above, assert_same_class

TEXT = ("The keys to the old wooden cabinet are missing again, said Mary. John looked in the hall. "
        "The keys to the old wooden cabinet were in the hall, said John. ") * 3


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    """Blocks of a few rows: 7 rows of 4 heads over 256 keys."""
    monkeypatch.setattr(scan_rows, "CPU_BLOCK_BYTES", 4 * 4 * 256 * 7)


def _gemma3(out) -> str:
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    config = Gemma3TextConfig(vocab_size=400, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                              sliding_window=8, layer_types=["sliding_attention", "full_attention"],
                              final_logit_softcapping=None, attn_logit_softcapping=None)
    return save_peaked(Gemma3ForCausalLM, config, out, sharpened=architectures_2026.SHARPENED, scale=4.0, norm=4.0)


@pytest.fixture(scope="module")
def family(request, tmp_path_factory):
    name = request.param
    if name in ("minilm", "smollm2", "toy-induction"):
        return mha_viz.load_model(name, device="cpu")
    if name == "bert":  # a random-init BERT with MiniLM's vocabulary: 2 layers of 4 heads
        return mha_viz.load_model(str(request.getfixturevalue("bert_dir")), device="cpu")
    out = tmp_path_factory.mktemp(name)
    folder = _gemma3(out) if name == "gemma3" else architectures_2026.build(name, out)
    return mha_viz.load_model(folder, device="cpu")


def _text(model) -> str:
    if model.model_type == "toy-induction":  # letters, space-separated, twice (its context: 64 tokens)
        from mha_viz_models.toy.model import LETTERS
        half = list(np.random.default_rng(0).choice(list(LETTERS), 30))
        return " ".join(half + half)
    return TEXT


MODELS = ["minilm", "smollm2", "toy-induction", "gemma3", "gpt_oss", "llama4"]
EXACT = dict(atol=1e-6, rtol=2e-6)


def _compare_tables(scan_table: pd.DataFrame, dense: pd.DataFrame, run) -> None:
    """Every column within 1e-5 (of its size, unbounded), the pattern classes up to the heads whose
    statistics in `run` (the dense computation) lie within 1e-5 of a rule's threshold."""
    assert list(scan_table.columns) == [c for c in dense.columns if c in scan_table.columns]
    for column in scan_table.columns:
        if column == "pattern":  # what classify reads is bounded (masses, a normalised entropy): 1e-5
            assert_same_class(dense[column], scan_table[column], class_inputs(run), classify, 1e-5, "scan")
            continue
        ours, ref = scan_table[column].to_numpy(float), dense[column].to_numpy(float)
        bounded = column in METRICS and METRICS[column].bounded
        # unbounded measures (entropy in nats, distance in tokens): 1e-5 of their size
        np.testing.assert_allclose(ours, ref, atol=1e-5, rtol=0 if bounded else 1e-5, err_msg=column)


def _check_kept(keys: np.ndarray, weights: np.ndarray, dense: np.ndarray, min_weight: float,
                atol: float = EXACT["atol"], rtol: float = EXACT["rtol"]) -> None:
    """A scan's kept keys and weights (H, n, k) of each row: its k heaviest keys of weight ≥ `min_weight`,
    heaviest first, against the dense probabilities (H, n, n) of the same rows, which the scan's computation
    rounds apart by up to `atol` + `rtol` of a weight (EXACT). The scan's weight at a key is the dense one
    within that; at each rank its key's dense weight is the dense k-th heaviest's, within twice that (two
    weights, each moved: a near tie may list its keys in either order); a rank is kept where the dense
    weight there is ≥ `min_weight`, up to the weights within the rounding of it."""
    k = keys.shape[-1]
    heaviest = -np.sort(-dense, axis=-1)[..., :k]  # each rank's dense weight
    kept = keys >= 0
    assert_same_above(kept, heaviest >= min_weight, heaviest, min_weight, atol + rtol * min_weight, "kept keys")
    picked = np.take_along_axis(dense, np.maximum(keys, 0), -1)  # the dense weight at each kept key
    np.testing.assert_allclose(weights[kept], picked[kept], atol=atol, rtol=rtol)
    assert (weights[~kept] == 0).all()
    band = 2 * (atol + rtol * heaviest[kept])
    far = np.abs(picked[kept] - heaviest[kept]) > band
    assert not far.any(), f"kept keys out of rank order: {picked[kept][far]} against {heaviest[kept][far]}"


def _whole(model, scan, layer: int) -> np.ndarray:
    """Every head's whole probabilities (H, n, n) of one layer, computed at once by our MHA's own attention from
    the queries and keys the scan's forward made (its spill): where the model takes given outputs, the scan's
    forward is its own (each layer's output from the scan's blocks), and its layer inputs lie within float
    rounding, not bit for bit, of a fused forward's."""
    if not model.can_recompute:
        lean = model.capture(torch.tensor([scan.token_ids]), lean=True, head_outputs=False)
        return model.recompute(lean, layer)[0].float().numpy()
    q, k = scan.row_source.spill.get(layer, "cpu")
    mha, group = model.layer_adapter(layer).mha, model.num_heads // model.num_kv_heads
    kv = [h // group for h in range(model.num_heads)]
    with torch.inference_mode():
        _, probs = mha.attend(q, k[:, kv], k[:, kv], key_padding_mask=None, is_causal=model.is_causal,
                              heads=list(range(model.num_heads)))
    return probs[0].float().numpy()


@pytest.mark.model
@pytest.mark.parametrize("family", MODELS, indirect=True)
def test_scan_equals_the_dense_computation(family):
    model, text = family, _text(family)
    scan = mha_viz.scan(model, text, top_k=5, min_weight=0.01, thumb=16)
    run = mha_viz.analyze(model, text)
    assert scan.n == run.n > 50 and scan.tokens == run.tokens
    # with the weights, the dense table has the output measures; a scan whose forward took its own outputs has them too
    _compare_tables(scan.table, head_table(run, model.head_weights() if model.has_head_outputs else None), run)
    assert ({"output_norm", "mean_output_norm"} <= set(scan.table.columns)) == model.takes_outputs
    for layer in range(model.num_layers):
        dense = _whole(model, scan, layer)  # (H, n, n), from the scan's own queries and keys
        np.testing.assert_allclose(dense, run.attentions[layer], atol=1e-5)  # and the model's own eager forward
        _check_kept(scan.keys[layer], scan.weights[layer], dense, 0.01)
        keys = scan.keys[layer]
        picked = np.where(keys >= 0, np.take_along_axis(dense, np.maximum(keys, 0), -1), 0)  # dense, at its keys
        for head in range(model.num_heads):
            np.testing.assert_allclose(scan.rest(layer, head), dense[head].sum(-1) - picked[head].sum(-1),
                                       **EXACT)
        head = layer % model.num_heads
        np.testing.assert_allclose(scan.rows(layer, head, 3, 40), dense[head, 3:40], **EXACT)
    from mha_viz.views.detail import max_pool
    np.testing.assert_allclose(scan.pooled, max_pool(run.attentions, 16), atol=1e-5)


@pytest.mark.model
@pytest.mark.parametrize("family", ["smollm2", "gpt_oss"], indirect=True)
def test_the_forward_reads_the_modules_own_queries_and_keys(family, monkeypatch):
    """Where the model takes given outputs, each layer's blocks are made from the queries, keys and values its module
    computed (`reading.given`'s maker): no projection of ours runs (the test above checks them against the eager
    forward). A module whose scale is not our MHA's gets ours instead, every layer."""
    from mha_viz_models import LoadedModel
    model, text = family, _text(family)
    assert model.takes_outputs
    called: list[int] = []
    real = LoadedModel.projections
    monkeypatch.setattr(LoadedModel, "projections", lambda self, capture, layer: (called.append(layer),
                                                                                    real(self, capture, layer))[1])
    first = mha_viz.scan(model, text, top_k=5, min_weight=0.01, thumb=16)
    assert called == []
    mha = model.layer_adapter(1).mha
    monkeypatch.setattr(mha, "scale", mha.scale * 1.5)
    mha_viz.scan(model, text, top_k=5, min_weight=0.01, thumb=16)
    assert called == [1]
    assert first.n > 50


def _same_scans(a, b, run, atol: float = 1e-6) -> None:
    _compare_tables(b.table, a.table, run)  # both within 1e-5 of the dense run's
    np.testing.assert_allclose(b.weights, a.weights, atol=atol)
    np.testing.assert_allclose(b.rest_mass, a.rest_mass, atol=atol)
    np.testing.assert_allclose(b.pooled, a.pooled, atol=0 if atol <= 1e-6 else atol)
    assert ((a.keys == b.keys) | (np.abs(a.weights - b.weights) <= atol)).all()  # the same keys, up to ties


@pytest.mark.model
@pytest.mark.parametrize("family", ["smollm2", "gpt_oss", "gemma3", "minilm"], indirect=True)
def test_the_tensor_path_equals_the_compiled_one(family):
    """The GPU's way (tensor operations on the device) on the CPU, against the CPU's compiled pass."""
    text = _text(family)
    a = mha_viz.scan(family, text, compiled=True, top_k=4, thumb=12)
    b = mha_viz.scan(family, text, compiled=False, top_k=4, thumb=12)
    _same_scans(a, b, mha_viz.analyze(family, text))


@pytest.mark.model
@pytest.mark.usefixtures("triton_kernels")
@pytest.mark.parametrize("family", ["gpt_oss", "gemma3", "llama4", "bert"], indirect=True)
def test_the_kernel_equals_the_compiled_pass(family):
    """The attention kernel (`metrics.row_triton`, issue 87; on a GPU, else under Triton's interpreter) scans each layer
    in one pass, its output taken by the model: the same table, kept keys, rest and thumbnails as the CPU's compiled
    pass over the blocks (sinks, a sliding window with soft-capping, chunks, an encoder). The interpreter takes
    ~0.1 ms an operation (a tile of 64 rows and keys costs ~25 ms): the encoder is a random-init BERT of 8 heads
    (MiniLM's 72 took 39 s of the suite for the same branch), and a text of more than two tiles (gemma3's tokenizer
    makes 364 tokens of TEXT) is cut to a third (122 tokens, two tiles, still 15 of its sliding windows); tiles over
    several blocks are tests/models/test_row_triton.py's."""
    text = _text(family)
    if family.num_layers * family.num_heads >= 50 or mha_viz.tokenize(family, text, 10**6).n > 2 * 64:
        text = TEXT[:len(TEXT) // 3]
    a = mha_viz.scan(family, text, compiled=True, top_k=4, thumb=12)
    # where there is a GPU, the kernel compiled for it, on the same folder loaded there
    on = (mha_viz.load_model(family.hf_model.config.name_or_path, device="cuda") if torch.cuda.is_available()
          else family)
    b = mha_viz.scan(on, text, kernel=True, top_k=4, thumb=12)
    # exp(s − LSE) against the blocks' softmax: float32 rounding of scores up to ~15 in the exponent
    _same_scans(a, b, mha_viz.analyze(family, text), atol=5e-6)


@pytest.mark.model
@pytest.mark.parametrize("family", ["gpt_oss"], indirect=True)
def test_a_kernel_the_scan_chose_that_fails_leaves_the_layers_to_the_blocks(family, monkeypatch):
    """On a GPU the scan takes the kernel unasked: should it fail there (a GPU it cannot compile for), the scan goes
    on by blocks from that layer and gives what the blocks give; asked for (kernel=True), the failure is the
    caller's."""
    from mha_viz.scan import run as scan_run

    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("no kernel for this GPU")
    monkeypatch.setattr(scan_run, "kernel_by_default", lambda model: True)
    monkeypatch.setattr(scan_run, "kernel_layer", failing)
    monkeypatch.setattr(scan_run, "kernel_runs", lambda model, device: True)  # a GPU machine's CPU model too
    text = _text(family)
    b = mha_viz.scan(family, text, top_k=4, thumb=12)
    assert calls == [1]  # tried once, then the blocks
    a = mha_viz.scan(family, text, compiled=True, top_k=4, thumb=12)
    _same_scans(a, b, mha_viz.analyze(family, text))
    with pytest.raises(RuntimeError, match="no kernel"):
        mha_viz.scan(family, text, kernel=True, top_k=4, thumb=12)


@pytest.mark.model
@pytest.mark.parametrize("family", ["gpt_oss"], indirect=True)
def test_sinks_rest_is_the_rows_own_sum_minus_the_kept(family):
    scan = mha_viz.scan(family, TEXT)
    keys, weights = scan.top(0, 1)
    share = scan.sink_share(0, 1)
    assert share.max() > 0.01  # the sink took a visible part of the rows
    np.testing.assert_allclose(weights.sum(-1) + scan.rest(0, 1) + share, 1.0, atol=1e-5)
    full = scan.rows(0, 1, 0, scan.n)
    np.testing.assert_allclose(full.sum(-1) - weights.sum(-1), scan.rest(0, 1), atol=1e-6)


@pytest.mark.model
def test_the_npz_round_trip(smollm2, tmp_path):
    scan = mha_viz.scan(smollm2, TEXT, top_k=3)
    path = scan.save(tmp_path / "scan.npz")
    again = mha_viz.Scan.load(path)
    pd.testing.assert_frame_equal(again.table, scan.table)
    for name in ("pooled", "keys", "weights", "rest_mass"):
        np.testing.assert_array_equal(getattr(again, name), getattr(scan, name))
    assert (again.tokens, again.token_ids, again.layer_ids, again.top_k) == (
        scan.tokens, scan.token_ids, scan.layer_ids, scan.top_k)
    with pytest.raises(ValueError, match="attach"):
        again.rows(0, 0, 0, 4)
    np.testing.assert_array_equal(again.attach(smollm2).rows(5, 2, 10, 20), scan.rows(5, 2, 10, 20))
    with np.load(path, allow_pickle=False) as data:  # nothing in it needs pickle
        assert all(data[k].dtype != object for k in data.files)
    with pytest.raises(ValueError, match="not a saved scan"):
        np.savez(tmp_path / "other.npz", x=np.zeros(2))
        mha_viz.Scan.load(tmp_path / "other.npz")


@pytest.mark.model
def test_a_long_text_never_holds_a_head_matrix(tmp_path, monkeypatch):
    """8,192 tokens on a small random-init Llama with a long context: every block the scan computes
    stays within the block budget (no head's n × n), and the process grows far less than one layer's
    dense probabilities (4 heads × 8,192² float32 = 1 GiB)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    monkeypatch.setattr(scan_rows, "CPU_BLOCK_BYTES", 8 * 2**20)
    n = 8192
    config = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, max_position_embeddings=n)
    folder = save_peaked(LlamaForCausalLM, config, tmp_path / "llama", sharpened=(), scale=1.0, norm=1.0)
    model = mha_viz.load_model(folder, device="cpu")
    text = " ".join(["one two three four five six seven eight nine ten"] * 1200)
    largest = []
    original = type(model.layer_adapter(0).mha).row_probabilities

    def watched(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        largest.append(out.numel())
        return out
    monkeypatch.setattr(type(model.layer_adapter(0).mha), "row_probabilities", watched)
    before = _reset_peak()
    scan = mha_viz.scan(model, text, max_tokens=n)
    assert scan.n == n and scan.keys.shape == (2, 4, n, 8)
    assert max(largest) * 4 <= 8 * 2**20 and len(largest) > 100
    assert _status("VmHWM") - before < 400 * 2**20  # the peak since the reset, in bytes


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))


def _reset_peak() -> int:
    """Reset the process's peak resident size to its resident size now (Linux: clear_refs 5), and return it."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status("VmRSS")


@pytest.mark.model
@pytest.mark.parametrize("family", ["deberta", "deepseek_v3", "lfm2", "qwen3_next"], indirect=True)
def test_a_family_our_mha_cannot_compute_is_read_one_layer_at_a_time(family):
    assert not family.can_recompute
    scan = mha_viz.scan(family, TEXT, thumb=16)
    run = mha_viz.analyze(family, TEXT)
    _compare_tables(scan.table, head_table(run), run)
    np.testing.assert_allclose(scan.rows(1, 2, 0, 9), run.attentions[1, 2, :9], atol=1e-6)


@pytest.mark.model
@pytest.mark.parametrize("family", ["deberta"], indirect=True)
def test_a_layer_over_the_budget_is_refused_with_the_length_that_fits(family, monkeypatch):
    from mha_viz.budget import capture_budget
    monkeypatch.setattr(capture_budget, "capture_budget", lambda: 4 * 4 * 40 * 40)  # one layer of 40 tokens
    with pytest.raises(mha_viz.InputError, match="scan at most 40 tokens") as err:
        mha_viz.scan(family, TEXT)
    assert "one layer at a time" in str(err.value)
    assert mha_viz.scan(family, TEXT, max_tokens=40).n == 40


@pytest.mark.model
def test_an_encoder_decoder_scans_its_encoder(t5_dir):
    model = mha_viz.load_model(str(t5_dir), device="cpu")
    scan = mha_viz.scan(model, TEXT)
    toks = mha_viz.tokenize(model, TEXT, whole_text=True)
    kept = []
    scan_eager.eager_layers(model, toks.ids, lambda layer, p: kept.append(p.numpy()))
    assert len(kept) == model.num_layers and scan.n == toks.n
    np.testing.assert_allclose(scan.rows(1, 0, 0, scan.n), kept[1][0], atol=1e-6)
    assert np.isfinite(scan.table["entropy"]).all()


@pytest.mark.model
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (the tensor path on the CPU is "
                    "test_the_tensor_path_equals_the_compiled_one)")
def test_on_a_gpu_the_scan_equals_the_cpus(tmp_path):
    cpu = mha_viz.load_model("smollm2", device="cpu")
    gpu = mha_viz.load_model("smollm2", device="cuda")
    a, b = mha_viz.scan(cpu, TEXT), mha_viz.scan(gpu, TEXT)
    run = mha_viz.analyze(cpu, TEXT)
    _compare_tables(b.table, a.table, run)
    for layer in range(cpu.num_layers):  # the GPU's kept keys against the CPU's dense rows, within 1e-5
        _check_kept(b.keys[layer], b.weights[layer], run.attentions[layer], b.min_weight, atol=1e-5, rtol=0.0)
    np.testing.assert_allclose(b.rows(3, 1, 0, 20), a.rows(3, 1, 0, 20), atol=1e-5)
