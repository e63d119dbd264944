"""*Open as notebook* through AppTest: on toy-induction and MiniLM, the notebook each of six pages
downloads (Head view, Model view, Head metrics, Switch heads off, Heads behind a prediction, Teaching)
runs offline with nbclient (a model's six in one kernel, its names cleared before each: `execute_together`)
and draws the page's figures: the same traces and arrays, read from the Plotly JSON on both sides, in the
page's order."""

from __future__ import annotations

import pytest
from streamlit.runtime import media_file_manager

from mha_viz import catalogue
from mha_viz.features.ablation import controls as ablation_keys
from mha_viz.features.head_view import controls as head_view_keys
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.teaching import controls as teaching_keys
from mha_viz.interventions import prediction
from mha_viz.ui.kit import keys
from tests.app.helpers import charts, open_box, open_page, start_app
from tests.notebook_figures import execute_together, figures_of, same_figures

pytestmark = pytest.mark.model

TEXTS = {"toy-induction": "q w e r t y u i q w e r t", "minilm": "The cat sat on the mat."}


@pytest.fixture
def downloads(monkeypatch):
    """(file name, the deferred download's callable) of every download button drawn, in order: what a
    click on it would return."""
    made = []
    add = media_file_manager.MediaFileManager.add_deferred

    def recording(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        made.append((file_name, data_callable))
        return add(self, data_callable, mimetype, coordinates, file_name, **kw)
    monkeypatch.setattr(media_file_manager.MediaFileManager, "add_deferred", recording)
    return made


def _notebook(at, downloads) -> bytes:
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    button = next(b for b in at.get("download_button") if b.proto.label == "Open as notebook")
    assert button.proto.icon == ":material/book_2:"
    made = [make for name, make in downloads if name and name.endswith(".ipynb")]
    downloads.clear()
    return made[-1]()  # the page's last run's


def _setup(at, page: str, model: str) -> None:
    """The page's own choices before its figures are read: importance computed (Switch heads off), the
    steps with scores (Teaching, toy-induction), the preset's heads found (a prediction, a decoder), *Why here?*
    opened (the Head view: a box built only while open, in the notebook only then)."""
    if page == "head_view":
        open_box(at, head_view_keys.WHY_OPEN)
    elif page == "ablation":
        open_box(at, ablation_keys.IMP_OPEN).button(key=ablation_keys.IMP_GO).click().run()
    elif page == "teaching" and model == "toy-induction":
        at.session_state[teaching_keys.TEACH_PART] = "3–6 · Scores to probabilities"
        at.run()
    elif page == "prediction" and model == "toy-induction":
        at.selectbox(key=keys.PRED_PRESET).set_value(prediction.INDUCTION.name).run()
        at.button(key=prediction_keys.PRED_GO).click().run()


PAGES = ("model_view", "head_view", "head_metrics", "teaching", "ablation", "prediction")  # the preset's text last


def test_every_page_said_to_be_exact_is_checked_here():
    assert set(PAGES) == {f.id for f in catalogue.features() if f.exact}


@pytest.mark.parametrize("model", list(TEXTS))
def test_each_pages_notebook_runs_offline_and_draws_the_pages_figures(model, downloads, tmp_path):
    at = start_app()
    at.selectbox(key=keys.MODEL_CHOICE).set_value(model).run()
    at.text_area(key=keys.TEXT).input(TEXTS[model]).run()
    drawn = {}
    for page in PAGES:
        open_page(at, page)
        _setup(at, page, model)
        drawn[page] = (charts(at), _notebook(at, downloads))
    assert drawn["head_view"][0] and drawn["model_view"][0] and drawn["ablation"][0]  # each page drew
    assert bool(drawn["prediction"][0]) == (model == "toy-induction")  # MiniLM, an encoder: refused, no figure
    folders = [tmp_path / page for page in drawn]
    for folder in folders:
        folder.mkdir()
    ran = execute_together([data for _, data in drawn.values()], folders)
    for (page, (figs, _)), nb in zip(drawn.items(), ran):
        same_figures(figs, figures_of(nb), f"{model}, {page}")
