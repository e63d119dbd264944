"""A long run's *Hide tokens* and contributions lens: a run whose rows are a transform of the base run's
rows, block by block, never any head's n × n at once; what the dense transforms (`sinks.drop_tokens`,
`attribution.as_contributions`) make of a dense run, read through the same methods (`rows`, `layer_rows`,
`column`, `pooled_head`, `head`, `source`).

- hidden tokens (`hide_tokens`): the kept queries over the kept keys, each row divided by what it keeps there
  (rows keeping less than `sinks.EMPTY_BELOW` stay zeros), with the dense run's `hidden` (each head's sink
  mass, the rows left empty, the label);
- contributions (`contributions`): each row times the norm of what each key writes through the head
  (`value_norms`, `capture.contributions.long_value_norms`), divided by its sum;
- both, one after the other, as the sidebar applies them.

Its `summary` (head table, thumbnails, kept keys) is the scan's reduction of the transformed rows
(`derived.summary`): a pass over every head's rows, made once when the run is (at 8,192 tokens of SmolLM2
tens of seconds on a CPU: the caller says so and caches the run).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

import numpy as np

from mha_viz.budget.memory import Need
from mha_viz.budget.plan import Plan
from mha_viz.capture import head_rows
from mha_viz.capture.contributions import weighed
from mha_viz.capture.run import AttentionRun
from mha_viz.capture.sinks import hidden_of, kept_fields, kept_rows, split
from mha_viz.derived.summary import summarise
from mha_viz.interventions.attribution import label as lens_label
from mha_viz.metrics.row_measures import first_is_sink
from mha_viz.progress import Progress


@dataclasses.dataclass(frozen=True)
class Transform:
    """What a derived run does to its base's rows: keep the positions `kept` (None: every token) of both axes,
    renormalising each kept row over them (`removed`: the others), then weigh each row by `norms` (L, H, m),
    the kept keys' value norms (None: weights), renormalising again."""

    kept: np.ndarray | None = None
    removed: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    norms: np.ndarray | None = None

    def rows(self, source: head_rows.Blocks, layer: int, heads: list[int] | None, start: int, stop: int
             ) -> Iterator[tuple[int, np.ndarray, np.ndarray | None, np.ndarray | None]]:
        """Rows start … stop − 1 of the derived run as (first row, float32 (h, b, m), what each row gave the
        removed keys (h, b) float64, the rows left empty (h, b)); the last two None when nothing is hidden."""
        norms = None if self.norms is None else self.norms[layer] if heads is None else self.norms[layer, heads]
        kept = self.kept
        if kept is None:
            for first, rows in source(layer, heads, start, stop):
                yield first, rows if norms is None else weighed(rows, norms), None, None
            return
        wanted = kept[start:stop]
        for first, rows in source(layer, heads, int(wanted[0]), int(wanted[-1]) + 1):
            pick = np.flatnonzero(np.isin(np.arange(first, first + rows.shape[1]), wanted))
            if not len(pick):
                continue
            block, lost, gone = kept_rows(rows[:, pick], kept, self.removed)
            at = int(np.searchsorted(kept, first + pick[0]))  # kept positions are sorted: the picks are rows at …
            yield at, block if norms is None else weighed(block, norms), lost, gone

    def reader(self, source: head_rows.Blocks) -> head_rows.Blocks:
        """The derived run's `head_rows.Blocks`."""
        def blocks(layer: int, heads: list[int] | None, start: int, stop: int) -> Iterator[tuple[int, np.ndarray]]:
            for first, rows, _lost, _gone in self.rows(source, layer, heads, start, stop):
                yield first, rows
        return blocks


