"""The pages a half-precision model reaches beyond the head grid, through AppTest, in bfloat16 against
float32: Head view, Teaching (every part), Queries and keys, Compare, Head examples (after a corpus
job) and Heads behind a prediction (the estimate, attribution, then real patching), on
toy-induction and on SmolLM2. Each page opens in bfloat16 with no exception and no error element,
and every number of its figures is within bfloat16's rounding of float32's.

One AppTest per model and precision visits every page once with the same inputs (`visit`,
cached), and one test per page compares what the two drew: the same figures (titles with their
numbers as placeholders), the same traces and array shapes, the titles' whole numbers (a layer, a
token, a document) equal, and the values within:
- PROBABILITY_TOLERANCE = 0.05 for an array whose float32 values lie in [0, 1] (probabilities,
  shares, normalised weights). bfloat16 keeps 8 significant bits (a rounding moves a value by at
  most 2⁻⁹ of it), the layers compound that, and the load check allows a layer's probabilities
  2e-2 of float32's (tests/app/test_precision_app.py); measured here: at most 0.025 (a SmolLM2
  document's weights on Head examples).
- TOLERANCE = 10 % of the array's largest float32 magnitude (at least 1) for the rest:
  activations, scores, logits, attributions. Measured: at most 4 % (z = A V of SmolLM2's L3H4:
  1.246 against 1.195, its sink key's weight 0.449 against 0.462).
A defect of the half-precision path moves values by their own size (planted in turn, each page's
test failed: heads swapped in the capture, the 1/√d_k scale dropped, keys off by 1.5, the corpus's
weights not renormalised, attribution scaled by 1.3, the precision never reaching the loader).

What rounding legitimately changes is not compared value by value: the head is chosen once (Head
view, and again on the prediction page, which opens on its top head) so no page picks its head by
an argmax; bars sorted by value are paired by label, and Head examples' top documents by document
(two of all but equal score may swap, or one move past the last place shown: at most a quarter);
a histogram's counts (a value may cross a bin edge) by their number and mean; the heads ringed
where the estimate and real patching differ by more than DISAGREE (each precision must ring what its
own grids say) up to the heads whose float32 difference lies within bfloat16's tolerance of DISAGREE
(on a CPU without native bfloat16 SmolLM2 rang 2 heads where float32 rang 1); the colour of a top
document's figure (each row scaled to its largest weight) by shape, its weights compared; the
queries-and-keys map's PCA coordinates by shape (its axes flip or turn when two variances are
close); the rank correlation in a title (Spearman's ρ over SmolLM2's 270 heads went from 0.945
to 0.63: most heads restore about 0, and rounding reorders those) left out, Pearson's r compared.

SmolLM2 is slow on 2 CPU cores in bfloat16 (no native support): its texts are short and its corpus
is 8 sentences of at most 12 tokens. The file took 3 min 48 s on 2 cores shared with other jobs
(toy-induction alone: about 20 s), most of it SmolLM2's two loads and real patching; 39 s on a quiet 2-core
machine (94 s before) since the visits read SmolLM2's GGUF file converted once (`_share_converted_weights`)."""

from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

from mha_viz.corpus.store import statistics_store
from mha_viz.features.compare import controls as compare_keys
from mha_viz.features.corpus import controls as corpus_keys
from mha_viz.features.prediction import controls as prediction_keys
from mha_viz.features.prediction.figures import MARK
from mha_viz.features.teaching import controls as teaching_keys
from mha_viz.interventions import prediction
from mha_viz.interventions.estimate import DISAGREE
from mha_viz.ui.kit import keys
from mha_viz_models.cache_folder import cache_root
from tests.app.helpers import app_test, charts, open_page
from tests.tolerance import assert_same_above

