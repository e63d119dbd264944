"""`AttentionRun` built from a plain array (no model): it checks what it is given."""

from __future__ import annotations

import numpy as np
import pytest

from mha_viz import AttentionRun


def test_from_array_builds_and_validates():
    a = np.tril(np.ones((4, 4), dtype=np.float32))
    a /= a.sum(-1, keepdims=True)
    run = AttentionRun.from_array(np.broadcast_to(a, (2, 3, 4, 4)), list("abcd"), is_causal=True)
    assert (run.num_layers, run.num_heads, run.n, run.num_kv_heads) == (2, 3, 4, 3)
    with pytest.raises(ValueError, match="sum to 1"):
        AttentionRun.from_array(np.ones((1, 1, 4, 4)), list("abcd"))
    with pytest.raises(ValueError, match="tokens"):
        AttentionRun.from_array(np.broadcast_to(a, (1, 1, 4, 4)), list("abc"))
    with pytest.raises(ValueError, match="causal"):
        AttentionRun.from_array(np.full((1, 1, 2, 2), 0.5), ["a", "b"], is_causal=True)
    with pytest.raises(ValueError, match="shape"):
        AttentionRun.from_array(np.ones(4), ["a"])
