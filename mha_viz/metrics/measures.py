"""The catalogue of measures: each metric's and similarity's formula and reading for the UI,
the smoothing constants and the pattern-class thresholds.

Adding a head metric (a column of the head table):
- read off the attention as a sum over each row's keys of A · w, for a weight of one of the table's kinds (a
  diagonal offset, a column, marked keys, the distance, a match of token ids): one `row_table.RowMeasure` in
  `row_table.RECORDS`, with its words; its `Measure` here, its sums in every backend and its place in the head
  table follow from the record (tests/unit/test_row_table.py adds one and checks them);
- any other: its `Measure` in the dicts below (formula, readings, `needs`, and `bounded` or `bounded_form`) and its
  computation: the backends' own sums (`row_kernels`, `row_stats`, `row_measures.measures_from_sums`) or, from the
  heads' outputs (`needs` names "outputs"), a key of `output_norms.head_output_norms`.
The UI's metric lists, the comparison's columns (`comparison.CHANGE_COLUMNS`) and which measures a run gets
(`metrics_for`) follow from METRICS. tests/unit/test_measures.py checks that both backends and the head table give
exactly the catalogue's measures in its order and each `bounded` flag against the values; tests/unit/
test_row_measures.py checks both backends against a reference written from the spec, one row at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

from mha_viz.metrics.row_table import TABLE, RowMeasure, RowTable, current


@dataclass(frozen=True)
class Measure:
    """What the UI says about a measure: its formula in one line and how to read it; for the head
    table's measures (METRICS), also whether two runs' values compare as a plain difference.

    bounded: the measure lies in 0..1 on any attention pattern, whatever the number of tokens, so
        two runs compare by |b − a| (`comparison.CHANGE_COLUMNS` averages these).
    bounded_form: for one that is not (it grows with n), the head-table column that is its form
        in 0..1, compared in its place ("" when there is none).
    signed: the measure lies in −1..1 (the copying score), neither bounded in 0..1 nor growing.
    needs: what a run must have for it, parts joined by "+": "attention" (every run has it),
        "outputs" (each head's output z), "weights" (the model's per-head weights); a run without
        one of them does not get the measure (`metrics_for`).
    """

    label: str
    formula: str
    high: str
    low: str
    needs: str = "attention"  # "attention", "outputs", "weights" or "outputs+weights"
    bounded: bool = False
    bounded_form: str = ""
    signed: bool = False


# The entropy's smoothing (docs/head-metrics.md, section 1): Â = (1 − ENTROPY_SMOOTHING)·A + ENTROPY_SMOOTHING/k_i on
# the k_i keys row i may see, so that no visible key has probability 0 (Clark et al. 2019's code).
# The head table's two paths (head_kernels, head_stats) and the cross-attention metrics
# (mha_viz.metrics.cross_attention) all read it from here.
ENTROPY_SMOOTHING = 1e-4
# The JS divergence's smoothing (docs/head-metrics.md, section 2): Ã = (1 − JS_SMOOTHING)·A + JS_SMOOTHING/n over
# all n keys, before two heads' rows are compared (metrics.js).
JS_SMOOTHING = 1e-3

_FIRST: dict[str, Measure] = {  # the backends' own, before the table's records
    "entropy": Measure("Entropy (nats)",
                       f"mean_i −Σ_j Â_ij ln Â_ij,  Â = {1 - ENTROPY_SMOOTHING:g}·A + {ENTROPY_SMOOTHING:g}/k_i",
                       "attention spread over many tokens", "attention on one or two tokens",
                       bounded_form="norm_entropy"),  # 0 .. ln n
    "norm_entropy": Measure("Normalized entropy", "mean_i H(A_i) / ln k_i  (k_i = keys row i may see)",
                            "close to uniform over the visible keys (> 0.9: broad)", "sharp, one-hot rows",
                            bounded=True),
    "confidence": Measure("Confidence", "mean_i max_j A_ij", "each query picks one key", "no key stands out",
                          bounded=True),
}
_BEYOND: dict[str, Measure] = {
    # beyond the sink (docs/head-metrics.md, section 1): the pattern class reads these
    "sink": Measure("Sink mass (left out of the type)", "mean_i (A_i,0 + 1 − Σ_j A_ij)  (first token + learned sink)",
                    "parks attention on the first token or a learned sink: that much of the head is left out "
                    "of its type", "the type sees the whole head", bounded=True),
    "beyond_norm_entropy": Measure("Normalized entropy beyond the sink",
                                   "norm_entropy of B_i = A_i,j≥1 / Σ_j≥1 A_ij  (rows 1 …, each renormalised)",
                                   "spread over the tokens after the sink (> 0.9: broad)", "sharp beyond the sink",
                                   bounded=True),
}
_OUTPUTS: dict[str, Measure] = {
    "output_norm": Measure("Output norm", "mean_t ‖z_t W_O[h]‖₂  (Kobayashi 2020)",
                           "writes a lot into the residual stream", "writes little", "outputs+weights"),
    "mean_output_norm": Measure("Mean-output norm", "‖mean_t z_t W_O[h]‖₂  (I_i of the project's first notes)",
                                "a large constant part in what it writes",
                                "zero-mean output: may still be large, this only sees the constant part",
                                "outputs+weights"),
    "copying": Measure("Copying score", "Σλ / Σ|λ|,  λ: eigenvalues of W_E W_V W_O[h] W_U  (Elhage et al. 2021)",
                       "what it moves raises the same token's logit (a copying head; 1 at most)",
                       "about 0: neither; negative: it lowers that token's logit", "weights", signed=True),
}


def _measure(r: RowMeasure) -> Measure:
    return Measure(r.label, r.formula, r.high, r.low, bounded=r.bounded, bounded_form=r.bounded_form)


def _beyond(r: RowMeasure) -> Measure:
    """A record's measure beyond the sink: on each kept row renormalised after the sink (B)."""
    return Measure(f"{r.label} beyond the sink", r.formula.replace("A_", "B_"), f"{r.high} once the sink is left out",
                   r.low, bounded=True)


