"""Every page's defaults work on every bundled model (issue 90: Retrieval heads failed with its own defaults on
SmolLM2). With the app's default sentence and settings (not the suite's token cap) and nothing else chosen, each
page opens on MiniLM, SmolLM2 and toy-induction, and its primary button (the main area's first enabled one, where
the page draws one) is pressed: the page answers with a result, or with a message it gave before the click. An
error or an exception on opening, or after the click, fails, naming the page and the button; so does a legend whose
swatch is not its marks' colour, on any chart drawn, and a chart that leaves its colours to a part of Streamlit's Plotly
template the app drops (`charts.TEMPLATE`)."""

from __future__ import annotations

import pytest

from mha_viz.features.ablation import controls as ablation_keys
from mha_viz.features.generate import controls as generate_keys
from tests.app.helpers import PAGE_IDS, charts, left_to_the_template, open_box, open_page, start_app

pytestmark = pytest.mark.model

TOO_LONG_FOR_A_TEST = {"corpus"}  # its button reads the bundled corpus: tests/app/test_app_corpus.py runs it


def _said(at) -> set[str]:
    return {e.value for e in at.error}


def _misleading_legends(specs: list[dict]) -> list[str]:
    """The legend entries of the charts `specs` whose swatch is not their marks' colour (issue 90: "patched for real"
    had a blue swatch over bars red when positive and blue when negative): a trace in the legend whose marks take
    several colours. A legend is drawn for a trace that asks for it, or by default when two or more traces may be
    shown."""
    found = []
    for spec in specs:
        if spec.get("layout", {}).get("showlegend") is False:
            continue
        listed = [t for t in spec["data"] if t.get("showlegend") is not False and t.get("type") in ("bar", "scatter")]
        for trace in listed:
            if len(listed) < 2 and trace.get("showlegend") is not True:
                continue
            colours = trace.get("marker", {}).get("color")
            if hasattr(colours, "tolist"):
                colours = colours.tolist()
            if isinstance(colours, (list, tuple)) and len({str(c) for c in colours}) > 1:
                found.append(f"{spec.get('layout', {}).get('title', {}).get('text', '?')}: {trace.get('name')}")
    return found


def _uncoloured(specs: list[dict]) -> list[str]:
    return [m for spec in specs for m in left_to_the_template(spec)]


def _primary(at) -> str | None:
    """The key of the main area's first enabled primary button, if any."""
    for button in at.main.button:
        if button.key and not button.disabled and button.proto.type == "primary":
            return button.key
    return None


@pytest.mark.parametrize("model", ["minilm", "smollm2", "toy-induction"])
def test_every_page_answers_its_primary_button_with_its_defaults(model, monkeypatch):
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MAX_TOKENS", "MHA_VIZ_MODELS"):  # the app's own defaults, not the suite's
        monkeypatch.delenv(name, raising=False)
    at = start_app()
    at.selectbox(key="model_choice").set_value(model).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    pressed = []
    for page in PAGE_IDS:
        if at.selectbox(key="model_choice").value != model:  # a button before ("Start with toy-induction") switched
            at.selectbox(key="model_choice").set_value(model).run()
        open_page(at, page)
        assert not at.exception, (model, page, at.exception)
        before = _said(at)
        assert not before, (model, page, before)  # opening with the defaults fails nothing either
        specs = charts(at)  # every chart on the page, read once for both checks
        assert not _misleading_legends(specs), (model, page, _misleading_legends(specs))
        assert not _uncoloured(specs), (model, page, _uncoloured(specs))
        key = _primary(at) if page not in TOO_LONG_FOR_A_TEST else None
        if key is None:
            continue
        at.button(key=key).click().run()
        assert not at.exception, (model, page, key, at.exception)
        new = _said(at) - before
        assert not new, (model, page, key, new)  # a failure after the click, with every input at its default
        specs = charts(at)
        assert not _misleading_legends(specs), (model, page, key, _misleading_legends(specs))
        assert not _uncoloured(specs), (model, page, key, _uncoloured(specs))
        pressed.append(f"{page}:{key}")
    pages = {p.split(":")[0] for p in pressed}
    assert {"prediction", "generate"} <= pages or model == "minilm", pressed  # real work was asked for
    if model == "smollm2":
        assert "retrieval:retrieval_go" in pressed


def _warned(at) -> set[str]:
    return {e.value for e in at.warning} | _said(at)


def test_work_that_would_not_fit_is_refused_before_its_button(monkeypatch):
    """Refuse before the work, with what fits (issue 90: Retrieval heads and Heads behind a prediction refused only
    after the work). Under a 1 MiB capture budget, where the default sentence's analysis fits and the pages' heavier
    work does not, every page's primary button on SmolLM2 (Generate asked for 60 new tokens) answers with a result
    or with what the page said before the click; each refusal said before names what fits."""
    for name in ("MHA_VIZ_PUBLIC", "MHA_VIZ_MAX_TOKENS", "MHA_VIZ_MODELS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MHA_VIZ_MAX_CAPTURE_MB", "1")
    at = start_app()
    at.selectbox(key="model_choice").set_value("smollm2").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.session_state[generate_keys.GEN_MAX_NEW] = 60
    refused = {}
    for page in PAGE_IDS:
        open_page(at, page)
        assert not at.exception, (page, at.exception)
        before = _warned(at)
        refused.update({page: w for w in before if "would hold" in w})
        key = _primary(at) if page not in TOO_LONG_FOR_A_TEST else None
        if key is None:
            continue
        at.button(key=key).click().run()
        assert not at.exception, (page, key, at.exception)
        assert not _said(at) - before, (page, key, _said(at) - before)  # refused only after the work
    assert {"retrieval", "generate"} <= set(refused), refused  # both refused up front, with no button to press
    assert "at most" in refused["retrieval"] and "at most" in refused["generate"], refused
    open_page(at, "ablation")
    open_box(at, ablation_keys.IMP_OPEN)  # *Which heads matter*: a gradient pass over the budget
    assert "imp_go" not in [b.key for b in at.button]
    assert any("tokens fit" in w for w in _warned(at)), _warned(at)
