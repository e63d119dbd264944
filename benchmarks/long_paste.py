"""A long paste costs only the tokens the cap reads (issue 28), side by side in one run.

Run: `.venv/bin/python benchmarks/long_paste.py` (about a minute on 2 cores). On minilm (CPU),
`mha_viz.analyze` at max_tokens=512 on a text of about 512 tokens, then on 1 MB texts: varied
English prose, the same prose with few spaces, and one 1 MB word (which has no word boundary to
stop at, so it is read whole, as before). Also `mha_viz.text.tokenize` alone, and the whole-text
tokenization every analysis did before (the count, then the truncation when over the cap). Times are
the best of a few runs in this one process.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report import print_verdicts  # noqa: E402 - benchmarks/report.py, beside this script

import mha_viz  # noqa: E402

CAP = 512
MB = 1_000_000
TARGET = 1.3  # a 1 MB paste costs at most 1.3 × a 512-token text's analysis
PARAGRAPHS = [
    "The lighthouse keeper climbed the narrow stairs every evening, lit the lamp and watched the "
    "fishing boats come home across the grey water. Some nights the fog rolled in so thick that "
    "he could not see the rocks below, and he rang the bell until his arms ached.",
    "In the spring the orchard behind the school filled with blossom. Children ran between the "
    "rows of trees, counting bees, while their teacher explained how pollen travels from one "
    "flower to the next and why a cold week in April can ruin a whole harvest.",
    "She opened the old map on the kitchen table and traced the river with her finger: past the "
    "mill, under the stone bridge, around the hill where the Romans had built a fort, and out to "
    "the estuary where the herons waited for the tide.",
    "Attention lets each word in a sentence look back at the others. A head that always looks at "
    "the previous token, another that finds the verb's subject, a third that stares at the full "
    "stop: together they build what the next layer reads.",
    "The market opened at dawn. Farmers unloaded crates of apples, cabbages and eggs; a baker set "
    "out loaves still warm from the oven; and by nine o'clock the square was so crowded that the "
    "bus had to wait at the corner for the traffic to clear.",
]


def prose(chars: int, seed: int = 0) -> str:
    """Varied English prose: the paragraphs in a shuffled order, again and again, to `chars`."""
    rng, out, size = random.Random(seed), [], 0
    while size < chars:
        block = PARAGRAPHS[:]
        rng.shuffle(block)
        out.extend(block)
        size += sum(len(p) + 2 for p in block)
    return "\n\n".join(out)[:chars]


def few_spaces(text: str) -> str:
    """The same words with a space only after every 40th word."""
    words = text.split()
    return "".join(w + (" " if i % 40 == 39 else "") for i, w in enumerate(words))


def about_tokens(model, n: int) -> str:
    """The longest prefix of the prose with at most `n` tokens (special tokens included)."""
    text = prose(20 * n)
    ids = model.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    return text[:ids[n - 3][1]]


def seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def best_in_rounds(fns: dict, rounds: int) -> dict:
    """The best time of each function, run in turn round after round (so that the load of this
    shared machine weighs on every one alike), after one warm-up each."""
    for fn in fns.values():
        fn()
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(seconds(fn))
    return {name: min(t) for name, t in times.items()}


def main() -> None:
    model = mha_viz.load_model("minilm", device="cpu")
    tok = model.tokenizer
    texts = {
        "512-token text": about_tokens(model, CAP),
        "1 MB prose": prose(MB),
        "1 MB prose, few spaces": few_spaces(prose(int(MB * 1.3)))[:MB],
        "1 MB, one word": "x" * MB,
    }

    def before(text):  # what tokenize did until issue 28: the whole text, twice when over the cap
        if len(tok(text, add_special_tokens=True)["input_ids"]) > CAP:
            tok(text, add_special_tokens=True, truncation=True, max_length=CAP)

    print(f"minilm on {os.cpu_count()} cores, max_tokens={CAP}, best of 7 in turn (seconds)\n")
    print(f"| {'text':24s} | {'chars':>9s} | {'tokens kept':>11s} | {'total':>16s} | {'tokenize':>8s} | "
          f"{'before':>8s} | {'analyze':>8s} | {'÷ 512-token':>11s} |")
    print(f"|{'-' * 26}|{'-' * 11}:|{'-' * 13}:|{'-' * 18}:|{'-' * 10}:|{'-' * 10}:|{'-' * 10}:|{'-' * 13}:|")
    t_tok = best_in_rounds({n: (lambda t=t: mha_viz.tokenize(model, t, CAP)) for n, t in texts.items()}, 5)
    t_before = best_in_rounds({n: (lambda t=t: before(t)) for n, t in texts.items()}, 2)
    t_run = best_in_rounds({n: (lambda t=t: mha_viz.analyze(model, t, max_tokens=CAP)) for n, t in texts.items()}, 7)
    base = t_run["512-token text"]
    ratios = {name: t / base for name, t in t_run.items()}
    for name, text in texts.items():
        toks = mha_viz.tokenize(model, text, CAP)
        total = ("about " if toks.total_is_estimate else "") + f"{toks.total:,}"
        print(f"| {name:24s} | {len(text):9,d} | {toks.n:11d} | {total:>16s} | {t_tok[name]:8.3f} | "
              f"{t_before[name]:8.3f} | {t_run[name]:8.3f} | {ratios[name]:11.2f} |")
    print_verdicts([
        (f"1 MB prose ≤ {TARGET} × the 512-token text's analysis", f"{ratios['1 MB prose']:.2f} ×",
         ratios["1 MB prose"] <= TARGET),
        (f"1 MB prose with few spaces ≤ {TARGET} ×", f"{ratios['1 MB prose, few spaces']:.2f} ×",
         ratios["1 MB prose, few spaces"] <= TARGET),
    ], where="the 1 MB single word is read whole, as before: not a target")


if __name__ == "__main__":
    main()
