"""One head, one link: a head picked on any page that shows one head is the head every other such
page opens on, and the link's `layer` and `head` say it, walked as a user would through every
such page in one session of toy-induction (issue 38). The pages are found from the source: every
call of `shared_head.pick_head` names its page's pickers, and the walk must cover them all."""

from __future__ import annotations

import ast
import re

import pytest

from mha_viz.export import shared_controls
from mha_viz.features.compare import controls as compare_keys
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.examples import controls as examples_keys
from mha_viz.features.generate import controls as generate_keys
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.qk import controls as qk_keys
from mha_viz.features.retrieval import controls as retrieval_keys
from mha_viz.features.teaching import controls as teaching_keys
from mha_viz.interventions import prediction
from mha_viz.ui.kit import keys
from tests import ui_sources
from tests.app.helpers import charts, open_page, shown, start_app

pytestmark = pytest.mark.model

TOY = "toy-induction"  # 2 layers (0, 1) × 4 heads
# every page that shows one head: its Layer and Head pickers, and where the page names the head it draws
PICKERS = {
    "head_view": (keys.HEAD_VIEW_LAYER, keys.HEAD_VIEW_HEAD, "charts"),
    "examples": (examples_keys.EXAMPLES_LAYER, examples_keys.EXAMPLES_HEAD, "charts"),
    "prediction": (prediction_keys.PRED_LAYER, prediction_keys.PRED_HEAD, "charts"),
    "compare": (compare_keys.CMP_LAYER, compare_keys.CMP_HEAD, "charts"),
    "generate": (generate_keys.GEN_LAYER, generate_keys.GEN_HEAD, "charts"),
    "teaching": (teaching_keys.TEACH_LAYER, teaching_keys.TEACH_HEAD, "subheader"),
    "qk": (qk_keys.QK_LAYER, qk_keys.QK_HEAD, "caption"),
    "retrieval": (retrieval_keys.RETRIEVAL_LAYER, retrieval_keys.RETRIEVAL_HEAD, "charts"),
}


def test_the_walk_covers_every_picker_of_the_shared_head():
    """Each `shared_head.pick_head(ids, heads, keys.A, keys.B, …)` in the UI's source is a page's
    pickers of the shared head: the walk below visits every one."""
    found = set()
    for path in ui_sources.MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pick_head"
                    and ast.unparse(node.func.value) == "shared_head"):
                found.add(tuple(ui_sources.key_value(a) for a in node.args[2:4]))
    assert found == {(layer, head) for layer, head, _ in PICKERS.values()}


def _named(at, where: str) -> str:
    """The text where a page names the head it draws: its charts' titles, subheaders or captions."""
    if where == "charts":
        return " ".join(str(c["layout"].get("title", {}).get("text", "")) for c in charts(at))
    return shown(" ".join(e.value for e in getattr(at, where)))


def _shows(at, page: str, row: int, head: int) -> None:
    """`page` is on screen with head `head` of layer row `row` in its pickers and its figures, and
    the link says so (toy-induction's rows are its layer numbers; layer 0 and head 0 are left out
    of a link as the defaults, except on Compare once a head is chosen)."""
    layer_key, head_key, where = PICKERS[page]
    assert not at.exception and not at.error, (page, at.exception, [e.value for e in at.error])
    assert (at.selectbox(key=layer_key).value, at.selectbox(key=head_key).value) == (row, head), page
    assert re.search(rf"\blayer {row},? head {head}\b", _named(at, where), re.IGNORECASE), (page, _named(at, where))
    assert (at.query_params.get("layer", "0"), at.query_params.get("head", "0")) == (str(row), str(head)), (
        page, at.query_params)


def _pick(at, page: str, row: int, head: int) -> None:
    layer_key, head_key, _ = PICKERS[page]
    at.selectbox(key=layer_key).set_value(row)
    at.selectbox(key=head_key).set_value(head).run()
    _shows(at, page, row, head)


def test_a_head_picked_on_any_page_is_the_head_of_every_page_and_of_the_link(fresh_cache):
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(TOY).run()
    at.text_area(key=keys.TEXT).input(prediction.INDUCTION.clean).run()
    # what the pages draw from: a corpus (Head examples), a generation, a prediction, sentence B
    open_page(at, "corpus")
    at.number_input(key=corpus_keys.CORPUS_TOKENS).set_value(24).run()
    at.toggle(key=corpus_keys.CORPUS_IMPORTANCE).set_value(False).run()
    at.button(key=corpus_keys.CORPUS_GO).click().run()
    open_page(at, "generate")
    at.number_input(key=generate_keys.GEN_MAX_NEW).set_value(2).run()
    at.button(key=generate_keys.GEN_GO).click().run()
    open_page(at, "compare")
    at.text_area(key=compare_keys.CMP_TEXT_B).input(prediction.INDUCTION.corrupted).run()
    open_page(at, "retrieval")  # a needle of letters the toy copies: its look at the needle names the head
    at.number_input(key=retrieval_keys.RETRIEVAL_LENGTH).set_value(36).run()
    at.session_state[retrieval_keys.RETRIEVAL_DEPTHS] = [25]
    at.text_input(key=retrieval_keys.RETRIEVAL_NEEDLE).input("q w e r t y u i").run()
    at.text_input(key=retrieval_keys.RETRIEVAL_QUESTION).input("q w").run()
    at.button(key=retrieval_keys.RETRIEVAL_GO).click().run()
    open_page(at, "prediction")
    at.text_area(key=shared_controls.PRED_CORRUPTED).input(prediction.INDUCTION.corrupted).run()
    at.button(key=prediction_keys.PRED_GO).click().run()
    # a new result opens on the head the estimate puts first: it is the shared head now
    top = at.session_state[keys.SEL_LAYER], at.session_state[keys.SEL_HEAD]
    _shows(at, "prediction", *top)
    open_page(at, "head_view")
    _shows(at, "head_view", *top)

    # a head picked on each page in turn is the one the next page opens on, and the link's
    walk = ["head_view", "examples", "prediction", "compare", "generate", "teaching", "qk", "retrieval", "head_view"]
    heads = [(1, 2), (0, 3), (1, 1), (0, 2), (1, 3), (0, 1), (1, 0), (0, 2)]
    for page, following, head in zip(walk, walk[1:], heads):
        open_page(at, page)
        _pick(at, page, *head)
        open_page(at, following)
        _shows(at, following, *head)

    # Head examples keeps it when the model is chosen again (it once opened on L0H0)
    open_page(at, "examples")
    at.selectbox(key=keys.MODEL_CHOICE).set_value("minilm").run()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(TOY).run()
    _shows(at, "examples", 0, 2)