pytestmark = pytest.mark.model
PROBABILITY_TOLERANCE = 0.05  # an array of values in [0, 1] (probabilities, shares): absolute
TOLERANCE = 0.1  # any other array: × its largest float32 magnitude (at least 1); see the module doc
MODELS = {  # model: (text, sentence B of Compare, the head chosen, preset of the prediction page)
    "toy-induction": ("a b c d e f a b c d e", "a b c d e f a b c d f", (1, 2), prediction.INDUCTION),
    "smollm2": ("The cat sat on the mat. The cat", "The dog sat on the mat. The dog", (3, 4), prediction.IOI),
}
CORPUS = [  # the corpus of Head examples: letters for the toy, short sentences for SmolLM2
    "q w e r t y q w e r t y", "a s d f a s d f g h", "z x c v b n z x c v", "p o i u y t p o i u",
    "m n b v c x m n b v", "l k j h g f l k j h", "q a z w s x q a z w", "e d c r f v e d c r",
]
SENTENCES = [
    "The lamp was lit before the boats came home.", "She read the letter twice and put it away.",
    "Rain fell on the old mill all night long.", "The keeper climbed the narrow stairs again.",
    "Two otters drifted past the bridge at dawn.", "He counted the coins and then counted them again.",
    "The market opened early on the first warm day.", "A small dog waited by the gate for its owner.",
]
PAGES = ("head_view", "teaching", "qk", "compare", "examples", "prediction")
GRIDS = ("Estimated restored fraction", "Restored fraction (patching")  # the grids whose |difference| rings heads
SHAPE_ONLY = {  # figures (by the start of their title) whose arrays, or title, are compared by shape only
    "Queries (●) and keys (◆)": ("x", "y", "title"),  # PCA axes: see the module doc
    "Document ": ("z",),  # each row scaled to its largest weight for colour; customdata holds the weights
}


def _outcome(at) -> dict:
    """What a page run shows that this file compares: exceptions, errors and figures."""
    return {"exception": [str(e.value) for e in at.exception], "error": [e.value for e in at.error],
            "figures": charts(at)}


def _share_converted_weights(cache: Path) -> None:
    """Before the cache folder is set to `cache`: let it read SmolLM2's GGUF file converted once in the
    usual cache folder (`loading.gguf_cache`; converting it again is 20 to 30 s a visit, and the
    conversion has its own test, tests/models/test_capture.py): its `gguf` folder is a link to that
    one, the rest of it empty."""
    shared = cache_root() / "gguf"
    shared.mkdir(parents=True, exist_ok=True)
    (cache / "gguf").symlink_to(shared, target_is_directory=True)


