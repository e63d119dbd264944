"""The CUDA path, run where a GPU is (CI has none: every test here is skipped there with the
reason). Host copies through pinned buffers equal PyTorch's own copy bit for bit; a capture on the
GPU equals the CPU's; a model spread over the GPU and the CPU by `max_memory` captures, generates
and attributes as the model loaded whole; bfloat16 on the GPU within 2e-2 of float32."""

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.capture import transfer
from mha_viz.interventions import attribution
from tests.helpers import next_token_probs
from tests.tolerance import assert_same_argmax, assert_same_tokens

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none here)")
TEXT = "the quick brown fox jumps over the lazy dog, and the quick brown fox jumps again"


@pytest.mark.parametrize("stack_bytes", [transfer.STACK_BYTES, 0], ids=["stacked", "one-by-one"])
@pytest.mark.parametrize("shape", [(3, 5), (2, 1000, 4099), (4, 4, 700, 700)])
def test_host_copier_equals_pytorchs_copy(shape, stack_bytes, monkeypatch):
    monkeypatch.setattr(transfer, "STACK_BYTES", stack_bytes)
    g = torch.Generator(device="cuda").manual_seed(0)
    tensors = [torch.randn(shape[1:], device="cuda", generator=g) for _ in range(shape[0])]
    half = [t.to(torch.bfloat16) for t in tensors]
    out = transfer.to_host(tensors)
    for i, t in enumerate(tensors):
        assert np.array_equal(out[i], t.cpu().numpy())
    assert np.array_equal(transfer.to_host(half)[-1], half[-1].float().cpu().numpy())


def test_host_copier_chunks_across_buffers(monkeypatch):
    monkeypatch.setattr(transfer, "CHUNK_BYTES", 4 * 1000)  # many chunks per tensor, and a partial last one
    x = torch.arange(3 * 12345, dtype=torch.float32, device="cuda").view(3, 12345)
    dest = np.zeros((3, 12345), np.float32)
    with transfer.HostCopier(dest) as copier:
        for i in range(3):
            copier.put(i, x[i] * 2)  # a temporary the caller drops at once
    assert np.array_equal(dest, (x * 2).cpu().numpy())


@pytest.mark.parametrize("local", [False, True], ids=["hf", "ours"])
def test_capture_on_the_gpu_equals_the_cpu(llama_dir, local):
    cpu = mha_viz.load_model(llama_dir, device="cpu", local_attention=local)
    gpu = mha_viz.load_model(llama_dir, device="cuda", local_attention=local)
    a = mha_viz.analyze(cpu, TEXT)
    for lean in (None, False, True):
        b = mha_viz.analyze(gpu, TEXT, lean=lean)
        np.testing.assert_allclose(b.attentions, a.attentions, atol=1e-5)
        np.testing.assert_allclose(b.head_outputs, a.head_outputs, atol=1e-4)
        np.testing.assert_allclose(b.value_norms, a.value_norms, rtol=1e-4, atol=1e-5)


def test_bfloat16_on_the_gpu_within_fidelity(llama_dir):
    full = mha_viz.analyze(mha_viz.load_model(llama_dir, device="cuda"), TEXT)
    half = mha_viz.analyze(mha_viz.load_model(llama_dir, device="cuda", dtype="bfloat16"), TEXT)
    assert half.precision == "bfloat16" and np.abs(half.attentions.sum(-1) - 1).max() < 1e-5
    assert np.abs(half.attentions - full.attentions).max() < 2e-2


