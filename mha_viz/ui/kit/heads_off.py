"""The heads switched off on *Switch heads off*: kept per model for the session (`keys.HEADS_ON`, True =
on), changed by the page's grid and buttons and by a link or a lesson step, which carry them as
``heads_off`` (the heads off by label, ``L1H1,L0H3``: the model's layer numbers, as the grid shows them).
"""

from __future__ import annotations

import re

import numpy as np

from mha_viz.export import shared_controls
from mha_viz.ui.kit import keys, session

PARAM = shared_controls.HEADS_OFF  # the link parameter (`page_controls`)
_LABEL = re.compile(r"L([0-9]{1,4})H([0-9]{1,4})")


def grid(model_key, shape: tuple[int, int]) -> np.ndarray:
    """This model's on/off state (True = on): every head on until something switches one off."""
    store = session.setdefault(keys.HEADS_ON, {})
    on = store.get(model_key)
    if on is None or on.shape != shape:
        on = store[model_key] = np.ones(shape, dtype=bool)
    return on


def set_grid(model_key, value: np.ndarray) -> None:
    """Set this model's on/off state from outside the grid (a fresh grid is drawn with it)."""
    session.setdefault(keys.HEADS_ON, {})[model_key] = value
    session.put(keys.HEADS_VERSION, session.get(keys.HEADS_VERSION, 0) + 1)


def off_labels(cur) -> list[str] | None:
    """The heads off for the model on screen, by label; None when no model is."""
    model = getattr(cur, "model", None)
    if model is None or getattr(cur, "key", None) is None:
        return None
    on = session.get(keys.HEADS_ON, {}).get(cur.key.model)
    if on is None:
        return []
    return [f"L{model.layer_ids[row]}H{head}" for row, head in zip(*np.nonzero(~on))]


def apply_labels(cur, labels: list[str]) -> str | None:
    """Switch off exactly the heads `labels` of the model on screen (every other head on); a notice
    naming those it does not have, None when every one was taken."""
    model = cur.model
    on = np.ones((model.num_layers, model.num_heads), dtype=bool)
    bad = []
    for label in labels:
        found = _LABEL.fullmatch(label)
        layer, head = (int(found.group(1)), int(found.group(2))) if found else (-1, -1)
        if layer in model.layer_ids and head < model.num_heads:
            on[list(model.layer_ids).index(layer), head] = False
        else:
            bad.append(label[:12])
    set_grid(cur.key.model, on)
    return (f"The link's heads_off names heads {model.name} does not have ({', '.join(bad[:5])}): "
            "they were left on." if bad else None)


def all_on() -> None:
    """Every head of every model on again (a lesson step that switches none off)."""
    if session.get(keys.HEADS_ON):
        session.put(keys.HEADS_ON, {})
        session.put(keys.HEADS_VERSION, session.get(keys.HEADS_VERSION, 0) + 1)