@functools.cache
def visit(model: str, dtype: str) -> dict[str, list[dict]]:
    """Open every page of PAGES on `model` in `dtype`, one AppTest for all: {page: [outcome of
    each state of the page drawn]}. Corpus results go to a folder of their own (converted GGUF weights
    are shared: `_share_converted_weights`)."""
    text, text_b, (layer, head), preset = MODELS[model]
    shown: dict[str, list[dict]] = {page: [] for page in PAGES}
    with tempfile.TemporaryDirectory() as cache, pytest.MonkeyPatch.context() as mp:
        _share_converted_weights(Path(cache))
        mp.setenv("MHA_VIZ_CACHE_DIR", cache)
        statistics_store.cache_clear()
        at = app_test()
        at.query_params.update({"model": model, "dtype": dtype})  # loaded in this precision from the start
        at.run()
        assert not at.exception, at.exception
        assert at.session_state[keys.CURRENT].model.precision == dtype
        at.text_area(key=keys.TEXT).input(text).run()

        open_page(at, "head_view")
        at.selectbox(key=keys.HEAD_VIEW_LAYER).set_value(layer)
        at.selectbox(key=keys.HEAD_VIEW_HEAD).set_value(head).run()  # chosen: every page opens on it
        shown["head_view"].append(_outcome(at))

        open_page(at, "teaching")
        for part in at.button_group(key=teaching_keys.TEACH_PART).options:
            at.button_group(key=teaching_keys.TEACH_PART).set_value(part).run()
            shown["teaching"].append(_outcome(at))

        open_page(at, "qk")
        shown["qk"].append(_outcome(at))

        open_page(at, "compare")
        at.text_area(key=compare_keys.CMP_TEXT_B).input(text_b).run()
        shown["compare"].append(_outcome(at))

        documents = os.path.join(cache, "documents.txt")
        with open(documents, "w", encoding="utf-8") as f:
            f.write("\n".join(CORPUS if model == "toy-induction" else SENTENCES) + "\n")
        open_page(at, "corpus")
        source = at.radio(key=corpus_keys.CORPUS_SOURCE)
        source.set_value(source.options[-1]).run()  # a path
        at.text_input(key=corpus_keys.CORPUS_PATH).input(documents).run()
        at.number_input(key=corpus_keys.CORPUS_TOKENS).set_value(12).run()
        at.toggle(key=corpus_keys.CORPUS_IMPORTANCE).set_value(False).run()
        at.button(key=corpus_keys.CORPUS_GO).click().run()
        assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
        open_page(at, "examples")
        shown["examples"].append(_outcome(at))

        open_page(at, "prediction")
        at.selectbox(key=keys.PRED_PRESET).set_value(preset.name).run()
        at.button(key=prediction_keys.PRED_GO).click().run()  # the estimate and direct logit attribution
        at.selectbox(key=prediction_keys.PRED_LAYER).set_value(layer)  # the panel opened on the top head: back to ours
        at.selectbox(key=prediction_keys.PRED_HEAD).set_value(head).run()
        shown["prediction"].append(_outcome(at))
        at.button(key=prediction_keys.PRED_REAL_GO).click().run()  # real patching
        shown["prediction"].append(_outcome(at))
        statistics_store.cache_clear()
    return shown


NUMBER = re.compile(r"[-+]?\d*\.\d+|[-+]?\d+")
DOCUMENT = re.compile(r"Document (\d+) · ")  # Head examples: one figure per top document
RANKS = re.compile(r"Spearman ρ = [-+]?\d*\.\d+")  # a rank correlation: left out of the title's numbers


def _title(figure: dict) -> str:
    return figure["layout"].get("title", {}).get("text", "")


def _numbers(values) -> np.ndarray | None:
    """`values` as a float array, or None when it is not numeric (labels, colours)."""
    if values is None:
        return None
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return None


def _bound(full: np.ndarray) -> float:
    """How far half precision may move the values of the float32 array `full` (module doc)."""
    full = np.nan_to_num(np.asarray(full, dtype=float))
    if full.size and full.min() >= 0 and full.max() <= 1:
        return PROBABILITY_TOLERANCE
    return TOLERANCE * max(1.0, float(np.abs(full).max()))


def _close(full, half, where: str) -> float:
    """Assert the numbers `half` are within the tolerance of `full`; returns the largest gap."""
    a, b = np.asarray(full, dtype=float), np.asarray(half, dtype=float)
    assert a.shape == b.shape, (where, a.shape, b.shape)
    if not a.size:
        return 0.0
    assert np.array_equal(np.isnan(a), np.isnan(b)), where
    a, b = np.nan_to_num(a), np.nan_to_num(b)
    bound = _bound(a)
    gap = float(np.abs(a - b).max())
    assert gap <= bound, f"{where}: bfloat16 is {gap:.3g} from float32 (bound {bound:.3g})"
    return gap


def _title_numbers(full: str, half: str, where: str) -> list[float]:
    """The titles' numbers: whole numbers (a layer, a token, a document) equal, the others within
    the tolerance of each; a rank correlation left out (rounding reorders values near 0)."""
    a, b = NUMBER.findall(RANKS.sub("", full)), NUMBER.findall(RANKS.sub("", half))
    assert len(a) == len(b), where
    gaps = []
    for x, y in zip(a, b):
        if "." in x:
            gaps.append(_close([float(x)], [float(y)], f"{where} (title: {x} against {y})"))
        else:
            assert x == y, f"{where} (title: {x} against {y})"
    return gaps


