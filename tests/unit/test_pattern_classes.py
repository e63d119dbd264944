"""One list of pattern classes: every class the rules give is in `PATTERN_CLASSES`, every one of them can be
given, and the figures and the corpus vote read that one list (no second copy with its own order or colours)."""

from __future__ import annotations

import itertools

from mha_viz.corpus import PATTERN_ORDER
from mha_viz.drawing.style import PATTERN_COLOURS
from mha_viz.features.examples import figures as examples
from mha_viz.features.head_metrics import type_figures as type_grid
from mha_viz.metrics.head_stats import MIXED_SHARES, RULE_INPUTS, classify
from mha_viz.metrics.measures import PATTERN_CLASSES


def _head(**values: float) -> dict[str, float]:
    head = dict.fromkeys(RULE_INPUTS, 0.0)
    head.update(values)
    return head


PLANTED = {  # a head planted for each class, by the rule that gives it
    "broad": _head(beyond_norm_entropy=0.95),
    "diagonal": _head(beyond_prev=0.9),
    "vertical": _head(beyond_sep=0.7),
    "block": _head(in_segment=0.9),
    "sink": _head(sink=0.9),
    "mixed": _head(self=0.3, prev=0.3),
    "heterogeneous": _head(),
}


def test_each_planted_head_gets_its_class_and_every_class_is_listed_once():
    given = {name: classify(head).split(":")[0] for name, head in PLANTED.items()}
    assert given == {name: name for name in PLANTED}
    assert sorted(PATTERN_CLASSES) == sorted(PLANTED) and len(set(PATTERN_CLASSES)) == len(PATTERN_CLASSES)


def test_no_combination_of_rule_inputs_gives_an_unlisted_class():
    shares = list(MIXED_SHARES.values())
    for a, b, level in itertools.product(shares[:4], RULE_INPUTS[:7], (0.0, 0.55, 0.95)):
        label = classify(_head(**{a: level, b: 1.0 - level}))
        assert label.split(":")[0] in PATTERN_CLASSES, label


def test_the_figures_and_the_vote_read_the_one_list():
    assert list(PATTERN_COLOURS) == list(PATTERN_CLASSES) and PATTERN_ORDER == PATTERN_CLASSES
    assert len(set(PATTERN_COLOURS.values())) == len(PATTERN_COLOURS)
    assert examples.PATTERN_COLOURS is PATTERN_COLOURS and type_grid.PATTERN_COLOURS is PATTERN_COLOURS
