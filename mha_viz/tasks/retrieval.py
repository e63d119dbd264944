"""Retrieval heads (Wu et al. 2024, "Retrieval Head Mechanistically Explains Long-Context Factuality", arXiv
2404.15574): the heads that copy a needle from far back. A needle sentence is planted at several depths of a
long text (the haystack: the bundled corpus sample, repeated as far as the length needs), a question after it,
and the model answers greedily (`mha_viz.generate`, whose run is dense or long as `analyze` decides, so 8,192
tokens read on a CPU; an instruct model, whose tokenizer has a chat template, is asked the whole text as the user's
message with its own turn opened: asked plainly, SmolLM2-Instruct ends its turn at once). At each generated token w
that is a token of the needle, a head copies it when its heaviest key is a position of the needle holding w. A
head's retrieval score is the number of needle tokens it copied over the needle's length, averaged over every
(length, depth, needle) trial: 1 for a head that copies every token of every needle the model reproduces, 0 for one
that never does. `find_retrieval` also keeps where every head looked when the model wrote the first needle token
that a head copied, in the last trial with one (`Look`: the app draws it)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import pandas as pd

from mha_viz import needs
from mha_viz.budget import capture_budget
from mha_viz.budget.plan import Plan
from mha_viz.capture import generation
from mha_viz.corpus.inputs import SAMPLE, read_texts
from mha_viz.generate_text import generate
from mha_viz.progress import report
from mha_viz.text.tokenize import InputError, token_limit
from mha_viz_models import LoadedModel

NEEDLE = ("The best thing to do in San Francisco is eat a sandwich and sit in Dolores Park on a sunny day.",
          "What is the best thing to do in San Francisco? Answer:")


@dataclass(frozen=True)
class Trial:
    """One planted needle: the prompt's token ids, where the needle's tokens lie in it, and the question."""
    ids: list[int]
    needle: tuple[int, int]  # [start, stop) positions of the needle in the prompt
    length: int
    depth: float


@dataclass(frozen=True)
class Look:
    """Where every head looked as the model wrote the first needle token a head copied, in one trial: each head's
    attention over the prompt at that step (the generated tokens before it left out), the needle's place."""
    tokens: list[str]  # the prompt's tokens, as the app shows them
    needle: tuple[int, int]  # [start, stop) positions of the needle in the prompt
    copied: str  # the token written
    step: int  # its place among the generated tokens (0: the first)
    rows: np.ndarray  # (layers, heads, prompt tokens) float32
    length: int
    depth: float


@dataclass(frozen=True)
class Retrieval:
    """`find_retrieval`'s result: every head's score (`retrieval_scores`' table) and the last trial's `Look`
    (None when the model copied no needle token in it)."""
    table: pd.DataFrame
    look: Look | None


class Copy(NamedTuple):
    """The heads of one layer that copied at one generated step: each one's heaviest key is a needle position
    holding the token written there (`heads` may be empty: none of the layer's `count` heads did)."""
    step: int
    layer: int
    heads: np.ndarray
    positions: np.ndarray  # the needle positions they copied from, one a head
    count: int


def copies(rows_at, prompt_ids: list[int], needle: tuple[int, int], generated: list[int], row_of,
           num_layers: int) -> list[Copy]:
    """Every layer's copies at every generated token that is a token of the needle, in order of the steps.
    rows_at(layer, row) gives every head's attention (heads, keys) of one query row; row_of(t) the row that chose
    step t's token."""
    start, stop = needle
    needle_ids = np.asarray(prompt_ids[start:stop])
    found = []
    for t, w in enumerate(generated):
        where = start + np.flatnonzero(needle_ids == w)
        if not len(where):  # not a token of the needle: nothing copied
            continue
        for layer in range(num_layers):
            top = np.asarray(rows_at(layer, row_of(t))).argmax(axis=-1)  # (heads,)
            heads = np.flatnonzero(np.isin(top, where))
            found.append(Copy(t, layer, heads, top[heads], len(top)))
    return found


def count_copies(found: list[Copy], needle: tuple[int, int], num_layers: int) -> np.ndarray | None:
    """(layers, heads): how many of the needle's tokens each head copied, each needle position counted once (Wu et
    al.'s set of copied tokens: an answer that repeats the needle copies nothing twice); None when no generated
    token was the needle's."""
    if not found:
        return None
    start, stop = needle
    copied = np.zeros((num_layers, found[0].count, stop - start), bool)  # the positions each head copied from
    for c in found:
        copied[c.layer, c.heads, c.positions - start] = True
    return copied.sum(-1)


def haystack_ids(model: LoadedModel, haystack=None) -> list[int]:
    """The haystack's token ids: what `corpus.read_texts` reads of it (default the bundled sample), joined."""
    ids = model.tokenizer(" ".join(read_texts(SAMPLE if haystack is None else haystack)),
                          add_special_tokens=False)["input_ids"]
    if not ids:
        raise InputError("The haystack holds no text.")
    return ids


