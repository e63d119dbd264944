"""The standard tasks as prompt sets, each from a documented template and a seed (the same seed, the same set):

- `ioi`: indirect object identification (Wang et al. 2022). Clean: "When Mary and John went to the store, John
  gave a drink to" (the subject named twice, in either order); corrupted: the second mention replaced by a third
  name ("…, Alice gave a drink to"); answer: the indirect object (" Mary"), wrong: the subject (" John").
- `greater_than` (Hanna et al. 2023): clean "The war lasted from the year 17YY to the year 17", corrupted with
  the year 1701 (the paper's "01" corruption); answer the year's next two digits YY + 1, wrong YY − 1: a pair's
  stand-in for the paper's probability of every later year against every earlier one. A tokenizer that writes
  digits one a token (Llama's, SmolLM2's, Qwen's: `digits_a_token`) cannot answer two digits at once: with
  `digits=1` the answer is the next decade's digit (1732 → "4", a later year whatever the last digit) and the wrong
  one the decade before ("2"), YY drawn from 10 … 89.
- `induction`: k random words, then the same words again up to a point; the answer is the word that came next
  the first time, the wrong one a word of the vocabulary not in the prompt; corrupted: the repeat replaced by
  other random words, so that no earlier occurrence says what comes next.
- `docstring` (Heimersheim and Janiak 2023): a Python function of four parameters whose docstring documents the
  first two, then opens ":param" for the third; the answer is the third parameter's name, the wrong one the
  fourth's; corrupted: the signature's names replaced by four others (their "random def"), so that nothing in the
  prompt says which name comes next.

Words and names are common English ones that are single tokens in GPT-2's and Llama's vocabularies, with their
leading space; a model whose tokenizer splits one leaves that pair out (`prompt_set.check` counts them).
"""

from __future__ import annotations

import numpy as np

from mha_viz.tasks.prompt_set import Pair, PromptSet

NAMES = ("Mary", "John", "Alice", "Bob", "Tom", "Anna", "James", "Sarah", "David", "Emma", "Paul", "Kate", "Mark",
         "Lisa", "Peter", "Laura", "Mike", "Jane", "Chris", "Amy")
PLACES = ("store", "park", "school", "house", "garden", "hospital", "station", "office", "restaurant", "beach")
OBJECTS = ("drink", "book", "ball", "letter", "gift", "key", "bag", "card", "ring", "cake")
IOI_TEMPLATES = (
    "When {io} and {s} went to the {place}, {s2} gave a {thing} to",
    "When {s} and {io} went to the {place}, {s2} gave a {thing} to",
    "After {io} and {s} went to the {place}, {s2} handed a {thing} to",
    "Then, {s} and {io} had a long day at the {place}. {s2} gave a {thing} to",
)
WORDS = ("apple", "river", "chair", "green", "money", "house", "water", "light", "music", "paper", "stone", "table",
         "glass", "night", "horse", "bread", "field", "plant", "cloud", "train", "sugar", "metal", "dream", "smile",
         "north", "south", "heart", "voice", "bird", "fish", "door", "road", "tree", "ship", "milk", "fire", "rain",
         "snow", "wind", "gold")


