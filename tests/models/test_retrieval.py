"""Retrieval scores on toy-induction (`mha_viz.tasks.retrieval_scores`): a needle of letters planted in a haystack of
other letters, the question its first two letters; the model copies the rest by induction. Its induction head,
whose heaviest key is the token it copies, scores every token the model copied over the needle's length; the
first layer's heads (previous token, position) score 0."""

from __future__ import annotations

import numpy as np
import pytest

import mha_viz

pytestmark = pytest.mark.model


def test_the_induction_head_retrieves_and_the_first_layer_does_not():
    toy = mha_viz.load_model("toy-induction", device="cpu")
    rng = np.random.default_rng(0)
    hay = [" ".join(rng.choice(list("asdfghjklzxcvbnm"), 40))]  # no letter of the needle
    table = mha_viz.tasks.retrieval_scores(toy, haystack=hay, needles=[("q w e r t y u i", "q w")], lengths=(40, 56),
                                     depths=(0.2, 0.8))
    assert table.attrs["trials"] == 4 and table.attrs["needle_tokens"] == 32
    assert table.attrs["copied"] == 24  # "e r t y u i" each time: the question gave "q w"
    best = table.loc[table["score"].idxmax()]
    assert int(best["layer"]) == 1 and best["score"] == pytest.approx(24 / 32)  # it copied every copied token
    assert (table.loc[table["layer"] == 0, "score"] == 0).all()


def test_an_instruct_model_is_asked_through_its_chat_template_and_copies_the_needle(smollm2):
    """SmolLM2-Instruct asked plainly ends its turn at once; asked through its chat template it answers with the
    needle, and some heads copy most of its tokens. The look is the step of the first token a head copied: that
    token is in the needle, and some head's heaviest key there is the needle's copy of it."""
    from mha_viz.tasks import retrieval

    assert retrieval.asked(smollm2, "x").endswith("assistant\n")  # the assistant's turn opened
    found = mha_viz.tasks.find_retrieval(smollm2, lengths=(256,), depths=(0.5,))
    table, look = found.table, found.look
    assert table.attrs["copied"] >= 0.8 * table.attrs["needle_tokens"]
    best = table.loc[table["score"].idxmax()]
    assert best["score"] > 0.3
    start, stop = look.needle
    assert look.copied in look.tokens[start:stop]
    top = look.rows.argmax(-1)  # (layers, heads): each head's heaviest key at that step
    assert any(look.tokens[k] == look.copied for k in top[(top >= start) & (top < stop)])


@pytest.mark.parametrize("length", [256, 1024, 4096])
def test_the_needle_reads_back_at_every_depth_the_page_offers(smollm2, length):
    """The page's defaults on the bundled decoder (issue 90): at 1,024 tokens and 10 % the needle sat inside a
    sentence of the haystack, its final '.' before a ',' that the prompt's text read again as '.,', and the search
    refused its own default needle. Planted at a sentence boundary, every offered depth reads back, the needle's
    tokens where `plant` put them, with the haystack's sentence ending just before it."""
    from mha_viz.features.retrieval.controls import DEPTHS
    from mha_viz.tasks import retrieval

    hay = retrieval.haystack_ids(smollm2)
    for depth in DEPTHS:
        trial = retrieval.plant(smollm2, retrieval.NEEDLE, length, depth / 100, hay)
        start, stop = trial.needle
        prompt = retrieval.asked(smollm2, smollm2.tokenizer.decode(trial.ids, skip_special_tokens=True))
        ids = smollm2.tokenizer(prompt)["input_ids"]
        found = retrieval.locate(ids, trial.ids[start:stop])  # raises where it does not read back
        assert found[1] - found[0] == stop - start
        before = smollm2.tokenizer.decode(trial.ids[:start], skip_special_tokens=True).rstrip()
        assert before.endswith((".", "!", "?")) or not before
        assert abs(start - len(smollm2.tokenizer("", add_special_tokens=True)["input_ids"])
                   - depth / 100 * (length - 60)) < 0.25 * length  # near the depth asked


def test_a_search_over_the_budget_is_refused_before_it_runs_with_the_length_that_fits(smollm2, monkeypatch):
    """Issue 90: the page refused a search only after its work. `over_budget` says so before, with the longest
    length that fits: a search at that length runs within the budget, and one a few tokens longer is refused by
    the generation's own check (so the estimate of the prompt's and answer's tokens is the generation's)."""
    from mha_viz.capture import GenerationError
    from mha_viz.tasks import retrieval
    from tests.helpers import capture_budget_of

    budget = 8 << 20  # every head's array within it up to 88 tokens, the rows of 30 new tokens after 244
    capture_budget_of(monkeypatch, budget)
    assert retrieval.over_budget(smollm2, retrieval.NEEDLE, 96) is None
    why = retrieval.over_budget(smollm2, retrieval.NEEDLE, 1024)
    fits = int(why.split("at most ")[1].split()[0].replace(",", ""))
    assert retrieval.search_bytes(smollm2, retrieval.NEEDLE, fits) <= budget
    assert retrieval.search_bytes(smollm2, retrieval.NEEDLE, fits + 1) > budget
    found = mha_viz.tasks.find_retrieval(smollm2, lengths=(fits,), depths=(0.5,))
    assert found.table.attrs["trials"] == 1
    with pytest.raises(GenerationError, match="would hold"):
        mha_viz.tasks.find_retrieval(smollm2, lengths=(fits + 3,), depths=(0.5,))
