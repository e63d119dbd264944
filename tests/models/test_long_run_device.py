"""A long run kept where it was computed (issue 52, part 3: on a GPU the run stays on the device), tested on
CPU tensors through the same path: the spill keeps each layer's queries and keys on their device up to
`device_room`, writes the rest to its file, and a view's rows leave the device through the pinned copier's
staging (`capture.transfer`; here a CPU stand-in with its own buffers). Rows equal those of a spill that
wrote every layer to its file, and of the dense run."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz
from mha_viz.scan import rows as scan_rows
from tests.helpers import ROOT
from tests.staging import CHUNK, CpuStaging

pytestmark = pytest.mark.model
TEXT = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()
N = 300


@pytest.fixture(scope="module")
def model():
    return mha_viz.load_model("smollm2", device="cpu")


@pytest.fixture(scope="module")
def ids(model):
    return mha_viz.tokenize(model, TEXT, N).ids


def _layer_bytes(spill: scan_rows.QKSpill, layer: int) -> int:
    """What one layer's spill holds: its queries, keys, values and input."""
    parts = [spill.part(layer, name, "cpu") for name in ("q", "k", "v", "x")]
    return sum(t.numel() * t.element_size() for t in parts if t is not None)


def _all_rows(source: scan_rows.RowSource, layers) -> dict[int, np.ndarray]:
    return {layer: np.concatenate([b for _, b in source.blocks(layer, None, 0, N)], axis=1) for layer in layers}


def test_what_fits_stays_on_the_device_and_the_rest_goes_to_the_file(model, ids, monkeypatch):
    filed = scan_rows.lean_layers(model, ids)  # the CPU's rule: nothing stays, every layer in the file
    assert scan_rows.device_room(model.device) == 0 and not filed.kept and filed.end > 0
    two = _layer_bytes(filed, 0) + _layer_bytes(filed, 1)
    monkeypatch.setattr(scan_rows, "device_room", lambda _device: two)  # what a GPU with room for 2 layers says
    mixed = scan_rows.lean_layers(model, ids)
    assert sorted(mixed.kept) == [0, 1] and mixed.kept_bytes == two
    assert sorted(mixed.where) == list(range(2, model.num_layers))
    monkeypatch.setattr(scan_rows, "device_room", lambda _device: 2**40)
    kept = scan_rows.lean_layers(model, ids)
    assert sorted(kept.kept) == list(range(model.num_layers)) and kept.end == 0  # the file never written
    for layer in (0, 1, 2, model.num_layers - 1):
        for ours in (mixed, kept):
            for a, b in zip(ours.get(layer, "cpu"), filed.get(layer, "cpu")):
                assert a.dtype == b.dtype and bool(torch_equal(a, b))
    layers = (0, 2, model.num_layers - 1)
    want = _all_rows(scan_rows.RowSource(model, ids, filed), layers)
    for ours in (mixed, kept):
        got = _all_rows(scan_rows.RowSource(model, ids, ours), layers)
        for layer in layers:
            np.testing.assert_array_equal(got[layer], want[layer])


def torch_equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())


def test_a_views_rows_cross_through_the_staging_and_equal_the_dense_runs(model, ids, monkeypatch):
    from mha_viz.capture import transfer

    monkeypatch.setattr(transfer, "CHUNK_BYTES", 4 * CHUNK)  # the stand-in's buffers hold CHUNK floats
    staging = type("Staging", (CpuStaging,), {"sets": []})
    monkeypatch.setattr(scan_rows, "device_room", lambda _device: 2**40)
    source = scan_rows.RowSource(model, ids, scan_rows.lean_layers(model, ids), staging=staging)
    dense = mha_viz.analyze(model, TEXT, max_tokens=N, dense=True)
    blocks = list(source.blocks(3, [1, 4], 40, 120))
    assert staging.sets and all(s.given_back for s in staging.sets)  # every block went through a staging set
    sent = sum(n for s in staging.sets for entry in s.log if entry[0] == "send" for n in [entry[3]])
    assert sent == 2 * 80 * 120  # the rows asked for over the keys they see (causal: up to row 119), no more
    got = np.concatenate([b for _, b in blocks], axis=1)
    np.testing.assert_allclose(got, dense.attentions[3, [1, 4], 40:120], atol=1e-5, rtol=0)
