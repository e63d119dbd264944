"""What an analysis was computed from: `ModelKey` (which loaded model) and `AnalysisKey` (the model,
the text and every choice that changes the run). The sidebar's run and every result cached from it
(`steps`, `analysis`, the figures of `charts.cached`) are keyed by them, so that no code reads a
positional tuple by index."""

from __future__ import annotations

from typing import NamedTuple


class ModelKey(NamedTuple):
    """Which loaded model: the same name can come from two folders, devices or implementations."""

    name: str
    source: str
    device: str
    local_attention: bool
    precision: str = "float32"  # what the loaded model computes in (LoadedModel.precision)


class AnalysisKey(NamedTuple):
    """What one analysis was computed from; every cached result of a text is keyed by it."""

    model: ModelKey
    text: str
    cap: int  # the session's token cap when it was computed
    layers: tuple[int, ...] | None = None  # None: every layer
    hidden: tuple[str, ...] = ()  # the tokens hidden from the run ("special", "first"); () none
    target: str | None = None  # an encoder–decoder's target text; None: the model writes it
    part: str = ""  # an encoder–decoder's attention shown: "encoder", "decoder", "cross"; "" for other models
    lens: str = ""  # "" the weights; keys.LENS_CONTRIBUTIONS: the value-weighted run (sidebar, *Show attention as*)

    def with_text(self, text: str) -> "AnalysisKey":
        """The same model and cap on another text (every layer): e.g. the bundled paragraph."""
        return self._replace(text=text, layers=None, hidden=(), lens="")
