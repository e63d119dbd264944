"""A long run: `analyze` of a text whose every-head array would pass MHA_VIZ_DENSE_MB. One pass of the scan
(`mha_viz.scan`) keeps the head table, the thumbnails and each row's heaviest keys, and each layer's queries and keys;
the run it gives (`AttentionRun` without a dense array, `is_dense` False) recomputes the rows a view asks
for (`AttentionRun.rows`, `column`, `pooled_head`) from them."""

from __future__ import annotations

from mha_viz.capture.run import AttentionRun
from mha_viz.progress import Progress
from mha_viz.scan.rows import Reader
from mha_viz.scan.run import scan
from mha_viz.text.tokenize import Tokens
from mha_viz_models import LoadedModel


def long_run(model: LoadedModel, toks: Tokens, text: str = "", *,
             progress: Progress | None = None, keep_own: bool = True) -> AttentionRun:
    """The run of `toks` (the text tokenized and cut, `tokenize`) without every head's array: the scan's
    summaries (`summary`) and rows on demand; `keep_own`: with the model's own outputs (`scan`). Raises what
    `scan` raises."""
    found = scan(model, text, tokens=toks, progress=progress, keep_own=keep_own)
    return AttentionRun(
        tokens=toks.display, source=Reader(found.row_source), shape=(model.num_layers, model.num_heads),
        summary=found, is_causal=model.is_causal, num_kv_heads=model.num_kv_heads, model_name=model.name,
        token_ids=list(toks.ids), raw_tokens=toks.raw, special_mask=toks.special, word_ids=toks.word_ids,
        text=text, num_input_tokens=toks.total, num_input_tokens_is_estimate=toks.total_is_estimate,
        layer_ids=model.layer_ids, model_layers=model.total_layers, precision=model.precision, own=found.own,
        layer_kv_heads=model.layer_kv_heads)