def test_a_model_spread_over_the_gpu_and_the_cpu(llama_dir):
    whole = mha_viz.load_model(llama_dir, device="cpu")
    per_layer = sum(p.numel() * 4 for p in whole.hf_model.model.layers[0].parameters())
    embed = whole.hf_model.get_input_embeddings().weight.numel() * 4
    spread = mha_viz.load_model(llama_dir, max_memory={0: embed + int(1.5 * per_layer), "cpu": "2GiB"})
    assert spread.placement[0] == "cuda:0" and "cpu" in spread.placement, spread.placement
    assert spread.device.type == "cuda"
    a, b = mha_viz.analyze(whole, TEXT), mha_viz.analyze(spread, TEXT)
    np.testing.assert_allclose(b.attentions, a.attentions, atol=1e-5)
    np.testing.assert_allclose(b.head_outputs, a.head_outputs, atol=1e-4)
    g1 = mha_viz.generate(whole, "the quick", max_new_tokens=4, stop_at_eos=False)
    g2 = mha_viz.generate(spread, "the quick", max_new_tokens=4, stop_at_eos=False)
    # probabilities within 1e-5 on the GPU and the CPU, as the attention's: two tokens may trade the first
    # place within twice that (there the two texts part, and what follows is not compared)
    near = 2e-5
    assert_same_tokens([s.token_id for s in g1.steps], [s.token_id for s in g2.steps],
                       next_token_probs(whole, g1.run.token_ids[:g1.num_prompt_tokens]), near, "spread")
    d1 = attribution.direct_logit(whole, TEXT)
    assert_same_argmax(attribution.direct_logit(spread, TEXT).target,  # the spread model's own prediction
                       next_token_probs(whole, mha_viz.tokenize(whole, TEXT).ids)([]), near, "target")
    d2 = attribution.direct_logit(spread, TEXT, target=d1.target)
    np.testing.assert_allclose(d2.per_head, d1.per_head, rtol=1e-3, atol=1e-4)


def test_an_error_in_the_copying_thread_reaches_the_caller(monkeypatch):
    """The copying thread fails while the caller is still sending: `put` does not hang, and
    `finish` raises the thread's error."""
    monkeypatch.setattr(transfer, "CHUNK_BYTES", 4 * 1000)

    def broken(self, *_a):
        raise RuntimeError("the host copy failed")
    monkeypatch.setattr(transfer.HostCopier, "_land", broken)
    dest = np.zeros((6, 5000), np.float32)
    with pytest.raises(RuntimeError, match="the host copy failed"):
        with transfer.HostCopier(dest) as copier:  # as `analyze` uses it: the thread is always ended
            for i in range(6):
                copier.put(i, torch.ones(5000, device="cuda"))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_long_run_on_the_gpu_equals_the_cpus_dense_one(llama_dir, dtype):
    """A long run on the GPU (one scan, each layer's input kept there, rows recomputed on demand) against
    the dense capture of the same model on the CPU: every head's rows, one column, the whole head and the
    head table's measures; float32 within 1e-5, bfloat16 within its fidelity bound (2e-2)."""
    dense = mha_viz.analyze(mha_viz.load_model(llama_dir, device="cpu", dtype=dtype), TEXT, dense=True)
    long = mha_viz.analyze(mha_viz.load_model(llama_dir, device="cuda", dtype=dtype), TEXT, dense=False)
    assert not long.is_dense and long.n == dense.n
    atol = 1e-5 if dtype == "float32" else 2e-2
    L, H, n = dense.attentions.shape[:3]
    for layer in range(L):
        np.testing.assert_allclose(long.layer_rows(layer, 0, n), dense.attentions[layer], atol=atol)
    np.testing.assert_allclose(long.column(L - 1, H - 1, 2), dense.attentions[L - 1, H - 1, :, 2], atol=atol)
    np.testing.assert_allclose(long.head(0, 1), dense.attentions[0, 1], atol=atol)
    table, ref = long.summary.table, mha_viz.metrics.head_table(dense)
    for column in ("entropy", "distance", "prev", "sink"):  # distance in tokens: relative to its size
        np.testing.assert_allclose(table[column].to_numpy(float), ref[column].to_numpy(float),
                                   rtol=max(atol, 1e-4), atol=atol, err_msg=column)
