"""The line view through AppTest, on minilm and smollm2, with awkward inputs: one token, more
than 128 tokens (a window), threshold 1.0 (no line, a note), a focus token picked and cleared."""

from __future__ import annotations

import pytest

from mha_viz.features.lines import controls as lines_keys
from mha_viz.features.lines import figures as line_figures
from mha_viz.ui.kit import keys
from tests.app.helpers import charts, open_with_text

pytestmark = pytest.mark.model
LONG = " ".join(f"word{i % 37} and" for i in range(120))  # well over 128 tokens for both models


def lines_drawn(at) -> int:
    spec = charts(at)[0]
    return spec["layout"]["meta"]["lines"]


def infos(at) -> str:
    return " ".join(i.value for i in at.info)


@pytest.mark.parametrize("model", ["minilm", "smollm2"])
def test_line_view_draws_every_head_then_focus_threshold_and_window(model):
    at = open_with_text("lines", "The cat sat on the mat because it was tired.", model)
    run = at.session_state[keys.CURRENT].run
    assert at.pills(key=lines_keys.LINE_HEADS).value == list(range(run.num_heads))  # all heads by default
    before = lines_drawn(at)
    assert before > 0
    spec = charts(at)[0]
    assert {t["name"] for t in spec["data"] if t.get("showlegend") is not False} == {
        f"H{h}" for h in range(run.num_heads)}

    at.selectbox(key=lines_keys.LINE_TOKEN).set_value(2).run()  # focus on query 2
    assert not at.exception, at.exception
    focused = lines_drawn(at)
    assert 0 < focused < before and focused <= run.num_heads * run.n

    at.radio(key=lines_keys.LINE_SIDE).set_value(line_figures.KEY).run()  # now the lines *to* key 2
    assert not at.exception and 0 < lines_drawn(at) < before
    at.button(key="line_clear").click().run()
    assert at.selectbox(key=lines_keys.LINE_TOKEN).value == -1 and lines_drawn(at) == before

    at.pills(key=lines_keys.LINE_HEADS).set_value([0]).run()
    assert 0 < lines_drawn(at) < before
    at.slider(key=lines_keys.LINE_THRESHOLD).set_value(1.0).run()
    assert not at.exception, at.exception
    layer = at.selectbox(key=lines_keys.LINE_LAYER).value
    full = int((run.attentions[layer, 0] >= 1.0).sum())  # a causal model's first token: weight 1 on itself
    assert lines_drawn(at) == full and (full == 0) == ("No line" in infos(at))
    assert full == (1 if model == "smollm2" else 0)
    at.selectbox(key=lines_keys.LINE_TOKEN).set_value(3).run()  # query 3 spreads its attention: no line
    assert not at.exception and lines_drawn(at) == 0 and "No line" in infos(at)
    at.button(key="line_clear").click().run()
    at.pills(key=lines_keys.LINE_HEADS).set_value([]).run()
    assert not at.exception and "at least one head" in infos(at)

    at.text_area(key="text").input(LONG).run()  # > 128 tokens: a window of them
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    run = at.session_state[keys.CURRENT].run
    assert run.n > 128
    assert "at most 128" in infos(at)
    assert at.slider(key=lines_keys.LINE_WINDOW).value == (0, 128)
    at.pills(key=lines_keys.LINE_HEADS).set_value(list(range(run.num_heads))).run()
    at.slider(key=lines_keys.LINE_THRESHOLD).set_value(0.0).run()
    assert charts(at)[0]["layout"]["meta"]["tokens"] == 128
    at.slider(key=lines_keys.LINE_WINDOW).set_value((run.n - 20, run.n)).run()
    assert not at.exception, at.exception
    meta = charts(at)[0]["layout"]["meta"]
    assert meta["tokens"] == 20 and meta["start"] == run.n - 20 and meta["lines"] > 0


def test_line_view_on_one_token():
    at = open_with_text("lines", "a", "smollm2")
    run = at.session_state[keys.CURRENT].run
    assert run.n == 1
    assert lines_drawn(at) == run.num_heads  # the one token attends to itself
    at.selectbox(key=lines_keys.LINE_TOKEN).set_value(0).run()
    assert not at.exception and lines_drawn(at) == run.num_heads
