"""One token cap on every path: in public mode (MHA_VIZ_MAX_TOKENS=32) a 300-word text is opened on
every page, every button is pressed and every text-reading choice is tried, with a spy on the
models' token embeddings (every forward pass of every model starts there, gradient passes and
lean capture included). No forward pass may read more than 32 tokens. The local sweep (toy-induction)
also checks that every page renders for the toy without an error (it was tests/app/test_toy_pages.py)."""

from __future__ import annotations

import pytest
import torch

import mha_viz
from mha_viz.features.ablation import controls as ablation_keys
from tests.app.helpers import PAGE_IDS, app_page_ids, open_box, open_page, open_with_text, shown, start_app

pytestmark = pytest.mark.model
CAP = 32
NOVEL = " ".join(["The keeper climbed the narrow stairs, lit the lamp and watched the boats come home."] * 20)
LETTERS = " ".join("the keeper climbed the narrow stairs and lit the lamp".replace(" ", "") * 7)  # for toy-induction
TEXTS = {"minilm": NOVEL, "toy-induction": LETTERS}  # 300 words; 300 letters


@pytest.fixture()
def spy(monkeypatch):
    """The length of every sequence any model embeds, in order."""
    seen: list[int] = []
    real = torch.nn.Embedding.forward

    def forward(self, input):
        seen.append(int(input.shape[-1]))
        return real(self, input)

    monkeypatch.setattr(torch.nn.Embedding, "forward", forward)
    return seen


def _buttons(at) -> list[str]:
    return [b.key for b in at.button if b.key and not b.disabled]


def _press_everything(at, page: str, skip: tuple[str, ...] = ()) -> None:
    """Press every button of the page but `skip` (re-opening the page after each, since some
    navigate or change the model), and try the choices that change which text is read."""
    for key in _buttons(at):
        if key in skip:
            continue
        open_page(at, page)
        if key in _buttons(at):
            at.button(key=key).click().run()
            assert not at.exception, (page, key, at.exception)
    open_page(at, page)
    if page == "ablation":
        open_box(at, ablation_keys.IMP_OPEN)  # *Which heads matter*: built only while open
        if "imp_k" in [s.key for s in at.slider]:  # after importance: switch off the 3 least important
            at.slider(key="imp_k").set_value(3).run()
            at.button(key="imp_apply").click().run()
        at.radio(key="ablate_mode").set_value(at.radio(key="ablate_mode").options[1]).run()
        at.radio(key="imp_source").set_value("a bundled sample paragraph").run()
        for key in ("imp_go", "prune_go"):
            if key in _buttons(at):
                at.button(key=key).click().run()
        if any(t.key == "ablation_other" for t in at.text_input):  # an embedding model: a second sentence
            at.text_input(key="ablation_other").input(NOVEL).run()
    if page == "similarity":
        from mha_viz import metrics
        labels = at.selectbox(key="sim_kind").options  # the kinds this run supports, by label
        for kind in [k for k, m in metrics.SIMILARITIES.items() if m.label in labels]:
            at.selectbox(key="sim_kind").set_value(kind).run()
    if page == "across_layers":
        for method in at.radio(key="layers_method").options:
            at.radio(key="layers_method").set_value(method).run()
    assert not at.exception, (page, at.exception)


def _visit_everything(at, model: str, cap: int, skip: tuple[str, ...] = (), clean: bool = False) -> None:
    """Open every page with `model` on its text and press everything; `clean`: each page also opens
    without an error (every page renders for the model)."""
    at.selectbox(key="model_choice").set_value(model).run()
    at.text_area(key="text").input(TEXTS[model]).run()
    assert any(f"first {cap}" in w.value for w in at.warning)  # the text is longer than the cap
    for page in PAGE_IDS:
        open_page(at, page)
        assert not (clean and at.error), (page, [e.value for e in at.error])
        _press_everything(at, page, skip)
        at.selectbox(key="model_choice").set_value(model).run()  # "Start with toy-induction" switches
        at.text_area(key="text").input(TEXTS[model]).run()