def ioi(n: int = 100, *, seed: int = 0) -> PromptSet:
    """`n` IOI pairs (the module's template); the first `n` of the seed's draws, so a smaller set is a prefix."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        io, s, third = (NAMES[i] for i in rng.choice(len(NAMES), 3, replace=False))
        template = IOI_TEMPLATES[rng.integers(len(IOI_TEMPLATES))]
        fill = dict(io=io, s=s, place=PLACES[rng.integers(len(PLACES))], thing=OBJECTS[rng.integers(len(OBJECTS))])
        pairs.append(Pair(template.format(s2=s, **fill), template.format(s2=third, **fill), f" {io}", f" {s}"))
    return PromptSet(tuple(pairs), f"ioi(n={n}, seed={seed})")


def greater_than(n: int = 100, *, seed: int = 0, digits: int = 2) -> PromptSet:
    """`n` greater-than pairs, the start year 1702 … 1797 drawn with the seed; `digits`: the digits a token of the
    model's tokenizer holds (`digits_a_token`), 2 (GPT-2's) or 1 (the answer then a decade's digit, the year
    1710 … 1789)."""
    if digits not in (1, 2):
        raise ValueError(f"digits must be 1 or 2, not {digits}")
    rng = np.random.default_rng(seed)
    template = "The war lasted from the year 17{yy} to the year 17"
    pairs = []
    for _ in range(n):
        if digits == 2:
            yy = int(rng.integers(2, 98))
            answer, wrong = f"{yy + 1:02d}", f"{yy - 1:02d}"
        else:
            yy = int(rng.integers(10, 90))
            answer, wrong = str(yy // 10 + 1), str(yy // 10 - 1)
        pairs.append(Pair(template.format(yy=f"{yy:02d}"), template.format(yy="01"), answer, wrong))
    return PromptSet(tuple(pairs), f"greater_than(n={n}, seed={seed}" + (", digits=1)" if digits == 1 else ")"))


def digits_a_token(tokenizer) -> int:
    """How many digits a token of `tokenizer` holds after "17" in a year: 2 (GPT-2's "17", "33") or 1 (a tokenizer
    that writes each digit alone)."""
    return 2 if len(tokenizer("The year 1733", add_special_tokens=False)["input_ids"]) <= 4 else 1


def induction(n: int = 100, *, seed: int = 0, length: int = 8) -> PromptSet:
    """`n` induction pairs: `length` random words (2 ≤ length ≤ 20), then the first 1 … length − 1 of them
    again (drawn with the seed)."""
    if not 2 <= length <= len(WORDS) // 2:
        raise ValueError(f"length must lie in 2 … {len(WORDS) // 2}, not {length}")
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        order = rng.permutation(len(WORDS))
        first, other, spare = order[:length], order[length:2 * length], order[2 * length]
        again = int(rng.integers(1, length))
        words = lambda idx: " ".join(WORDS[i] for i in idx)  # noqa: E731
        clean = f"{words(first)} {words(first[:again])}"
        corrupted = f"{words(first)} {words(other[:again])}"
        pairs.append(Pair(clean, corrupted, f" {WORDS[first[again]]}", f" {WORDS[spare]}"))
    return PromptSet(tuple(pairs), f"induction(n={n}, seed={seed}, length={length})")


PARAMS = ("load", "size", "files", "last", "name", "data", "path", "mode", "text", "value", "key", "item", "count",
          "user", "line", "node", "page", "port", "state", "type", "code", "limit", "index", "source", "target",
          "shape", "image", "token", "model", "color")
SIGNATURE = "def {fn}(self, {names}):\n"  # the docstring task's template: this, then DOCSTRING
DOCSTRING = '    """{w1} {w2} {w3}\n\n    :param {a}: {w4} {w5}\n    :param {b}: {w6} {w7}\n    :param'


def docstring(n: int = 100, *, seed: int = 0) -> PromptSet:
    """`n` docstring pairs (the module's template): the names, the function's and the descriptions' words drawn
    with the seed."""
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(n):
        order = rng.permutation(len(PARAMS))
        names, other = [PARAMS[i] for i in order[:4]], [PARAMS[i] for i in order[4:8]]
        words = dict(zip(("w1", "w2", "w3", "w4", "w5", "w6", "w7"), (WORDS[i] for i in rng.choice(len(WORDS), 7))))
        fn = PARAMS[order[8]]
        doc = DOCSTRING.format(**words, a=names[0], b=names[1])
        clean, corrupted = (SIGNATURE.format(fn=fn, names=", ".join(given)) + doc for given in (names, other))
        pairs.append(Pair(clean, corrupted, f" {names[2]}", f" {names[3]}"))
    return PromptSet(tuple(pairs), f"docstring(n={n}, seed={seed})")


GENERATORS = {"ioi": ioi, "greater_than": greater_than, "induction": induction, "docstring": docstring}


def make(source: str, n: int, *, seed: int = 0, tokenizer=None) -> PromptSet:
    """The set of the generator named `source` (GENERATORS) for a model whose tokenizer is `tokenizer`: greater-than
    in the digits a token of it holds (None: GPT-2's two)."""
    if source == "greater_than" and tokenizer is not None:
        return greater_than(n, seed=seed, digits=digits_a_token(tokenizer))
    return GENERATORS[source](n, seed=seed)
