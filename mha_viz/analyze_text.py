"""`analyze`, the one entry point from a text to every head's attention, for every kind of model: an
encoder's or a decoder's `AttentionRun` (`mha_viz.capture.run.capture_text`), an encoder–decoder's
`EncoderDecoderRun` (`mha_viz.capture.seq2seq.analyze_seq2seq`). Published as `mha_viz.analyze`; `plan_analysis` is
the same planned once (`mha_viz.budget.plan`): its tokens counted and its need priced as what `analyze` will run."""

from __future__ import annotations

from mha_viz import needs
from mha_viz.budget.plan import Plan
from mha_viz.capture.head_rows import held_densely
from mha_viz.capture.run import AttentionRun, capture_text
from mha_viz.capture.seq2seq import EncoderDecoderRun, analyze_seq2seq
from mha_viz.scan.long_run import long_run
from mha_viz.text.tokenize import InputError, tokenize
from mha_viz_models import LoadedModel
from mha_viz_models.loading import effective_run


def analyze(model: LoadedModel, text: str, target: str | None = None, *, max_tokens: int | None = None,
            lean: bool | None = None, layers: list[int] | None = None, dense: bool | None = None,
            progress=None) -> AttentionRun | EncoderDecoderRun:
    """Run `text` through `model` and capture the attention of every head: an `AttentionRun`
    (`capture_text`: lean, layers), or for an encoder–decoder an `EncoderDecoderRun` of `text` as
    the source and `target` (None: the model writes it; see `analyze_seq2seq`).
    dense: hold every head's (layers, heads, n, n) array (True), or keep each layer's input and
    recompute the rows a view asks for (False: a long run, `mha_viz.scan.long_run`, with the head table,
    thumbnails and kept keys of one scan; `AttentionRun.rows`); None: dense up to MHA_VIZ_DENSE_MB
    (1 GiB) and whenever `layers` picks some, long above. progress(fraction, message): a long run's
    layers as they pass.
    Raises InputError for blank text, and for a target given to a model that takes none; NotFiniteError
    (an InputError, `mha_viz.capture.finite`) when the model computes NaN or infinity."""
    if model.is_encoder_decoder:
        if layers is not None:
            raise InputError("An encoder–decoder's layers are captured all at once; leave out layers=.")
        return analyze_seq2seq(model, text, target, max_tokens=max_tokens)
    if target is not None:
        raise InputError(f"{model.name} reads one text: a target text is for encoder–decoders (T5, BART, Marian).")
    if dense is False and layers is not None:
        raise InputError("A long run (dense=False) keeps every layer; leave out layers=.")
    can_be_long = not model.effective or effective_run.by_rows(model)  # Mamba-2's, xLSTM's rows by blocks
    if dense is False and not can_be_long:
        raise InputError(f"{model.name} is read as the effective attention of its {model.effective} layers, whose "
                         "matrices are made whole a layer at a time: it has no long run (Mamba-2 and xLSTM have); "
                         "leave out dense=False (its run holds every layer's array).")
    if layers is None and dense is not True and can_be_long:
        toks = tokenize(model, text, max_tokens)
        if dense is False or not held_densely(model.num_layers, model.num_heads, toks.n):
            return long_run(model, toks, text, progress=progress)
    return capture_text(model, text, max_tokens=max_tokens, lean=lean, layers=layers)


def plan_analysis(model: LoadedModel, text: str, target: str | None = None, *, max_tokens: int | None = None,
                  layers: list[int] | None = None) -> Plan[AttentionRun | EncoderDecoderRun]:
    """`analyze` planned once: `n` the tokens it reads, `need` what it holds at its peak as it will run
    (`needs.analysis`: a long run's where `analyze` makes one, else the dense capture's). An encoder–decoder's need
    is None (admitted by count: its target's length is not known before it runs). Raises InputError for a blank
    text, before anything runs."""
    if model.is_encoder_decoder:
        return Plan(0, None, lambda: analyze(model, text, target, max_tokens=max_tokens, layers=layers))
    n = tokenize(model, text, max_tokens).n
    need = needs.analysis(model, n, layers=None if layers is None else len(layers))
    return Plan(n, need, lambda: analyze(model, text, target, max_tokens=max_tokens, layers=layers))
