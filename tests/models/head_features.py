"""The analysis the app runs, and every per-head feature that reads the heads' outputs, on one text of a loaded model,
each with a property it must hold or a refusal that says why in plain words (the survey of every architecture:
`every_architecture`):

- the analysis and its head table (a row a head, entropy finite), with the output measures where the heads' outputs
  are read (each head's output norm finite);
- the contributions lens (each row that had weight sums to 1);
- direct logit attribution (the heads' parts plus the rest, computed from the residual apart, make the logit; the
  tangent's total where the model caps its logits);
- switching heads off (each head's effect on the loss finite);
- patching, from the text with "cat" for "dog" (the same count of tokens with the tests' tokenizer): each head's
  restored share finite."""

from __future__ import annotations

import numpy as np

EXCEPTION_TEXT = ("Traceback", "Error", "Exception", "has no attribute", "NoneType")


def refused(exc: Exception) -> str:
    """A refusal's message, checked: plain words, no exception's text."""
    message = str(exc)
    assert message and not [t for t in EXCEPTION_TEXT if t in message], message
    return message


def features(model, text: str) -> dict[str, str | None]:
    """{feature: None where it ran and its property held, else its refusal's message} (module doc)."""
    import mha_viz
    from mha_viz.interventions import ablation, attribution, patching
    from mha_viz.metrics import head_table
    from mha_viz.text.tokenize import InputError
    from mha_viz_models.errors import ModelLoadError, UnsupportedArchitecture

    said: dict[str, str | None] = {}
    refusals = (InputError, ValueError, UnsupportedArchitecture, ModelLoadError)
    run = mha_viz.analyze(model, text)  # every loaded model: the analysis the app runs
    table = head_table(run, model.head_weights() if model.has_head_outputs else None)
    assert len(table) == run.num_layers * run.num_heads and np.isfinite(table["entropy"].to_numpy(float)).all()
    said["head table"] = None
    if not model.has_head_outputs:
        return said | dict.fromkeys(("contributions", "direct logit", "heads off", "patching"), model.unread)
    assert np.isfinite(table["output_norm"].to_numpy(float)).all()
    if run.value_norms is None:
        said["contributions"] = "its values are not read"
    else:
        rows = attribution.as_contributions(run).attentions.sum(-1)
        had = run.attentions.sum(-1) > 1e-6
        np.testing.assert_allclose(rows[had], 1.0, atol=1e-4)
        said["contributions"] = None
    try:
        dla = attribution.direct_logit(model, text)
        total = float(dla.per_head.sum() + dla.rest)
        want = float(dla.logit) if dla.softcap is None else total
        assert abs(total - want) <= 1e-3 * max(1.0, abs(want)), (total, want)
        said["direct logit"] = None
    except refusals as exc:
        said["direct logit"] = refused(exc)
    try:
        effects = ablation.ablation_effects(model, text)
        assert effects.shape == (model.num_layers, model.num_heads) and np.isfinite(effects).all()
        said["heads off"] = None
    except refusals as exc:
        said["heads off"] = refused(exc)
    try:
        patched = patching.patch_heads(model, text, text.replace("cat", "dog"))
        assert patched.values.shape == (model.num_layers, model.num_heads) and np.isfinite(patched.values).all()
        said["patching"] = None
    except refusals as exc:
        said["patching"] = refused(exc)
    return said
