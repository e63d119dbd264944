"""A scan's spill writes its file on a thread of its own (`spill.WRITER`), while the scan computes the layer: `put`
returns before the bytes are written, a read of the layer waits for them, and a write that fails fails the next wait
for it (`written`, which a scan's forward calls at its end) rather than passing silently."""

from __future__ import annotations

import threading

import pytest
import torch

from mha_viz.scan import spill as spill_module
from mha_viz.scan.spill import QKSpill

H, G, N, D = 4, 2, 16, 8
WAIT = 30  # seconds: a deadline, never a pause


def _parts(seed: int) -> tuple[torch.Tensor, ...]:
    torch.manual_seed(seed)
    return torch.randn(1, H, N, D), torch.randn(1, G, N, D), torch.randn(1, G, N, D), torch.randn(1, N, 3 * D)


def test_put_returns_before_the_write_and_a_read_waits_for_it(monkeypatch):
    started, release = threading.Event(), threading.Event()
    real = QKSpill._write

    def held(self, t):
        started.set()
        assert release.wait(WAIT), "the test never released the write"
        return real(self, t)
    monkeypatch.setattr(QKSpill, "_write", held)
    made = QKSpill(keep_bytes=0)
    q, k, v, x = _parts(0)
    made.put(2, q, k, v, x)  # returns while the writer thread is held inside the write
    assert started.wait(WAIT)
    assert 2 not in made.where and 2 in made.writing
    got: dict[str, torch.Tensor] = {}
    reader = threading.Thread(target=lambda: got.update(q=made.part(2, "q", "cpu"), x=made.part(2, "x", "cpu")))
    reader.start()
    release.set()
    reader.join(WAIT)
    assert not reader.is_alive()
    torch.testing.assert_close(got["q"], q, rtol=0, atol=0)
    torch.testing.assert_close(got["x"], x, rtol=0, atol=0)
    assert not made.writing  # read, so no longer waited for
    got_q, got_k = made.rows(2, "cpu", [3], (5, 9), 9)
    torch.testing.assert_close(got_q, q[:, [3], 5:9], rtol=0, atol=0)
    torch.testing.assert_close(got_k, k[:, [1], :9], rtol=0, atol=0)


def test_layers_put_one_after_another_read_back_as_put():
    made = QKSpill(keep_bytes=0)
    layers = {layer: _parts(layer) for layer in range(2 * spill_module.WRITING + 1)}  # more than may wait at once
    for layer, parts in layers.items():
        made.put(layer, *parts)
    assert len(made.writing) <= spill_module.WRITING + 1
    made.written()
    assert not made.writing
    for layer, parts in layers.items():
        for name, t in zip(spill_module.PARTS, parts):
            torch.testing.assert_close(made.part(layer, name, "cpu"), t, rtol=0, atol=0)


def test_a_write_that_fails_fails_the_wait_for_it(monkeypatch):
    def full(self, t):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(QKSpill, "_write", full)
    made = QKSpill(keep_bytes=0)
    made.put(0, *_parts(0))
    with pytest.raises(OSError, match="No space left"):
        made.written()