def plant(model: LoadedModel, needle: tuple[str, str], length: int, depth: float, hay: list[int]) -> Trial:
    """A prompt of about `length` tokens: the haystack's ids `hay` (repeated as far as needed) with the needle
    sentence at `depth` (0 = its start, 1 = its end; the sentence boundary nearest it), then the question."""
    fact = model.tokenizer(" " + needle[0].strip(), add_special_tokens=False)["input_ids"]
    ask = model.tokenizer("\n" + needle[1].strip(), add_special_tokens=False)["input_ids"]
    bos = model.tokenizer("", add_special_tokens=True)["input_ids"]  # the special tokens a text starts with
    room = length - len(fact) - len(ask) - len(bos)
    if room < 1:
        raise InputError(f"{length} tokens leave no room for a haystack around a needle of {len(fact)} tokens.")
    hay = (hay * (room // len(hay) + 1))[:room]
    cut = sentence_boundary(model.tokenizer, hay, int(round(depth * room)))
    ids = bos + hay[:cut] + fact + hay[cut:] + ask
    start = len(bos) + cut
    return Trial(ids, (start, start + len(fact)), length, depth)


def trial_tokens(model: LoadedModel, needle: tuple[str, str], length: int) -> tuple[int, int]:
    """(the prompt's tokens, the most new tokens) of one trial at `length`, as `find_retrieval` asks: the length and
    the chat template's tokens around it; the needle's tokens and 4 more, within the model's positions."""
    fact = len(model.tokenizer(" " + needle[0].strip(), add_special_tokens=False)["input_ids"])
    template = len(model.tokenizer(asked(model, ""))["input_ids"]) - len(model.tokenizer("")["input_ids"])
    n = length + max(template, 0)
    return n, max(min(fact + 4, token_limit(model, None) - n), 1)


def search_bytes(model: LoadedModel, needle: tuple[str, str], length: int) -> int:
    """The bytes of attention one trial at `length` keeps against the capture budget (`generation.need_bytes`)."""
    return generation.need_bytes(model, *trial_tokens(model, needle, length))


def over_budget(model: LoadedModel, needle: tuple[str, str], length: int) -> str | None:
    """Why a search at `length` tokens would not fit the capture budget, with the longest length that would (None:
    it fits): said before the search, not after its work."""
    need = search_bytes(model, needle, length)
    if capture_budget.fits(need):
        return None
    fits = capture_budget.longest(lambda n: search_bytes(model, needle, n), top=length)
    return (f"A search at {length:,} tokens would hold {capture_budget.over_budget(need)}: choose a prompt length of "
            f"at most {fits:,} tokens.")


def check_model(model: LoadedModel) -> None:
    """InputError for a model read as effective attention alone (`LoadedModel.effective`: Mamba, Mamba-2): a search
    records every head's row at each token of each answer, which such a model makes by reading the whole text again
    at every step (minutes for one needle even on a small one); not offered yet."""
    if model.effective:
        raise InputError(f"{model.name} is read as the effective attention of its {model.effective} layers, made over "
                         "the whole text at once: a search would make it again for every token of every answer, which "
                         "mha-viz does not offer yet. Its attention on a whole text is on every other page, and "
                         "Generate watches it answer.")


def plan_search(model: LoadedModel, needle: tuple[str, str], length: int, depths) -> Plan[Retrieval]:
    """`find_retrieval` of one needle and question at one `length` and `depths` (fractions), planned once
    (`budget.plan`): InputError saying the longest length that fits when a trial would pass the capture budget
    (`over_budget`), before anything runs; `n` a trial's prompt and new tokens (`trial_tokens`), `need` what one
    trial's generation holds, long or not as `generate` decides. `run(progress=…)` searches."""
    check_model(model)
    if why := over_budget(model, needle, length):
        raise InputError(why)
    prompt, new = trial_tokens(model, needle, length)
    need = needs.generation(model, prompt + new, new, long=generation.goes_long(model, prompt + new))
    return Plan(prompt + new, need, lambda progress=None: find_retrieval(
        model, needles=[needle], lengths=(length,), depths=tuple(depths), progress=progress))


def sentence_boundary(tokenizer, ids: list[int], at: int) -> int:
    """The place in `ids` nearest `at` where a sentence ends and the next begins after a space (0 and len(ids)
    count too): the needle goes there, as in Kamradt's test. Planted inside a sentence, its first or last token can
    merge with the haystack's when the prompt's text is read again ('.' before ',' reads as '.,'), and the needle is
    no longer where it was put. `at` itself when the haystack has no such place."""
    if at <= 0 or at >= len(ids):
        return at
    text = dict(zip(unique := sorted(set(ids)), tokenizer.batch_decode([[i] for i in unique])))
    ends = np.array([text[i].rstrip(" ").endswith((".", "!", "?", "\n")) for i in ids])
    opens = np.array([text[i][:1].isspace() for i in ids])
    places = np.flatnonzero(ends[:-1] & opens[1:]) + 1  # a sentence ends before each of these
    if not len(places):
        return at
    return int(places[np.argmin(np.abs(places - at))])


def retrieval_scores(model: LoadedModel, *, haystack=None, needles: list[tuple[str, str]] | None = None,
                     lengths=(1024,), depths=(0.1, 0.5, 0.9), max_new_tokens: int | None = None,
                     progress=None) -> pd.DataFrame:
    """Every head's retrieval score (the module): one row per head (layer, head, score), averaged over every
    needle (a (sentence, question) pair; default `NEEDLE`), length (tokens, up to the model's context) and depth.
    haystack: what `corpus.read_texts` reads (default the bundled sample). The table's attrs say how many needle
    tokens the model reproduced in all ("copied") out of how many ("needle_tokens")."""
    return find_retrieval(model, haystack=haystack, needles=needles, lengths=lengths, depths=depths,
                          max_new_tokens=max_new_tokens, progress=progress).table


def find_retrieval(model: LoadedModel, *, haystack=None, needles: list[tuple[str, str]] | None = None,
                   lengths=(1024,), depths=(0.1, 0.5, 0.9), max_new_tokens: int | None = None,
                   progress=None) -> Retrieval:
    """`retrieval_scores`' table, and where every head looked at the first needle token a head copied, in the last
    trial where one did (`Look`)."""
    check_model(model)
    needles = list(needles or [NEEDLE])
    look = None
    trials = [(n, length, depth) for n in needles for length in lengths for depth in depths]
    total, copied, needle_tokens = None, 0, 0
    hay = haystack_ids(model, haystack)  # read and tokenized once for every trial
    for done, (needle, length, depth) in enumerate(trials):
        trial = plant(model, needle, int(length), float(depth), hay)
        size = trial.needle[1] - trial.needle[0]
        prompt = asked(model, model.tokenizer.decode(trial.ids, skip_special_tokens=True))
        room = token_limit(model, None) - max(len(trial.ids), len(model.tokenizer(prompt)["input_ids"]))
        if room < 1:
            raise InputError(f"A {length}-token prompt leaves no room to answer within {model.name}'s "
                             f"{token_limit(model, None)} tokens: choose shorter lengths.")
        def step(fraction: float, message: str, done: int = done) -> None:  # each trial's generation, a share of all
            report(progress, (done + fraction) / len(trials), f"Needle {done + 1} of {len(trials)} at {length:,} "
                                                              f"tokens: {message}")
        gen = generate(model, prompt, min(max_new_tokens or size + 4, room), stop_at_eos=True, progress=step,
                       views=False)  # the new tokens' rows are all it reads
        prompt_ids = gen.run.token_ids[:gen.num_prompt_tokens]
        found = locate(prompt_ids, trial.ids[trial.needle[0]:trial.needle[1]])
        new = gen.run.token_ids[gen.num_prompt_tokens:]
        events = copies(lambda layer, row: gen.run.layer_rows(layer, row, row + 1)[:, 0], prompt_ids, found, new,
                        gen.row_of, model.num_layers)
        hits = count_copies(events, found, model.num_layers)
        hits = np.zeros((model.num_layers, model.num_heads)) if hits is None else hits
        total = hits / size if total is None else total + hits / size
        needle = prompt_ids[found[0]:found[1]]  # its tokens as the model read them
        # the first step at which a head copied (a needle token written while every head looked elsewhere, at the
        # question's copy of the word, say, shows no retrieval)
        first = next((c.step for c in events if len(c.heads)), None)
        if first is not None:
            rows = np.stack([np.asarray(gen.run.layer_rows(layer, gen.row_of(first), gen.row_of(first) + 1)[:, 0],
                                        dtype=np.float32)[:, :len(prompt_ids)] for layer in range(model.num_layers)])
            look = Look(list(gen.run.tokens[:len(prompt_ids)]), found, gen.run.tokens[len(prompt_ids) + first],
                        first, rows, int(length), float(depth))
        copied += sum((Counter(needle) & Counter(new)).values())  # each needle token once
        needle_tokens += size
        report(progress, (done + 1) / len(trials), f"Needle {done + 1} of {len(trials)}")
    score = total / len(trials)
    L, H = score.shape
    table = pd.DataFrame({"layer": np.repeat(np.arange(L), H), "head": np.tile(np.arange(H), L),
                          "score": score.reshape(-1)})
    table.attrs.update(copied=copied, needle_tokens=needle_tokens, trials=len(trials))
    return Retrieval(table, look)


def asked(model: LoadedModel, text: str) -> str:
    """`text` as the model is asked it: an instruct model's (its tokenizer has a chat template) as the user's
    message with the assistant's turn opened, else as it is."""
    tokenizer = model.tokenizer
    if not getattr(tokenizer, "chat_template", None):
        return text
    try:
        return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                             tokenize=False)
    except Exception:  # noqa: BLE001 - a template that wants more than one user message: the text as it is
        return text


def locate(ids: list[int], needle: list[int]) -> tuple[int, int]:
    """[start, stop) of `needle` in `ids` (the prompt as the model read it again from its text)."""
    for start in range(len(ids) - len(needle) + 1):
        if ids[start:start + len(needle)] == needle:
            return start, start + len(needle)
    raise InputError("The needle does not read back as the same tokens inside the prompt; choose another needle.")