def catalogue(table: RowTable | None = None) -> dict[str, Measure]:
    """Every head metric in the head table's order: the entropies and the confidence, `table`'s records (the means
    over rows, then the detectors' shares), the sink and what lies beyond it, then the measures of the heads'
    outputs and weights."""
    table = table or TABLE
    records = [r for r in table if r.reads == "rows"] + [r for r in table if r.reads == "share"]
    return {**_FIRST, **{r.name: _measure(r) for r in records}, **_BEYOND,
            **{f"beyond_{r.name}": _beyond(r) for r in table.beyond}, **_OUTPUTS}


METRICS: dict[str, Measure] = catalogue()


def current_metrics() -> dict[str, Measure]:
    """METRICS, or under another row table (`row_table.using`) the catalogue of that table."""
    table = current()
    return METRICS if table is TABLE else catalogue(table)


def needs_met(needs: str, *, outputs: bool, weights: bool) -> bool:
    """Whether a run has every part `needs` names ("attention" always; "outputs" with each head's
    output, "weights" with the model's per-head weights)."""
    have = {"attention"} | ({"outputs"} if outputs else set()) | ({"weights"} if weights else set())
    return set(needs.split("+")) <= have


def metrics_for(*, outputs: bool, weights: bool) -> list[str]:
    """The METRICS a head table has for a run with (or without) head outputs and weights, in the
    catalogue's order: those whose `needs` the run meets."""
    return [name for name, m in current_metrics().items() if needs_met(m.needs, outputs=outputs, weights=weights)]


def needing(part: str) -> list[str]:
    """The METRICS whose `needs` names `part` ("outputs" or "weights"), in the catalogue's order."""
    return [name for name, m in current_metrics().items() if part in m.needs.split("+")]


SIMILARITIES: dict[str, Measure] = {
    "js": Measure("JS divergence of patterns",
                  f"mean_i JS(Ã_h[i], Ã_h'[i]),  Ã = {1 - JS_SMOOTHING:g}·A + {JS_SMOOTHING:g}/n,  "
                  "natural log (0 .. ln 2)",
                  "different patterns (a divergence: high = unlike)", "the same pattern"),
    "cosine": Measure("Pattern cosine", "⟨A_h, A_h'⟩ / (‖A_h‖ ‖A_h'‖) over the flattened matrices",
                      "look at the same places", "look at different places"),
    "cka": Measure("Output CKA (debiased)", "linear CKA of z_h, z_h' (n × d_v) with the unbiased HSIC",
                   "the heads' outputs carry the same information, up to rotation and scale",
                   "unrelated outputs", "outputs"),
    "residual": Measure("Residual correlation", "Pearson r of z_h W_O[h] and z_h' W_O[h'] over all n·d_model "
                        "entries, centred per coordinate", "they write the same thing into the residual stream",
                        "unrelated (negative: opposite)", "outputs+weights"),
    "seed_r": Measure("Output overlap R (not 1 for identical heads)",
                      "‖z_i z_jᵀ‖_F / (‖z_i‖_F ‖z_j‖_F)  (R_ij of the project's first notes)",
                      "outputs that overlap; but this formula is NOT 1 for identical heads (random "
                      "identical heads give about 0.2): prefer output CKA", "", "outputs"),
    "qk": Measure("QK weight cosine", "cos(W_Q[h] W_K[h]ᵀ, W_Q[h'] W_K[h']ᵀ) via tr((W_Q'ᵀ W_Q)(W_Kᵀ W_K'))",
                  "score tokens alike (content part only for RoPE models; GQA heads of one group "
                  "share W_K, so they differ only by W_Q)", "unrelated (negative: opposite)", "weights"),
    "ov": Measure("OV weight cosine", "cos(W_V[h] W_O[h], W_V[h'] W_O[h']) via tr((W_Vᵀ W_V')(W_O' W_Oᵀ))",
                  "move the same information (GQA heads of one group share W_V)",
                  "unrelated (negative: opposite)", "weights"),
}

# Pattern-class thresholds: conventions after Clark et al. 2019 / Kovaleva et al. 2019, not facts.
BROAD_NORM_ENTROPY = 0.9
DIAGONAL_MASS = 0.5
VERTICAL_MASS = 0.6
BLOCK_MASS = 0.8
# a row counts beyond the sink when it sees at least this many keys after it (with one it has no choice)
CHOICE_KEYS = 2
SINK_MASS = 0.6  # "sink": this much on the sink, and no clear type beyond it
MIXED_MASS = 0.5  # "mixed:a+b": the two strongest shares of a heterogeneous head cover this much …
MIXED_PART = 0.1  # … and the weaker of them at least this much
# Every class `head_stats.classify` gives (before its ":detail"), the most specific first: a majority vote's
# tie goes to the first (`corpus.pattern_class`), and figures list them in this order with `PATTERN_COLOURS`.
PATTERN_CLASSES = ("block", "vertical", "diagonal", "sink", "broad", "mixed", "heterogeneous")
# what each class means, in a few plain words (a caption beside a head's class; the rules: Head metrics' page)
PATTERN_MEANING = {
    "block": "keeps each query within its own segment", "vertical": "looks at [SEP] and punctuation",
    "diagonal": "looks at itself or a neighbour", "sink": "parks its attention on the first token",
    "broad": "spreads its attention evenly", "mixed": "splits it between two of these",
    "heterogeneous": "none of these"}
