"""A long run of a model of Mamba-2 (or xLSTM) layers alone (issue 88) beside its own forward pass, on the CPU.

Run: `.venv/bin/python benchmarks/effective_long.py [--family mamba2|xlstm] [--tokens 8192] [--layers 2] [--repeat 1]`.
A random-init Mamba-2 of Mamba-2 130M's layer shape (d_model 768, 24 heads of 64, state 128, one group, chunks of
256), or an xLSTM at d_model 768 (4 mLSTM heads), saved with a byte-level tokenizer and loaded as a user's folder.
Timed in this one process (best of `--repeat`): the model's forward alone on the tokens, and `mha_viz.analyze(...,
dense=False)`: one forward with the hooks, then every layer's |A| rows made a block at a time and reduced to the
head table, the kept keys and the thumbnails (the long run every page reads). Prints both, their ratio (the issue's
target: ≤ 3 ×), and what the admission is told of a long run (`needs.scan`) beside what every layer's matrices would
hold.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from metrics_vs_forward import best_of  # noqa: E402 - beside this script

import mha_viz  # noqa: E402
from mha_viz import needs  # noqa: E402
from tests.helpers import ROOT, byte_bpe_tokenizer  # noqa: E402


def saved(folder: Path, family: str, layers: int) -> str:
    from transformers import Mamba2Config, Mamba2ForCausalLM, xLSTMConfig, xLSTMForCausalLM
    tok = byte_bpe_tokenizer()
    torch.manual_seed(0)
    ids = dict(vocab_size=len(tok), pad_token_id=0, bos_token_id=1, eos_token_id=2)
    if family == "xlstm":
        model = xLSTMForCausalLM(xLSTMConfig(hidden_size=768, num_blocks=layers, num_heads=4, **ids))
    else:
        model = Mamba2ForCausalLM(Mamba2Config(hidden_size=768, num_hidden_layers=layers, num_heads=24, head_dim=64,
                                               expand=2, n_groups=1, state_size=128, chunk_size=256, **ids))
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("mamba2", "xlstm"), default="mamba2")
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    sample = (ROOT / "mha_viz" / "corpus" / "sample.txt").read_text()
    with tempfile.TemporaryDirectory() as out:
        model = mha_viz.load_model(saved(Path(out) / args.family, args.family, args.layers), device="cpu")
        text = sample
        while len(model.tokenizer(text)["input_ids"]) < args.tokens:
            text += " " + sample
        toks = mha_viz.tokenize(model, text, args.tokens)
        ids = torch.tensor([list(toks.ids)])
        shape = "xLSTM, {} blocks of 4 mLSTM heads" if args.family == "xlstm" else "Mamba-2, {} layers of 24 heads × 64"
        print(f"{shape.format(args.layers)}, d_model 768, {toks.n:,} tokens, {torch.get_num_threads()} threads")

        def forward():
            with torch.no_grad():
                model.hf_model(input_ids=ids, use_cache=False)
        forward()  # warm
        alone = best_of(forward, args.repeat)
        run = []
        long = best_of(lambda: run.append(mha_viz.analyze(model, text, max_tokens=toks.n, dense=False)), args.repeat)
        assert not run[-1].is_dense and run[-1].n == toks.n
        print(f"the forward alone        {alone:8.2f} s")
        print(f"the long run             {long:8.2f} s   {long / alone:.2f} × the forward (target ≤ 3 ×)")
        need = needs.scan(model, toks.n).host
        whole = 4 * args.layers * model.num_heads * toks.n ** 2
        print(f"admitted with            {need / 2**20:8.0f} MiB   (every layer's matrices: {whole / 2**30:.1f} GiB)")


if __name__ == "__main__":
    main()
