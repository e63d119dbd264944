"""The bundled lesson's step on switching heads off (toy-induction): every number its note quotes, computed
again with the library (the live view's `ablation_outcome`) and, for the parts of the loss the note explains,
with per-prediction cross-entropies from the model's own logits under the same head mask."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import mha_viz
from mha_viz.export import lesson
from mha_viz.interventions import ablation_outcome as outcome
from mha_viz.text.loss_inputs import prepare
from mha_viz_models.reading.masking import head_mask

pytestmark = pytest.mark.model
UNPREDICTABLE = 10  # the first nine letters and the q that starts the second round: nothing repeated yet


@pytest.fixture(scope="module")
def step():
    steps = json.loads(lesson.bundled()["attention-head-by-head"])["steps"]
    found = [s for s in steps if s["page"] == "ablation"]
    assert len(found) == 1
    return found[0]


@pytest.fixture(scope="module")
def toy():
    return mha_viz.load_model("toy-induction", device="cpu")


def _keep(toy, *off) -> np.ndarray:
    keep = np.ones((toy.num_layers, toy.num_heads), bool)
    for layer, head in off:
        keep[layer, head] = False
    return keep


def _per_prediction(toy, text: str, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each next-token prediction's cross-entropy (n − 1,), its probabilities (n − 1, V))."""
    ids = prepare(toy, text, None).ids
    with torch.no_grad(), head_mask(toy, torch.as_tensor(keep, dtype=torch.float32), None, None):
        logits = toy.hf_model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits[0, :-1]
    return (F.cross_entropy(logits.float(), ids[0, 1:], reduction="none").numpy(),
            torch.softmax(logits.float(), -1).numpy())


def _top(out) -> dict[str, float]:
    return dict(out.top[0][1])


def test_every_number_of_the_switching_off_step_is_what_the_model_gives(step, toy):
    note, text = step["note"], step["view"]["text"]
    base = outcome.unablated(toy, text)
    assert f"the loss is {base.loss:.4f}" in note and f"*q*, at {_top(base)['q']:.1%}" in note

    prev = outcome.ablated(toy, text, _keep(toy, (0, 1)), base=base)
    assert f"rises to {prev.loss:.4f} ({prev.loss - base.loss:+.4f}) and *q* falls to {_top(prev)['q']:.1%}" in note
    layer1 = outcome.ablated(toy, text, _keep(toy, *[(1, h) for h in range(toy.num_heads)]), base=base)
    assert f"rises to {layer1.loss:.4f} ({layer1.loss - base.loss:+.4f})" in note and "q" not in _top(layer1)

    one = outcome.ablated(toy, text, _keep(toy, (1, 1)), base=base)
    assert f"*q* stays at {_top(one)['q']:.1%}" in note
    assert one.loss < base.loss  # the surprise the note explains
    assert f"falls, to {one.loss:.4f} ({one.loss - base.loss:+.4f})" in note

    # why: the mean over the predictions, the first ten unpredictable
    on, p_on = _per_prediction(toy, text, _keep(toy))
    off, _ = _per_prediction(toy, text, _keep(toy, (1, 1)))
    none, _ = _per_prediction(toy, text, _keep(toy, *[(1, h) for h in range(toy.num_heads)]))
    assert len(on) == 27 and "the mean over the 27 predictions" in note
    np.testing.assert_allclose([on.mean(), off.mean()], [base.loss, one.loss], atol=1e-5)
    head, rest = slice(0, UNPREDICTABLE), slice(UNPREDICTABLE, None)
    letters = toy.tokenizer.convert_ids_to_tokens(prepare(toy, text, None).ids[0].tolist())
    # prediction i reads token i: the first ten read a token with no earlier copy (or <bos>), the rest one with
    assert [letters[i] in letters[1:i] for i in range(len(on))] == [False] * UNPREDICTABLE + [True] * 17
    assert f"those ten cost {on[head].mean():.2f} nats each" in note
    assert f"with all of layer 1 off, those ten cost {none[head].mean():.2f}" in note
    assert f"they cost {off[head].mean():.2f}" in note
    assert f"the 17 letters that can be copied go from {on[rest].mean():.3f} to {off[rest].mean():.3f}" in note
    assert len(on[rest]) == 17 and on[head].mean() > np.log(26) > none[head].mean() - 0.5
    # "after the first e it says w at 97%": the prediction at the first e (position 3)
    vocab = toy.tokenizer.convert_ids_to_tokens(list(range(p_on.shape[1])))
    best = int(p_on[3].argmax())
    assert letters[3] == "e" and vocab[best] == "w" and f"*w* at {p_on[3, best]:.0%}" in note
    # a bet on a letter already seen, at each of the nine after the first
    assert all(vocab[int(p_on[i].argmax())] in letters[1:i + 1] for i in range(1, UNPREDICTABLE))