def _labelled(values, labels, where: str, other_values, other_labels) -> float:
    """Bars with a label each (sorted by value: rounding may swap two near-equal ones, or move one
    past the last place shown) compared label by label; at least three quarters in both."""
    mine, theirs = dict(zip(labels, values)), dict(zip(other_labels, other_values))
    both = [k for k in mine if k in theirs]
    assert len(both) >= 0.75 * len(mine), (where, labels, other_labels)
    return _close([mine[k] for k in both], [theirs[k] for k in both], where)


def _histogram(tf: dict, th: dict, where: str) -> float | None:
    """A histogram's counts (a bar trace of whole numbers over evenly spaced bins): a value that
    rounding moves over a bin edge moves a count, so the number of values and their mean are compared."""
    x, yf, yh = _numbers(tf.get("x")), _numbers(tf.get("y")), _numbers(th.get("y"))
    if tf["type"] != "bar" or x is None or yf is None or yh is None or x.ndim != 1 or len(x) < 3:
        return None
    if not (np.all(yf == np.round(yf)) and np.all(yh == np.round(yh)) and np.allclose(np.diff(x), x[1] - x[0])):
        return None
    assert yf.sum() == yh.sum() and yf.sum() > 0, where
    return _close([x @ yf / yf.sum()], [x @ yh / yh.sum()], where + " (histogram's mean)")


def _trace(tf: dict, th: dict, where: str, shape_only: tuple[str, ...]) -> list[float]:
    """One trace of float32 (tf) against bfloat16's (th); the gaps of its numeric arrays."""
    assert tf["type"] == th["type"], where
    hist = _histogram(tf, th, where)
    if hist is not None:
        return [hist]
    gaps = []
    axes = [a for a in ("x", "y", "z", "customdata") if a in tf]
    numeric = {a: _numbers(tf[a]) is not None and _numbers(th.get(a)) is not None for a in axes}
    for axis in axes:
        here = f"{where} {axis}"
        if axis in shape_only:
            assert np.shape(tf[axis]) == np.shape(th[axis]), here
        elif numeric[axis]:
            labels = next((a for a in ("y", "x") if a != axis and a in tf and not numeric[a]), None)
            if tf["type"] == "bar" and labels and tf[labels] != th[labels]:  # bars sorted by value
                gaps.append(_labelled(tf[axis], tf[labels], here, th[axis], th[labels]))
            else:
                gaps.append(_close(tf[axis], th[axis], here))
        elif axis != "customdata" and not (tf["type"] == "bar" and any(numeric.values())):
            assert tf[axis] == th[axis], here  # labels: the same (a bar's, paired above)
    return gaps


def _document(figure: dict) -> int | None:
    found = DOCUMENT.match(_title(figure))
    return int(found[1]) if found else None


def _runs(figures: list[dict]) -> list[list[dict]]:
    """The figures in runs: each run of top documents' figures one, every other figure one."""
    runs: list[list[dict]] = []
    for f in figures:
        if runs and _document(f) is not None and _document(runs[-1][-1]) is not None:
            runs[-1].append(f)
        else:
            runs.append([f])
    return runs


def _by_document(full: list[dict], half: list[dict]) -> tuple[list[dict], list[dict]]:
    """Head examples' top documents paired by document: rounding may swap two documents of all but
    equal score, or move one past the last place shown. Those shown in one precision only are left
    out, at most a quarter of a run."""
    runs_f, runs_h = _runs(full), _runs(half)
    if len(runs_f) != len(runs_h):
        return full, half  # the title check says what differs
    paired_f, paired_h = [], []
    for a, b in zip(runs_f, runs_h):
        if _document(a[0]) is None or _document(b[0]) is None:
            paired_f += a
            paired_h += b
            continue
        in_b = {_document(f): f for f in b}
        both = [f for f in a if _document(f) in in_b]
        assert len(both) >= 0.75 * len(a), ([_title(f) for f in a], [_title(f) for f in b])
        paired_f += both
        paired_h += [in_b[_document(f)] for f in both]
    return paired_f, paired_h


