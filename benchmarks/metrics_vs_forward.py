"""Every head metric for 144 heads (a random-init BERT-base) beside the model's own forward pass.

Run: `.venv/bin/python benchmarks/metrics_vs_forward.py [--lengths 128 512] [--repeat 3]`.
Each row is the best of `--repeat` timings, measured in this one process, and the ratio to
the forward pass (capturing attention and head outputs) at the same length. The weight
cosines (QK, OV) do not depend on the text: the app computes them once per model. Last,
attention flow on SmolLM2 (30 layers) at 64 tokens, beside that model's forward pass
(`--no-flow` leaves it out; the first run converts the GGUF once), and the JS matrix of a
trained model's heads (MiniLM, peaked: the exact pass) beside its forward pass. At the end, the
verdicts of issue 15's targets at n = 512: each per-text metric within one forward pass, all of
them within two, flow at 64 tokens within 3 s. With a CUDA device, a GPU column: the JS matrix
of the 144 heads at n = 512 and 2,048 on the GPU beside the CPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import mha_viz  # noqa: E402
import mha_viz_models  # noqa: E402
from mha_viz import metrics  # noqa: E402


def bert_base_folder(root: Path) -> Path:
    """A random-init BERT-base (12 layers × 12 heads, d_model 768) with MiniLM's WordPiece vocab."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    tok = AutoTokenizer.from_pretrained(mha_viz_models.BUNDLED["minilm"].locate())
    torch.manual_seed(0)
    # 2,048 positions so that the GPU column can run at n = 2,048 (nothing changes below 512)
    BertModel(BertConfig(vocab_size=tok.vocab_size, max_position_embeddings=2048)).save_pretrained(root)
    tok.save_pretrained(root)
    return root


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def text_of(model, n: int) -> str:
    """A text of exactly n tokens ([CLS] + n − 2 words + [SEP])."""
    words = ("the cat sat on the mat and the dog looked at it while rain fell on the old "
             "house by the river ").split()
    return " ".join(words[i % len(words)] for i in range(n - 2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--flow", action=argparse.BooleanOptionalAction, default=True,
                        help="time attention flow on smollm2 at 64 tokens")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    verdicts = []
    with tempfile.TemporaryDirectory() as tmp:
        model = mha_viz.load_model(str(bert_base_folder(Path(tmp))), device="cpu")
        weights = model.head_weights()
        print(f"model: random-init BERT-base, {model.num_layers} layers × {model.num_heads} heads")
        for n in args.lengths:
            ratios = length_table(model, weights, n, args.repeat)
            if n == TARGET_LENGTH:
                verdicts += [(f"{name} ≤ 1.0 × the forward pass", f"{r:.2f} ×", r <= 1.0)
                             for name, r in ratios.items() if name in EACH_WITHIN_ONE]
                verdicts.append(("all per-text metrics ≤ 2.0 ×", f"{ratios['all']:.2f} ×", ratios["all"] <= 2.0))
        if torch.cuda.is_available():
            gpu_column(model, args.repeat)
    trained_row(args.repeat)
    if args.flow:
        seconds = flow_row(args.repeat)
        verdicts.append(("flow on smollm2 at 64 tokens ≤ 3 s", f"{seconds:.2f} s", seconds <= 3.0))
    print(f"\n| {'target (issue 15)':48s} | {'measured':>9s} | verdict |")
    print(f"|{'-' * 50}|{'-' * 11}|---------|")
    for name, measured, ok in verdicts:
        print(f"| {name:48s} | {measured:>9s} | {'met' if ok else 'NOT met'} |")


TARGET_LENGTH = 512
EACH_WITHIN_ONE = ("head_table (section 1 + importance)", "similarity js", "similarity cosine",
                   "similarity cka", "similarity residual", "similarity seed_r", "rollout")


def length_table(model, weights, n: int, repeat: int) -> dict[str, float]:
    """Print the table at one length; return each step's ratio to the forward pass (and "all")."""
    run = mha_viz.analyze(model, text_of(model, n))
    assert run.n == n, run.n
    ids = torch.tensor([run.token_ids])
    forward = best_of(lambda: model.capture(ids), repeat)
    steps = {
        "head_table (section 1 + importance)": lambda: metrics.head_table(run, weights),
        **{f"similarity {k}": (lambda k=k: metrics.head_similarity(run, k, weights=weights))
           for k in ("js", "cosine", "cka", "residual", "seed_r")},
        "rollout": lambda: metrics.rollout(run),
    }
    js = metrics.head_similarity(run, "js")
    steps["diversity table"] = lambda: metrics.diversity_table(
        metrics.as_similarity(js, "js"), None, run.num_layers, run.num_heads)
    steps["cluster order"] = lambda: metrics.cluster_order(metrics.as_dissimilarity(js, "js"))
    steps["MDS map"] = lambda: metrics.mds(js)
    weight_steps = {f"similarity {k} (once per model)": (lambda k=k: metrics.head_similarity(run, k, weights=weights))
                    for k in ("qk", "ov")}
    print(f"\nn = {n}: forward pass with capture {forward * 1000:.0f} ms")
    print(f"| {'step':40s} | {'ms':>8s} | {'÷ forward':>9s} |")
    print(f"|{'-' * 42}|{'-' * 10}|{'-' * 11}|")
    total, ratios = 0.0, {}
    for name, fn in steps.items():
        t = best_of(fn, repeat)
        total += t
        ratios[name] = t / forward
        print(f"| {name:40s} | {t * 1000:8.0f} | {t / forward:9.2f} |")
    ratios["all"] = total / forward
    print(f"| {'all per-text metrics':40s} | {total * 1000:8.0f} | {total / forward:9.2f} |")
    for name, fn in weight_steps.items():
        t = best_of(fn, 1)
        print(f"| {name:40s} | {t * 1000:8.0f} | {t / forward:9.2f} |")
    return ratios


def gpu_column(model, repeat: int) -> None:
    """The JS matrix of every head on the GPU beside the CPU, at n = 512 and 2,048."""
    print("\nJS matrix, CPU against GPU:")
    print(f"| {'n':>6s} | {'CPU ms':>8s} | {'GPU ms':>8s} | {'CPU ÷ GPU':>9s} |")
    print(f"|{'-' * 8}|{'-' * 10}|{'-' * 10}|{'-' * 11}|")
    for n in (512, 2048):
        run = mha_viz.analyze(model, text_of(model, n), max_tokens=n)
        cpu = best_of(lambda: metrics.head_similarity(run, "js"), repeat)

        def on_gpu():
            metrics.head_similarity(run, "js", device="cuda")
            torch.cuda.synchronize()

        on_gpu()  # warm-up: kernels and the copy's allocator
        gpu = best_of(on_gpu, repeat)
        print(f"| {run.n:6d} | {cpu * 1000:8.0f} | {gpu * 1000:8.1f} | {cpu / gpu:9.1f} |")


def trained_row(repeat: int) -> None:
    """A trained model's peaked heads take the exact JS pass: MiniLM (72 heads) at n = 512."""
    model = mha_viz.load_model("minilm", device="cpu")
    run = mha_viz.analyze(model, text_of(model, 512), max_tokens=512)
    ids = torch.tensor([run.token_ids])
    forward = best_of(lambda: model.capture(ids), repeat)
    t = best_of(lambda: metrics.head_similarity(run, "js"), repeat)
    print(f"\nminilm (trained), {run.num_layers} × {run.num_heads} heads, n = {run.n}: "
          f"forward pass with capture {forward * 1000:.0f} ms")
    print(f"| {'similarity js (exact pass)':40s} | {t * 1000:8.0f} | {t / forward:9.2f} |")


def flow_row(repeat: int) -> float:
    """Attention flow (one max-flow per pair of tokens) on SmolLM2 at 64 tokens; its seconds."""
    model = mha_viz.load_model("smollm2", device="cpu")
    run = mha_viz.analyze(model, text_of(model, 80), max_tokens=metrics.FLOW_MAX_TOKENS)
    ids = torch.tensor([run.token_ids])
    forward = best_of(lambda: model.capture(ids), repeat)
    t = best_of(lambda: metrics.flow(run), 1)
    print(f"\nsmollm2, {run.num_layers} layers, n = {run.n}: forward pass with capture {forward * 1000:.0f} ms")
    print(f"| {'flow (last layer)':40s} | {t * 1000:8.0f} | {t / forward:9.2f} |")
    return t


if __name__ == "__main__":
    main()
