"""The Generate page through AppTest, on toy-induction (a tiny decoder: "k d m x b f k d m"
continues "x b f"): generate, step with the slider, the figures of a step, *Analyse prompt +
generation*; MiniLM (an encoder) gets a clear message; bad input gets a message and keeps the
last good generation; a stop keeps the tokens generated so far. (The app starts on MiniLM,
hence the model marker.)"""

from __future__ import annotations

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from mha_viz.capture import generation
from mha_viz.drawing import style as figure_style
from mha_viz.features.generate import controls as generate_keys
from mha_viz.features.generate import figures as gfig
from mha_viz.features.generate.page import MAX_NEW_TOKENS
from mha_viz.ui.kit import keys
from tests.app.helpers import generation_figures as _figures
from tests.app.helpers import on_generate, open_page, shown, start_app
from tests.app.helpers import run_generation as _generate

pytestmark = pytest.mark.model
TOY, PROMPT = "toy-induction", "k d m x b f k d m"
PROMPT_TOKENS = ["<bos>", *PROMPT.split()]  # toy-induction reads a [BOS] first
P = len(PROMPT_TOKENS)


def _tokens(axis_values) -> list[str]:
    return [figure_style.label_text(x) for x in axis_values]


def _continuation(at) -> list[str]:
    return [c.value for c in at.code]


def _chosen(bars: dict) -> str:
    trace = bars["data"][0]
    colours = trace["marker"]["color"]
    return figure_style.label_text(trace["y"][colours.index(gfig.CHOSEN_COLOUR)])


def test_generate_step_through_and_analyse_on_the_toy():
    at = _generate(on_generate(PROMPT))
    assert not at.error, [e.value for e in at.error]
    assert "x b f" in _continuation(at)  # the induction heads continue the pattern
    slider = at.slider(key=generate_keys.GEN_STEP)
    assert (slider.min, slider.max, slider.value) == (1, 3, 1)

    fig = _figures(at)  # step 1: the last prompt token (row P - 1) chose "x"
    assert _chosen(fig["bars"]) == "x"
    heads = fig["heads"]["data"][0]
    assert heads["y"] == [f"H{h}" for h in range(4)]  # one row per head (toy: no KV sharing)
    assert _tokens(heads["x"]) == PROMPT_TOKENS  # the context of the first step is the prompt
    rect = next(s for s in fig["matrix"]["layout"]["shapes"] if s["type"] == "rect")
    assert (rect["y0"], rect["y1"]) == (P - 1.5, P - 0.5)
    assert _tokens(fig["matrix"]["data"][0]["x"]) == PROMPT_TOKENS + ["x", "b", "f"]
    assert any("Step 1 of 3" in m.value for m in at.markdown)

    at.slider(key=generate_keys.GEN_STEP).set_value(3).run()
    assert not at.exception and not at.error
    fig = _figures(at)  # step 3: row P + 1 (the generated "b") chose "f"
    assert _chosen(fig["bars"]) == "f"
    assert _tokens(fig["heads"]["data"][0]["x"]) == PROMPT_TOKENS + ["x", "b"]
    ticks = fig["heads"]["layout"]["xaxis"]["ticktext"]
    assert [gfig.GENERATED_COLOUR in t for t in ticks] == [False] * P + [True, True]  # generated marked
    rect = next(s for s in fig["matrix"]["layout"]["shapes"] if s["type"] == "rect")
    assert rect["y0"] == P + 1 - 0.5
    lines = fig["lines"]["data"]
    assert [len(tr["y"]) for tr in lines] == [3, 3, 3]
    assert lines[0]["y"][0] == pytest.approx(1.0)  # step 1: all on the prompt
    assert lines[1]["y"][0] == pytest.approx(0.0)
    for p, g in zip(lines[0]["y"], lines[1]["y"]):
        assert p + g == pytest.approx(1.0, abs=1e-5)

    at.selectbox(key=generate_keys.GEN_LAYER).set_value(1).run()  # layer 1: the induction heads
    at.selectbox(key=generate_keys.GEN_HEAD).set_value(2).run()
    assert not at.exception and not at.error
    assert "Layer 1, head 2" in str(_figures(at)["matrix"]["layout"]["title"]["text"])

    at.button(key=generate_keys.GEN_ANALYSE).click().run()  # the whole sequence to every other page
    assert not at.exception, at.exception
    assert at.title[0].value == "Head view"
    assert at.text_area(key=keys.TEXT).value == PROMPT + " x b f"
    run = at.session_state[keys.CURRENT].run
    assert run.tokens == PROMPT_TOKENS + ["x", "b", "f"]
    assert (at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]) == (1, 2)

    open_page(at, "generate")  # back on the page: the generation is still there, same step
    assert "x b f" in _continuation(at)


def test_play_steps_through_to_the_end(monkeypatch):
    from mha_viz.features.generate import page as step_player

    monkeypatch.setattr(step_player, "PLAY_DELAY_S", 0.0)
    at = _generate(on_generate(PROMPT))
    at.button(key=generate_keys.GEN_PLAY).click().run()
    assert not at.exception, at.exception
    assert at.slider(key=generate_keys.GEN_STEP).value == 3
    assert _chosen(_figures(at)["bars"]) == "f"


