"""Our effective attention of Mamba and Mamba-2 layers set beside TransformerLens 4.3's (issue 88's peer check; a
comparison, not a test: TransformerLens is not one of our dependencies).

Run: install TransformerLens 4.3 apart (`pip install --target ~/tl-peer --no-deps transformer-lens==4.3.0 beartype
einops fancy-einsum jaxtyping wadler_lindig typeguard datasets dill xxhash multiprocess fsspec`), then
`PYTHONPATH=~/tl-peer .venv/bin/python benchmarks/peer_transformerlens.py`. It saves a random-init Mamba and Mamba-2
(tests/models/effective_families.py) to a temporary folder, computes each layer's matrices with
`mha_viz_models.effective.effective_layers` and with TransformerLens' `ActivationCache.compute_ssm_effective_attention`
on the same weights and text, and prints, for each layer and for TransformerLens' `include_dt_scaling` off (its
default) and on, the largest difference over the largest |A|.

What it needs of TransformerLens: its mixers' `eager_scan` set and `run_with_cache(..., use_cache=False)`; otherwise,
on the CPU path of transformers 5.23, its conv1d (Mamba-2) and dt_proj (Mamba) hooks never fire and it raises. Ours is
computed before TransformerLens boots its bridge: once booted, our reading of another copy of the model found no
Mamba mixer (0 of 2) and twice Mamba-2's (4 of 2), TransformerLens' wrappers being modules of their own.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TEXT = "The keeper lit the lamp and the boats came home one by one."


def compare(name: str, folder: str) -> list[tuple[int, bool, float]]:
    """(layer, include_dt_scaling, largest |ours − theirs| / largest |ours|) of every layer of `name` in `folder`."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mha_viz_models.effective import effective_layers

    tok = AutoTokenizer.from_pretrained(folder)
    ids = torch.tensor([tok(TEXT)["input_ids"]])
    ours = [layer.matrix.astype(np.float64) for layer in
            effective_layers(AutoModelForCausalLM.from_pretrained(folder).eval(), ids)]
    bridge = TransformerBridge.boot_transformers(folder, device="cpu", tokenizer=tok)
    for block in bridge.blocks:
        block.mixer.eager_scan = True
    _, cache = bridge.run_with_cache(ids, use_cache=False)
    found = []
    for number, mine in enumerate(ours):
        for scaled in (False, True):
            theirs = cache.compute_ssm_effective_attention(layer=number, include_dt_scaling=scaled)
            theirs = theirs[0].detach().double().numpy()
            found.append((number, scaled, float(np.abs(theirs - mine).max() / np.abs(mine).max())))
    return found


def main() -> None:
    from tests.models.effective_families import save_random

    with tempfile.TemporaryDirectory() as out:
        for name in ("mamba", "mamba2"):
            for number, scaled, gap in compare(name, save_random(name, Path(out) / name)):
                print(f"{name:7} layer {number}  include_dt_scaling={scaled!s:5}  largest gap / largest |A| {gap:.2e}")


if __name__ == "__main__":
    main()