def _assert_capped(spy: list[int], cap: int) -> None:
    assert spy, "the spy saw no forward pass"
    assert max(spy) <= cap, f"a forward pass read {max(spy)} tokens; the cap is {cap}"
    assert spy.count(cap) > 10  # the text reached the cap on many paths: the spy watched real work


@pytest.mark.parametrize("model", ["minilm", "toy-induction"])  # an encoder and a decoder with an LM head
def test_no_page_or_button_reads_past_the_cap(public, spy, model):
    at = start_app()
    _visit_everything(at, model, CAP)
    _assert_capped(spy, CAP)


def test_the_sessions_token_limit_holds_locally_too(spy, monkeypatch):
    """Locally the cap is the sidebar's Token limit, which the app sets around every rerun: no page reads
    past it (the Whole text page, which scanned past it on purpose, is retired). The same sweep checks that
    every page of the app renders for toy-induction (no exception, no error) and its Model facts."""
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MAX_TOKENS", "MHA_VIZ_MODELS"):
        monkeypatch.delenv(name, raising=False)
    assert len(PAGE_IDS) >= 7 and set(PAGE_IDS) == set(app_page_ids())  # the sweep is every page of the app
    at = start_app()
    at.number_input(key="token_limit").set_value(24).run()
    _visit_everything(at, "toy-induction", 24, clean=True)
    _assert_capped(spy, 24)
    open_page(at, "model_facts")
    facts = dict(zip(at.table[0].value["fact"], at.table[0].value["value"]))
    assert shown(facts["model"]) == "toy-induction"
    assert facts["layers"] == "2" and facts["attention heads per layer"] == "4"
    assert facts["attention implementation"].startswith("ours")


def test_a_text_the_model_cannot_read_gets_a_notice():
    """toy-induction reads letters: English prose is mostly <unk>, and the app says so (with
    what the model reads); letters get no notice."""
    at = open_with_text("model_view", "The cat sat on the mat because it was tired.", "toy-induction")
    [notice] = [w.value for w in at.warning if "unknown to" in w.value]
    assert "toy\\-induction" in notice and "\\<unk\\>" in notice and "It reads letters a–z" in notice
    at.text_area(key="text").input("q w e r t y q w e r t y").run()
    assert not any("unknown to" in w.value for w in at.warning)


def test_emoji_on_minilm_count_the_texts_own_tokens_and_say_what_it_reads():
    """MiniLM's WordPiece vocabulary reads most emoji as [UNK]: the notice counts the text's own tokens (not [CLS]
    and [SEP], which the tokenizer adds), as the tokenizer itself splits them, and says what the model reads."""
    text = "Great 😀🎉🔥"
    tokenizer = mha_viz.load_model("minilm", device="cpu").tokenizer
    ids = tokenizer(text)["input_ids"]
    own = [i for i in ids if i not in set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}]
    unknown = own.count(tokenizer.unk_token_id)
    assert (len(ids), len(own), unknown) == (4, 2, 1)  # [CLS] great [UNK] [SEP]: half the text is unknown
    at = open_with_text("head_view", text)
    [notice] = [shown(w.value) for w in at.warning if "unknown to" in w.value]
    assert notice.startswith(f"{unknown} of the text's {len(own)} tokens is unknown to minilm ([UNK])"), notice
    assert "It reads English words" in notice and ".." not in notice and "encoder" not in notice, notice


def test_the_token_limit_box_says_where_the_model_reads_fewer():
    """Issue 90: the Token limit box shows the session's cap (32,768) on MiniLM, which reads 512: the sidebar says
    the model's own limit under it, and says nothing once the cap is the lower."""
    at = open_with_text("model_view", "The cat sat on the mat.", "minilm")

    def said(at) -> list[str]:
        return [c.value for c in at.sidebar.caption if "tokens at most" in c.value]
    at.number_input(key="token_limit").set_value(32768).run()
    assert said(at) == ["minilm reads 512 tokens at most: texts are cut there."]
    at.number_input(key="token_limit").set_value(300).run()
    assert not said(at)
