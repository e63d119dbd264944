"""Whether a length difference explains how one sentence deviates from a corpus (the Corpus page's
*This sentence against the corpus*).

Some head metrics grow with the number of tokens: the entropy (0 .. ln n) and the mean distance
(0 .. n − 1), those whose catalogue entry has a 0..1 form (`metrics.Measure.bounded_form`). A
sentence much shorter than the corpus's documents then looks unusual in every head at once,
although no head behaves differently. The rule, all three parts required:

1. the metric is length-sensitive: it has a `bounded_form` (the others: nothing is said);
2. the sentence's length is unusual for the corpus: outside the documents' range (shortest ..
   longest, each document counted as the statistics read it, after `max_tokens`), or at most half
   or at least twice their median (FACTOR);
3. the deviations go the length's way: of the heads that deviate by DEVIATES sd or more, more than
   half lie on the side a length change pushes them (below the corpus mean for a shorter sentence,
   above it for a longer one).

Then the length explains the deviations, and `LengthCheck.message` says so and names the 0..1
form to compare instead.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mha_viz.metrics import METRICS

DEVIATES = 2.0  # sd from the corpus mean: a head deviates
FACTOR = 2.0  # a length this many times the median, or under its 1 / FACTOR, is unusual


class LengthCheck(NamedTuple):
    """The rule's parts for one sentence, one metric and one corpus (`check`)."""

    n: int  # the sentence's tokens
    shortest: int  # the corpus documents' lengths
    median: float
    longest: int
    sensitive: bool  # the metric grows with the number of tokens
    deviating: int  # heads at DEVIATES sd or more
    with_length: int  # … of them on the side the length pushes
    metric: str

    @property
    def unusual(self) -> bool:
        """The sentence's length is outside the corpus's range or FACTOR from its median."""
        return (self.n < self.shortest or self.n > self.longest or self.n * FACTOR <= self.median
                or self.n >= FACTOR * self.median)

    @property
    def explains(self) -> bool:
        """All three parts of the rule hold."""
        return self.sensitive and self.unusual and self.deviating > 0 and 2 * self.with_length > self.deviating

    def message(self) -> str:
        """What the page says when the length explains the deviations (Markdown-free plain text)."""
        m = METRICS[self.metric]
        form = METRICS[m.bounded_form].label if m.bounded_form in METRICS else m.bounded_form
        shorter = self.n < self.median
        return (f"A length difference explains these deviations. This sentence has {self.n} tokens; the corpus's "
                f"documents have {self.shortest}–{self.longest} (median {self.median:g}). {m.label} grows with the "
                f"number of tokens, and {self.with_length} of the {self.deviating} heads that deviate by "
                f"{DEVIATES:g} sd or more are {'below' if shorter else 'above'} the corpus mean, as a "
                f"{'shorter' if shorter else 'longer'} text makes them. Compare {form} instead, which does not grow "
                "with the length, or a sentence of the corpus's length.")


def length_range(lengths: np.ndarray) -> tuple[int, float, int]:
    """(shortest, median, longest) of documents counted by token count (`CorpusStats.lengths`)."""
    counts = np.asarray(lengths, dtype=np.int64)
    present = np.flatnonzero(counts)
    if not present.size:
        raise ValueError("no document lengths were recorded")
    median = float(np.median(np.repeat(np.arange(counts.size), counts)))
    return int(present[0]), median, int(present[-1])


def check(lengths: np.ndarray, n: int, metric: str, z: np.ndarray) -> LengthCheck:
    """The rule for a sentence of `n` tokens whose deviations from the corpus mean of `metric` are
    `z` ((L, H) in sd), the corpus's documents counted by length in
    `lengths` (`CorpusStats.lengths`)."""
    shortest, median, longest = length_range(lengths)
    z = np.asarray(z, dtype=np.float64)
    far = np.isfinite(z) & (np.abs(z) >= DEVIATES)
    push = -1.0 if n < median else 1.0  # the side a shorter (longer) sentence moves a growing metric to
    sensitive = metric in METRICS and bool(METRICS[metric].bounded_form)
    return LengthCheck(int(n), shortest, median, longest, sensitive, int(far.sum()),
                       int((far & (np.sign(z) == push)).sum()), metric)
