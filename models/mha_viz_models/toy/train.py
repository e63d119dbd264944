"""Train toy-induction: `.venv/bin/python -m mha_viz_models.toy.train` (CPU, one thread, 1–2 min).

A 2-layer attention-only transformer (models/mha_viz_models/toy/model.py, our MultiHeadAttention; d_model 128, 4
heads of d_k 32) learns next-letter prediction on [BOS] f1..fm x1..xk x1..xk: k distinct random
letters repeated, after m filler letters not among them (k and m drawn afresh for every batch).
Only the repeat is predictable, and only by finding the earlier copy of the current letter and
reading the letter after it: a previous-token head (layer 0) writes "my previous letter" into
each position and an induction head (layer 1) matches the current letter against it. The loss
counts the predictable letters only.

Two choices make one layer-0 head a clean previous-token head at every position: the filler,
which moves the block across all positions (with the block always at the start, later positions
never need their previous letter: the induction head can use the first copy), after a first
third of training without it (the heads form faster on the simple task); and d_k = 32, since
with learned positions a head's rank-d_k QK map must send each position to the one before it
(with d_k = 16 one head covered only about 20 positions).

Deterministic: fixed seeds for the weights and the data, one thread. Writes
models/mha_viz_models/toy/toy_induction/{config.json, model.safetensors}, then prints the loss, the time, and the
previous-token and induction scores of each head on fresh sequences (the detector scores of
mha_viz.metrics, computed here: models/ does not import mha_viz).
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from mha_viz_models.toy.model import FOLDER, LETTERS, SPECIALS, ToyConfig, ToyInductionModel, save

FIRST_LETTER = len(SPECIALS)  # id of "a"
BOS_ID = 0


def batch(gen: torch.Generator, size: int, max_len: int, filler: float) -> tuple[torch.Tensor, int]:
    """(size, n) ids and r, where the repeat starts: [BOS], m filler letters (iid, none of them
    in the block; m > 0 in a fraction `filler` of the batches), then a block of k distinct letters
    twice, one k and m for the batch. From position r = m + k + 1 on, each letter has an earlier
    copy and the letter after it is predictable."""
    k = int(torch.randint(2, len(LETTERS) + 1, (1,), generator=gen))
    room = max_len - 1 - 2 * k if k < len(LETTERS) else 0
    m = int(torch.randint(0, room + 1, (1,), generator=gen)) if torch.rand((), generator=gen) < filler else 0
    perm = torch.rand(size, len(LETTERS), generator=gen).argsort(-1) + FIRST_LETTER  # (size, 26)
    block = perm[:, :k]  # (size, k)
    pick = torch.randint(0, max(len(LETTERS) - k, 1), (size, m), generator=gen)
    letters = perm[:, k:].gather(1, pick) if m else perm[:, :0]  # (size, m)
    return torch.cat([torch.full((size, 1), BOS_ID), letters, block, block], 1), m + k + 1


def repeated(gen: torch.Generator, size: int, k: int) -> torch.Tensor:
    """(size, 2k + 1): [BOS] then k distinct random letters twice (the test sequences)."""
    block = torch.rand(size, len(LETTERS), generator=gen).argsort(-1)[:, :k] + FIRST_LETTER
    return torch.cat([torch.full((size, 1), BOS_ID), block, block], 1)


def scores(model: ToyInductionModel, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Detector scores (L, H), averaged over the batch: previous-token Σ_i A[i, i-1] / n and
    induction Σ A[i, j+1] over earlier copies j of token i, / n (rows sum to 1)."""
    with torch.no_grad():
        probs = torch.stack(model(ids, output_attentions=True).attentions)  # (L, B, H, n, n)
    n = ids.shape[1]
    prev = torch.diagonal(probs, -1, dim1=-2, dim2=-1).sum(-1) / n  # (L, B, H)
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)
    dup = (ids[:, :, None] == ids[:, None, :]) & earlier  # (B, n, n)
    target = torch.zeros_like(dup)
    target[:, :, 1:] = dup[:, :, :-1]
    induction = (probs * target[None, :, None]).sum((-1, -2)) / n  # (L, B, H)
    return prev.mean(1), induction.mean(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=FOLDER, help="folder to write (default: %(default)s)")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # tiny matrices: a second thread costs more than it gives
    torch.use_deterministic_algorithms(True)
    config = ToyConfig(hidden_size=args.d_model, num_attention_heads=args.heads)
    model = ToyInductionModel(config)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    warmup = 100

    def schedule(s: int) -> float:  # linear warm-up, cosine decay
        return min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, args.steps) / args.steps))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    gen = torch.Generator().manual_seed(args.seed + 1)
    model.train()
    for layer in model.layers:  # our MHA's fused path (no probabilities kept): faster to train
        layer.attn.need_weights = False
    losses: list[float] = []
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        # curriculum: the block at the start for the first third, then moved in 2 batches of 3
        filler = 0.0 if step <= args.steps // 3 else 2 / 3
        ids, r = batch(gen, args.batch, config.max_position_embeddings, filler)
        logits = model(ids).logits[:, r:-1]  # (B, n - r - 1, vocab): predict token t + 1 of the repeat
        loss = F.cross_entropy(logits.reshape(-1, config.vocab_size), ids[:, r + 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 250 == 0 or step == 1:
            recent = sum(losses[-250:]) / len(losses[-250:])
            print(f"step {step:5d}  loss {recent:.4f} (mean of the last 250)  "
                  f"{time.perf_counter() - start:6.1f} s", flush=True)
    elapsed = time.perf_counter() - start
    final = sum(losses[-250:]) / len(losses[-250:])
    model.eval()
    for layer in model.layers:
        layer.attn.need_weights = True

    path = save(model, args.out, extra={"training": {
        "script": "models/mha_viz_models/toy/train.py", "steps": args.steps, "batch": args.batch,
        "lr": args.lr, "seed": args.seed, "optimizer": "AdamW, 100 warm-up steps, cosine decay",
        "task": "[BOS] + m filler letters + k distinct random letters twice (k in 2..26); "
                "next-token loss on the repeat",
        "final_loss": round(final, 5), "seconds": round(elapsed, 1),
    }})
    print(f"trained in {elapsed:.1f} s; loss {final:.5f} (mean of the last 250 steps); wrote {path} "
          f"({path.stat().st_size / 1024:.0f} KiB)")

    # fresh sequences (another seed than training's), exactly two copies, several lengths
    test = torch.Generator().manual_seed(12345)
    print("on fresh [BOS] + k distinct letters twice (32 sequences each); "
          "ceilings: previous-token (2k)/(2k+1), induction k/(2k+1)")
    for k in (4, 6, 8, 10, 13, 20):
        ids = repeated(test, 32, k)
        prev, ind = scores(model, ids)
        with torch.no_grad():
            acc = (model(ids).logits[:, k + 1:-1].argmax(-1) == ids[:, k + 2:]).float().mean()
        n = 2 * k + 1
        print(f"k={k:2d}  layer 0 prev_token_score {[round(float(v), 3) for v in prev[0]]} "
              f"(ceiling {(n - 1) / n:.3f})  layer 1 induction_score {[round(float(v), 3) for v in ind[1]]} "
              f"(ceiling {k / n:.3f})  accuracy on the repeat {acc:.3f}")


if __name__ == "__main__":
    main()