def test_an_encoder_says_try_smollm2_and_offers_nothing_that_fails():
    at = start_app()  # minilm
    open_page(at, "generate")
    assert not at.exception and not at.error
    message = " ".join(shown(i.value) for i in at.info)
    assert "language-model head" in message and "smollm2" in message
    assert message.count("smollm2") == message.count("toy-induction") == 1, message  # each decoder named once
    keys_shown = [b.key for b in at.button]
    assert generate_keys.GEN_GO not in keys_shown  # nothing to press that would fail
    assert all(k.startswith(generate_keys.GEN_USE) for k in keys_shown if k and k.startswith("gen"))
    assert generate_keys.GEN_USE + "smollm2" in keys_shown


def test_bad_input_gives_a_message_and_keeps_the_last_generation(monkeypatch):
    at = _generate(on_generate(PROMPT))
    assert "x b f" in _continuation(at)

    at.number_input(key=generate_keys.GEN_MAX_NEW).set_value(100).run()  # toy-induction reads 64: 54 new at most
    assert any("At most 54 new tokens" in shown(w.value) for w in at.warning), [w.value for w in at.warning]
    assert generate_keys.GEN_GO not in [b.key for b in at.button]  # said before the button: none to press
    assert "x b f" in _continuation(at)

    at.number_input(key=generate_keys.GEN_MAX_NEW).set_value(3).run()
    at.text_area(key=keys.TEXT).input("   ").run()  # an empty prompt
    assert not at.exception
    assert any("prompt is empty" in i.value for i in at.info)
    assert "x b f" in _continuation(at) and generate_keys.GEN_GO not in [b.key for b in at.button]

    at.text_area(key=keys.TEXT).input(PROMPT).run()
    at.number_input(key=keys.TOKEN_LIMIT).set_value(P).run()  # the prompt fills the token limit
    assert not at.exception
    assert any("no room to generate" in shown(w.value) for w in at.warning), [w.value for w in at.warning]
    assert generate_keys.GEN_GO not in [b.key for b in at.button]
    assert "x b f" in _continuation(at)
    at.number_input(key=keys.TOKEN_LIMIT).set_value(512).run()

    import mha_viz_models.toy.model as toy
    real = toy.ToyInductionModel.forward

    def nan_logits(self, *args, **kwargs):  # the scores go bad while generating (not in capture)
        out = real(self, *args, **kwargs)
        if kwargs.get("use_cache"):
            out.logits = out.logits * float("nan")
        return out

    monkeypatch.setattr(toy.ToyInductionModel, "forward", nan_logits)
    at.number_input(key=generate_keys.GEN_SEED).set_value(1).run()  # other settings: not the stored generation's
    at.button(key=generate_keys.GEN_GO).click().run()
    assert not at.exception
    assert any("not finite" in shown(e.value) for e in at.error), [e.value for e in at.error]
    assert "x b f" in _continuation(at)
    assert any("another prompt, model or settings" in c.value for c in at.caption)


def test_a_stop_keeps_the_tokens_generated_so_far(monkeypatch):
    """Streamlit stops a running script by raising RerunException at its next element (a widget
    pressed while it runs): here after the second token."""
    at = _generate(on_generate(PROMPT), 3)  # a good generation first
    real = generation.generate

    def interrupted(*args, on_step=None, **kwargs):
        def step(gen):
            on_step(gen)
            if len(gen.steps) == 2:  # a rerun of this page, as a widget of it asks
                raise RerunException(RerunData(page_script_hash=get_script_run_ctx().page_script_hash))
        return real(*args, on_step=step, **kwargs)

    monkeypatch.setattr(generation, "generate", interrupted)  # what the page's plan runs
    at.number_input(key=generate_keys.GEN_MAX_NEW).set_value(5).run()
    at.button(key=generate_keys.GEN_GO).click().run()
    assert not at.exception, at.exception
    assert any("Stopped after 2 tokens" in w.value for w in at.warning), [w.value for w in at.warning]
    assert "x b" in _continuation(at)
    assert at.slider(key=generate_keys.GEN_STEP).max == 2
    assert any("stopped after 2 tokens" in c.value for c in at.caption)


@pytest.mark.parametrize("cap", [512, 4096])
def test_the_room_said_is_what_max_new_tokens_allows(monkeypatch, cap):
    """The page said "up to 8178 new tokens fit" over a *Max new tokens* field that stops at 1,024 (found trying the
    app as a new user): past the field's top it says a generation writes at most that."""
    monkeypatch.setenv("MHA_VIZ_MAX_TOKENS", str(cap))
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value("smollm2").run()
    at.text_area(key=keys.TEXT).input("The cat sat on the mat.").run()
    open_page(at, "generate")
    assert not at.exception and not at.error
    n = at.session_state[keys.CURRENT].run.n
    [said] = [shown(c.value) for c in at.caption if "new tokens fit" in c.value]
    assert f"so up to {cap - n:,} new tokens fit" in said, said
    assert (f"one generation writes at most {MAX_NEW_TOKENS:,}" in said) == (cap - n > MAX_NEW_TOKENS), said
    assert at.number_input(key=generate_keys.GEN_MAX_NEW).max == MAX_NEW_TOKENS
