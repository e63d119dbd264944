"""`analyze`, the one entry point from a text to every head's attention, for every kind of model: an
encoder's or a decoder's `AttentionRun` (`mha_viz.capture.run.capture_text`), an encoder–decoder's
`EncoderDecoderRun` (`mha_viz.capture.seq2seq.analyze_seq2seq`). Published as `mha_viz.analyze`."""

from __future__ import annotations

from mha_viz.capture.run import AttentionRun, capture_text
from mha_viz.capture.seq2seq import EncoderDecoderRun, analyze_seq2seq
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel


def analyze(model: LoadedModel, text: str, target: str | None = None, *, max_tokens: int | None = None,
            lean: bool | None = None, layers: list[int] | None = None) -> AttentionRun | EncoderDecoderRun:
    """Run `text` through `model` and capture the attention of every head: an `AttentionRun`
    (`capture_text`: lean, layers), or for an encoder–decoder an `EncoderDecoderRun` of `text` as
    the source and `target` (None: the model writes it; see `analyze_seq2seq`).
    Raises InputError for blank text, and for a target given to a model that takes none; NotFiniteError
    (an InputError, `mha_viz.capture.finite`) when the model computes NaN or infinity."""
    if model.is_encoder_decoder:
        if layers is not None:
            raise InputError("An encoder–decoder's layers are captured all at once; leave out layers=.")
        return analyze_seq2seq(model, text, target, max_tokens=max_tokens)
    if target is not None:
        raise InputError(f"{model.name} reads one text: a target text is for encoder–decoders (T5, BART, Marian).")
    return capture_text(model, text, max_tokens=max_tokens, lean=lean, layers=layers)