def _derive(run: AttentionRun, transform: Transform, changes: dict, *, hiding: bool,
            progress: Progress | None) -> AttentionRun:
    """The run `transform` makes of the long run `run`, its fields `changes` besides, and its summary."""
    if run.is_dense or run.summary is None:
        raise ValueError("a derived run is made of a long run (one with a scan, not every head held)")
    fields = {f.name: getattr(run, f.name) for f in dataclasses.fields(run) if f.init and f.name != "attentions"}
    fields.update(changes, source=transform.reader(run.source), shape=(run.num_layers, run.num_heads))
    derived = AttentionRun(**fields)  # no array given: rows on demand (`is_dense` False)
    n = derived.n

    def layer_blocks(layer: int):
        return transform.rows(run.source, layer, None, 0, n)
    scan, mass, empty = summarise(
        layer_blocks, run.summary, tokens=derived.tokens, token_ids=derived.token_ids,
        special=derived.special_mask, layers=run.num_layers, heads=run.num_heads,
        first_is_sink=first_is_sink(derived), hiding=hiding, progress=progress)
    scan.row_source = derived.rows
    derived.summary = scan
    if hiding:
        derived.hidden = hidden_of(run, transform.kept, transform.removed, mass, empty)
    return derived


def hide_tokens(run: AttentionRun, mask, *, progress: Progress | None = None) -> AttentionRun:
    """The long run `run` without the tokens where `mask` (bool, n) is True, on both axes, each kept row
    renormalised over the kept keys: `sinks.drop_tokens` of its rows (within float32 rounding), with the same
    `hidden`. Reads every head's rows once (its summary). ValueError as `drop_tokens`."""
    kept, removed = split(run, mask)
    norms = None if run.value_norms is None else np.ascontiguousarray(run.value_norms[:, :, kept])
    # with `hidden` set before the summary: the head table's sink is the first kept token only if it is the first
    placeholder = hidden_of(run, kept, removed, np.zeros((run.num_layers, run.num_heads), np.float32),
                            np.zeros((run.num_layers, run.num_heads, len(kept)), bool))
    changes = dict(kept_fields(run, kept, removed), value_norms=norms, hidden=placeholder)
    return _derive(run, Transform(kept=kept, removed=removed), changes, hiding=True, progress=progress)


def contributions(run: AttentionRun, norms: np.ndarray, *, progress: Progress | None = None) -> AttentionRun:
    """The long run `run` as row-normalised contributions, each row weighed by `norms` (L, H, n: its tokens'
    value norms, `capture.contributions.value_norms_of`): `attribution.as_contributions` of its rows (within
    float32 rounding). Reads every head's rows once (its summary). ValueError where it already shows them."""
    if run.lens:
        raise ValueError(f"this run already shows {run.lens}: weighing it again would count the norms twice")
    norms = np.asarray(norms, dtype=np.float32)
    if norms.shape != (run.num_layers, run.num_heads, run.n):
        raise ValueError(f"value norms of shape {norms.shape} for a run of {run.num_layers} layers × "
                         f"{run.num_heads} heads × {run.n} tokens")
    changes = dict(value_norms=norms, lens=lens_label(True))
    return _derive(run, Transform(norms=norms), changes, hiding=False, progress=progress)


def need(run: AttentionRun) -> Need:
    """What making a derived run of the long run `run` holds (host memory: its rows are recomputed a block at a
    time): its summary's kept keys and weights, each row's rest and the norms, and three blocks of rows (the base's,
    the transformed, the reduction's)."""
    kept = 4 * run.num_layers * run.num_heads * run.n * (2 * run.summary.top_k + 2)
    return Need(host=kept + 3 * head_rows.BLOCK_BYTES)


def plan_hide(run: AttentionRun, mask) -> Plan[AttentionRun]:
    """`hide_tokens(run, mask)` planned (`budget.plan`): on the run's tokens, its need `need(run)`."""
    return Plan(run.n, need(run), lambda progress=None: hide_tokens(run, mask, progress=progress))


def plan_contributions(run: AttentionRun, norms: np.ndarray) -> Plan[AttentionRun]:
    """`contributions(run, norms)` planned (`budget.plan`): on the run's tokens, its need `need(run)`."""
    return Plan(run.n, need(run), lambda progress=None: contributions(run, norms, progress=progress))