def _grids(figures: list[dict]) -> list[np.ndarray] | None:
    """The estimate's and real patching's grids (layers, heads) when both are drawn, else None."""
    found = [next((np.asarray(f["data"][0]["z"], dtype=float) for f in figures if _title(f).startswith(start)), None)
             for start in GRIDS]
    return None if any(g is None for g in found) else found


def _ringed(trace: dict, shape: tuple[int, int]) -> np.ndarray:
    """The heads a ring trace (`MARK`) circles, as a (layers, heads) mask."""
    mask = np.zeros(shape, dtype=bool)
    mask[np.asarray(trace["y"], dtype=int), np.asarray(trace["x"], dtype=int)] = True
    return mask


def _rings(tf: dict, th: dict, full: list[np.ndarray], half: list[np.ndarray], where: str) -> None:
    """The heads ringed where |estimate − real| > DISAGREE: each precision rings what its own grids
    say, and the two agree on every head whose float32 difference lies beyond bfloat16's tolerance
    of DISAGREE (the sum of the two grids' tolerances); a head within it may be ringed in one only."""
    score = np.abs(full[0] - full[1])
    for trace, (e, r) in ((tf, full), (th, half)):
        np.testing.assert_array_equal(_ringed(trace, score.shape), np.abs(e - r) > DISAGREE, where)
    assert_same_above(_ringed(tf, score.shape), _ringed(th, score.shape), score, DISAGREE,
                      _bound(full[0]) + _bound(full[1]), where)


def compare_figures(full: list[dict], half: list[dict], where: str) -> list[float]:
    """Assert the figures agree (module doc); returns the largest gap of each numeric array."""
    full, half = _by_document(full, half)
    grids = _grids(full), _grids(half)
    assert [NUMBER.sub("#", _title(f)) for f in full] == [NUMBER.sub("#", _title(f)) for f in half], where
    gaps = []
    for f, h in zip(full, half):
        title = _title(f)
        here = f"{where} · {title!r}"
        shape_only = next((axes for start, axes in SHAPE_ONLY.items() if title.startswith(start)), ())
        if "title" not in shape_only:
            gaps += _title_numbers(title, _title(h), here)
        rings = [[t for t in fig["data"] if t.get("name") == MARK] for fig in (f, h)]
        assert bool(rings[0]) == bool(rings[1]) or None not in grids, here  # with both grids, either may ring none
        if rings[0] or rings[1]:
            empty = {"x": [], "y": []}
            _rings((rings[0] or [empty])[0], (rings[1] or [empty])[0], *grids, f"{here} ringed heads")
        plain = [[t for t in fig["data"] if t.get("name") != MARK] for fig in (f, h)]
        assert len(plain[0]) == len(plain[1]), here
        for i, (tf, th) in enumerate(zip(*plain)):
            gaps += _trace(tf, th, f"{here} trace {i}", shape_only)
    return gaps


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.parametrize("model", list(MODELS))
def test_the_page_in_bfloat16_draws_float32s_figures(model, page):
    full, half = visit(model, "float32")[page], visit(model, "bfloat16")[page]
    assert half and len(half) == len(full)
    gaps = []
    for step, (f, h) in enumerate(zip(full, half)):
        assert not h["exception"] and not h["error"], (page, step, h["exception"], h["error"])
        assert not f["exception"] and not f["error"], (page, step, f["exception"], f["error"])
        gaps += compare_figures(f["figures"], h["figures"], f"{model} {page} step {step}")
    assert gaps, "no numbers compared"
    assert max(gaps) > 0, "bfloat16 drew float32's numbers exactly: it did not compute in bfloat16"
