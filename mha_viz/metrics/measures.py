"""The catalogue of measures: each metric's and similarity's formula and reading for the UI,
the smoothing constants and the pattern-class thresholds.

Adding a head metric (a column of the head table):
1. its `Measure` in METRICS, where the head table and the UI should list it: formula, readings,
   `needs`, and `bounded` or `bounded_form`. The UI's metric lists, the comparison's columns
   (`comparison.CHANGE_COLUMNS`) and which measures a run gets (`metrics_for`: a run without head
   outputs or weights gets none of those that need them) follow from it;
2. its computation. Read off the attention pattern: its definition as sums over query rows in
   `row_measures` (its name in MEASURED, a sum in ROW_SUMS, the measure from the sums in
   `measures_from_sums` when it is not the sum's mean over the rows) and that sum in each backend,
   `row_kernels._rows` (compiled) and `row_stats.RowStats.add` (tensors); the head table, the scan and
   the corpus all read it from there. From the heads' outputs (`needs` names "outputs"): a key of
   `output_norms.head_output_norms`.
tests/unit/test_measures.py checks that both backends and the head table give exactly the
catalogue's measures in its order and each `bounded` flag against the values; add the new measure to
the reference of tests/unit/test_row_measures.py (one head, one row at a time, from the spec), which
both backends must match on planted and random heads.
"""

from __future__ import annotations

from dataclasses import dataclass


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

METRICS: dict[str, Measure] = {
    "entropy": Measure("Entropy (nats)",
                       f"mean_i −Σ_j Â_ij ln Â_ij,  Â = {1 - ENTROPY_SMOOTHING:g}·A + {ENTROPY_SMOOTHING:g}/k_i",
                       "attention spread over many tokens", "attention on one or two tokens",
                       bounded_form="norm_entropy"),  # 0 .. ln n
    "norm_entropy": Measure("Normalized entropy", "mean_i H(A_i) / ln k_i  (k_i = keys row i may see)",
                            "close to uniform over the visible keys (> 0.9: broad)", "sharp, one-hot rows",
                            bounded=True),
    "confidence": Measure("Confidence", "mean_i max_j A_ij", "each query picks one key", "no key stands out",
                          bounded=True),
    "distance": Measure("Mean distance", "mean_i Σ_j A_ij·|i − j|", "looks far away", "looks at itself or neighbours",
                        bounded_form="distance_norm"),  # 0 .. n − 1; distance_norm = distance / n
    "self": Measure("Self", "mean_i A_i,i", "attends to itself", "ignores itself", bounded=True),
    "prev": Measure("Previous token", "mean_i A_i,i−1", "attends to the previous token", "does not", bounded=True),
    "next": Measure("Next token", "mean_i A_i,i+1", "attends to the next token", "does not", bounded=True),
    "first": Measure("First token (sink)", "mean_i A_i,0", "parks attention on [CLS] / BOS", "does not",
                     bounded=True),
    "sep": Measure("[SEP] tokens", "mean_i Σ_{j ∈ SEP} A_ij", "parks attention on separators", "does not",
                   bounded=True),
    "punct": Measure("Punctuation", "mean_i Σ_{j ∈ {'.', ','}} A_ij", "attends to . and ,", "does not",
                     bounded=True),
    "prev_token_score": Measure("Previous-token score (detector form of prev)", "Σ(A ⊙ P)/ΣA,  P[i, i−1] = 1",
                                "a previous-token head (TransformerLens detector; equals prev when "
                                "every row sums to 1)", "not one", bounded=True),
    "duplicate_score": Measure("Duplicate-token score", "Σ(A ⊙ P)/ΣA,  P[i, j] = 1 if tok_j = tok_i, j < i",
                               "looks back at earlier copies of the same token", "does not", bounded=True),
    "induction_score": Measure("Induction score", "Σ(A ⊙ P)/ΣA,  P[i, j+1] = 1 if tok_j = tok_i, j < i",
                               "looks at the token after an earlier copy (an induction head); "
                               "a perfect one scores 0.5 on a sequence repeated twice", "not an induction head",
                               bounded=True),
    # beyond the sink (docs/head-metrics.md, section 1): the pattern class reads these
    "sink": Measure("Sink mass (left out of the type)", "mean_i (A_i,0 + 1 − Σ_j A_ij)  (first token + learned sink)",
                    "parks attention on the first token or a learned sink: that much of the head is left out "
                    "of its type", "the type sees the whole head", bounded=True),
    "beyond_norm_entropy": Measure("Normalized entropy beyond the sink",
                                   "norm_entropy of B_i = A_i,j≥1 / Σ_j≥1 A_ij  (rows 1 …, each renormalised)",
                                   "spread over the tokens after the sink (> 0.9: broad)", "sharp beyond the sink",
                                   bounded=True),
    "beyond_self": Measure("Self beyond the sink", "mean_i B_i,i", "attends to itself once the sink is left out",
                           "does not", bounded=True),
    "beyond_prev": Measure("Previous token beyond the sink", "mean_i B_i,i−1",
                           "attends to the previous token once the sink is left out", "does not", bounded=True),
    "beyond_next": Measure("Next token beyond the sink", "mean_i B_i,i+1",
                           "attends to the next token once the sink is left out", "does not", bounded=True),
    "beyond_sep": Measure("[SEP] tokens beyond the sink", "mean_i Σ_{j ∈ SEP} B_ij",
                          "parks its attention beyond the sink on separators", "does not", bounded=True),
    "beyond_punct": Measure("Punctuation beyond the sink", "mean_i Σ_{j ∈ {'.', ','}} B_ij",
                            "attends to . and , once the sink is left out", "does not", bounded=True),
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



def needs_met(needs: str, *, outputs: bool, weights: bool) -> bool:
    """Whether a run has every part `needs` names ("attention" always; "outputs" with each head's
    output, "weights" with the model's per-head weights)."""
    have = {"attention"} | ({"outputs"} if outputs else set()) | ({"weights"} if weights else set())
    return set(needs.split("+")) <= have


def metrics_for(*, outputs: bool, weights: bool) -> list[str]:
    """The METRICS a head table has for a run with (or without) head outputs and weights, in the
    catalogue's order: those whose `needs` the run meets."""
    return [name for name, m in METRICS.items() if needs_met(m.needs, outputs=outputs, weights=weights)]


def needing(part: str) -> list[str]:
    """The METRICS whose `needs` names `part` ("outputs" or "weights"), in the catalogue's order."""
    return [name for name, m in METRICS.items() if part in m.needs.split("+")]


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
PUNCTUATION = frozenset({".", ","})
# Every class `head_stats.classify` gives (before its ":detail"), the most specific first: a majority vote's
# tie goes to the first (`corpus.pattern_class`), and figures list them in this order with `PATTERN_COLOURS`.
PATTERN_CLASSES = ("block", "vertical", "diagonal", "sink", "broad", "mixed", "heterogeneous")
