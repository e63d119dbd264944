"""*Heads behind a task* (issue 56): on SmolLM2, a generated IOI set run by each method draws
each head's mean over the pairs (the grid's cells against the library's own result over the same set, computed
here), a cross on exactly the heads whose interval holds 0, and the pairs left out counted; a file of the user's
is read, and a bad one is refused with a message that keeps every choice; a model on which no pair can run says
why. The choices travel in links and lessons (tests/app/test_app_lesson_choices.py), the notebook's recipe in
tests/unit/test_notebook_export.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mha_viz
from mha_viz.features.task import controls as task_keys
from mha_viz.features.task.controls import METHODS
from mha_viz.features.task.figures import MARK
from mha_viz.tasks import generators
from mha_viz.ui.kit import keys
from tests.app.helpers import chart_title, charts, open_with_text, shown

pytestmark = pytest.mark.model
TEXT = "When Mary and John went to the store, John gave a drink to"


def _task(model: str = "smollm2"):
    at = open_with_text("task", TEXT, model=model)
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    return at


def _grid(at) -> dict:
    return next(c for c in charts(at) if "mean over" in chart_title(c).replace("<br>", " "))


@pytest.mark.parametrize("method", ["estimate", "dla"])
def test_a_generated_task_draws_each_heads_mean_and_crosses_the_intervals_that_hold_zero(smollm2, method):
    at = _task()
    at.selectbox(key=task_keys.TASK_SOURCE).set_value("IOI (names and places)").run()
    at.number_input(key=task_keys.TASK_SIZE).set_value(4).run()
    at.number_input(key=task_keys.TASK_SEED).set_value(3).run()
    at.selectbox(key=task_keys.TASK_METHOD).set_value(next(k for k, v in METHODS.items() if v == method)).run()
    at.button(key=task_keys.TASK_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    grid = _grid(at)
    prompts = generators.ioi(4, seed=3)
    call = mha_viz.estimate_heads if method == "estimate" else mha_viz.direct_logit
    want = call(smollm2, prompts, max_tokens=at.session_state[keys.TOKEN_LIMIT], resamples=1000)
    np.testing.assert_allclose(np.asarray(grid["data"][0]["z"], dtype=np.float64), want.mean, rtol=1e-4,
                               atol=1e-5)
    crosses = [t for t in grid["data"] if t.get("name") == MARK]
    crossed = set(zip(crosses[0]["y"], crosses[0]["x"])) if crosses else set()
    assert crossed == set(zip(*np.nonzero(want.crosses_zero)))  # the same resamples, the same seed
    said = shown(next(s.value for s in at.success))
    assert f"{len(want.kept)} pairs of ioi(n=4, seed=3) ran" in said, said
    # the Run button stays in its place, greyed out with why, then and on every later run (issue 90: it vanished)
    for _ in range(2):
        ran = [b for b in at.button if b.label == "Run over the task"]
        assert len(ran) == 1 and ran[0].disabled and "change the task" in ran[0].help
        at.run()
    at.number_input(key=task_keys.TASK_SEED).set_value(4).run()  # another task: Run is live again
    assert not next(b for b in at.button if b.label == "Run over the task").disabled


def test_a_file_of_pairs_runs_and_a_bad_one_is_refused_keeping_every_choice(tmp_path):
    at = _task()
    at.selectbox(key=task_keys.TASK_SOURCE).set_value("a file (CSV or JSONL)").run()
    at.selectbox(key=task_keys.TASK_METHOD).set_value("direct logit attribution").run()
    bad = "clean,corrupted,answer\nA b,A c, d\n"  # no wrong column
    at.file_uploader(key=task_keys.TASK_FILE).set_value(("pairs.csv", bad.encode(), "text/csv")).run()
    assert not at.exception
    said = shown(" ".join(e.value for e in at.error))
    assert "pairs.csv" in said and "wrong" in said, said
    assert at.selectbox(key=task_keys.TASK_METHOD).value == "direct logit attribution"
    rows = [{"clean": p.clean, "corrupted": p.corrupted, "answer": p.answer, "wrong": p.wrong}
            for p in generators.ioi(3, seed=1).pairs]
    rows.append({"clean": "A cat", "corrupted": "A cat sat", "answer": " on", "wrong": " in"})  # lengths differ
    good = "\n".join(json.dumps(r) for r in rows).encode()
    at.file_uploader(key=task_keys.TASK_FILE).set_value(("pairs.jsonl", good, "application/json")).run()
    at.button(key=task_keys.TASK_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    said = shown(next(s.value for s in at.success))
    assert "3 pairs of pairs.jsonl ran" in said and "1 clean and corrupted differ in length" in said, said
    assert _grid(at)


def test_a_model_on_which_no_pair_runs_says_why():
    at = _task(model="toy-induction")  # its letters' vocabulary reads every IOI name as its unknown token
    at.number_input(key=task_keys.TASK_SIZE).set_value(3).run()
    assert not at.exception and not at.error
    assert task_keys.TASK_GO not in [b.key for b in at.button]  # said before the button, not after the work
    said = shown(" ".join(w.value for w in at.warning))
    assert "No pair of 'ioi(n=3, seed=0)' can run on toy-induction: 0 pairs kept; left out: 3 (" in said, said
    assert at.number_input(key=task_keys.TASK_SIZE).value == 3


def test_a_tasks_circuit_draws_the_mean_edges_and_the_faithfulness_band(toy_induction):
    from mha_viz.circuits import path_patching
    from mha_viz.tasks import faithfulness_set
    from tests.models.task_pairs import letter_pairs
    prompts = letter_pairs(4, seed=5)
    rows = [{"clean": p.clean, "corrupted": p.corrupted, "answer": p.answer, "wrong": p.wrong} for p in prompts.pairs]
    at = _task(model="toy-induction")
    at.selectbox(key=task_keys.TASK_SOURCE).set_value("a file (CSV or JSONL)").run()
    at.selectbox(key=task_keys.TASK_METHOD).set_value("edge attribution (EAP)").run()
    pairs = "\n".join(json.dumps(r) for r in rows).encode()
    at.file_uploader(key=task_keys.TASK_FILE).set_value(("letters.jsonl", pairs, "application/json")).run()
    at.button(key=task_keys.TASK_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    cap = at.session_state[keys.TOKEN_LIMIT]
    want = mha_viz.edge_attribution(toy_induction, prompts, resamples=1000, max_tokens=cap)
    table = next(d.value for d in at.dataframe if "interval_holds_0" in d.value.columns)
    top = want.top(len(table))
    assert list(zip(table["sender"], table["receiver"])) == list(zip(top["sender"], top["receiver"]))
    np.testing.assert_allclose(table["mean"], top["mean"].round(5), atol=1e-5)
    graph = next(c for c in charts(at) if chart_title(c).startswith("The top"))
    assert graph["data"][-1]["hovertext"][0].endswith("(mean over 4 pairs)")
    at.button(key=task_keys.TASK_FAITH_GO).click().run()
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    band = next(c for c in charts(at) if "over the task" in chart_title(c).replace("<br>", " "))
    ks = path_patching.curve_sizes(len(want.table))
    curve = faithfulness_set(toy_induction, prompts, want.table, ks, max_tokens=cap, resamples=1000).curve
    shown_curve = curve[curve["k"] > 0]
    np.testing.assert_allclose(band["data"][1]["y"], shown_curve["mean"], atol=1e-6)
    assert band["data"][0]["fill"] == "toself"  # the band
    assert "mean faithfulness" in shown(" ".join(c.value for c in at.caption))

