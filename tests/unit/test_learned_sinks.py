"""GPT-OSS's learned sinks take a share of each head's row: the share is kept through half
precision's widening (`as_probabilities`) and measured per head (`sinks.learned_sink_share`)."""

from __future__ import annotations

import numpy as np
import torch

from mha_viz import AttentionRun
from mha_viz.capture import sinks
from mha_viz_models import as_probabilities


def _run(attentions: np.ndarray) -> AttentionRun:
    L, H, n, _ = attentions.shape
    return AttentionRun(tokens=[f"t{i}" for i in range(n)], attentions=attentions.astype(np.float32),
                        is_causal=False, num_kv_heads=H, model_name="planted")


def test_the_share_each_head_gave_no_token():
    rng = np.random.default_rng(0)
    a = rng.random((2, 3, 5, 5))
    a /= a.sum(-1, keepdims=True)
    assert sinks.learned_sink_share(_run(a)) is None  # every row sums to 1
    a[1, 2] *= np.linspace(0.5, 0.9, 5)[:, None]  # layer 1, head 2: rows keep 0.5 … 0.9
    share = sinks.learned_sink_share(_run(a))
    assert share.shape == (2, 3) and share[1, 2] == np.float32(1 - 0.7)
    share[1, 2] = 0
    np.testing.assert_allclose(share, 0, atol=1e-6)


def test_half_precision_keeps_a_sinks_share_and_renormalises_rounding():
    probs = torch.tensor([[0.25, 0.25, 0.5], [0.2, 0.2, 0.2]], dtype=torch.bfloat16)  # the second: a sink's 0.4
    rows = as_probabilities(probs).sum(-1)
    torch.testing.assert_close(rows, torch.tensor([1.0, 0.6]), atol=2e-3, rtol=0)
    rounded = torch.softmax(torch.randn(4, 7), -1).to(torch.bfloat16)  # sums off 1 by rounding only
    torch.testing.assert_close(as_probabilities(rounded).sum(-1), torch.ones(4), atol=1e-6, rtol=0)
