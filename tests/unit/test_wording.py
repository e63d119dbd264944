"""One rule for a count in a message (`mha_viz.text.wording.plural`), and the message that said "9 query rows
in 1 heads" (`ui.notes.empty_rows_text`) following it."""

from __future__ import annotations

import pytest

from mha_viz.text.wording import plural
from mha_viz.ui.kit.notes import empty_rows_text


@pytest.mark.parametrize("n,noun,said", [
    (1, "head", "1 head"), (0, "head", "0 heads"), (9, "query row", "9 query rows"), (1, "query row", "1 query row"),
    (2, "query", "2 queries"), (3, "batch", "3 batches"), (1, "key", "1 key"), (7479, "token", "7,479 tokens"),
])
def test_a_count_and_its_noun(n, noun, said):
    assert plural(n, noun) == said


def test_an_irregular_plural_given():
    assert plural(2, "datum", "data") == "2 data" and plural(1, "datum", "data") == "1 datum"


def test_the_hidden_rows_message_counts_right():
    """The warning under *Hide tokens* said "9 query rows in 1 heads"."""
    assert empty_rows_text(9, 1).startswith("9 query rows in 1 head gave")
    assert empty_rows_text(1, 3).startswith("1 query row in 3 heads gave")
    assert empty_rows_text(9, 1, ["L0 H3"]).startswith("9 query rows in 1 head (L0 H3) gave")  # the head named
    named = empty_rows_text(20, 8, [f"L{i} H0" for i in range(8)])
    assert "(L0 H0, L1 H0, L2 H0, L3 H0, L4 H0, L5 H0 and 2 more) gave" in named
