"""Two runs compared head by head: which heads changed between two inputs or two models.

`compare(run_a, run_b)` picks the finest basis on which the two runs' attention rows correspond:
the same tokens ("tokens"), the same number of words ("words": word pieces merged as
`detail.word_level` does, special tokens hidden when the tokenizers place them differently), or
none ("metrics": differences of the head table only). Per head it measures how much the head
changed; models of different shapes cannot be matched head by head and are set side by side
by relative depth instead (`Comparison.depth`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mha_viz.capture.arrays import tensor_view
from mha_viz.capture.run import AttentionRun
from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics import METRICS, head_table
from mha_viz.metrics.row_blocks import aligned, kept_source
from mha_viz.text.readable import bare
from mha_viz.views import detail

KINDS = ("tokens", "words", "metrics")
# The head-table columns that lie in 0..1, averaged (absolute differences) into the "metrics"
# change, in the catalogue's order (`Measure.bounded`): entropy and distance grow with n, so their
# bounded forms norm_entropy and distance_norm stand in for them; the output norms are left out.
CHANGE_COLUMNS = tuple(dict.fromkeys(name if m.bounded else m.bounded_form for name, m in METRICS.items()
                                     if m.bounded or m.bounded_form))
CHUNK_ENTRIES = 2**22  # float64 entries per block of heads in `pattern_divergence` (32 MB a temporary)


@dataclass(frozen=True, eq=False)  # holds arrays and DataFrames: compared by identity
class Comparison:
    """What `compare` found. (L, H) arrays are indexed [layer row, head] like the runs' attentions.

    kind: "tokens", "words" or "metrics"; basis: one sentence saying which basis and why.
    head_divergence: (L, H) float64 JS divergence (nats) of each head's rows on the basis used,
    None for "metrics". change: (L, H) how much each head changed, None when the shapes differ:
    head_divergence for "tokens" / "words"; for "metrics", per head the mean over CHANGE_COLUMNS
    (the head table's columns in 0..1) of |b − a|, NaN values left out (0 if all are NaN).
    table: same shape: one row per head, columns layer (A's layer number; layer_b too when the
    runs captured different layers), head, c_a, c_b, c_diff (= b − a) for every numeric column c
    of the head tables of the runs as given, pattern_a, pattern_b, js (when head_divergence
    exists) and change, the most changed head first; when the shapes differ, `depth`.
    depth: one row per (run, layer, head): run ("A" / "B"), layer (the model's number), head,
    relative_depth = layer / (model layers − 1) (0 for a one-layer model) and every numeric
    head-table column. tables: the two head tables.
    aligned: the two runs as compared (for "words", possibly without their special tokens).
    """

    run_a: AttentionRun
    run_b: AttentionRun
    kind: str
    basis: str
    same_shape: bool
    head_divergence: np.ndarray | None
    change: np.ndarray | None
    table: pd.DataFrame
    depth: pd.DataFrame
    tables: tuple[pd.DataFrame, pd.DataFrame]
    aligned: tuple[AttentionRun, AttentionRun]

    @property
    def precision_note(self) -> str | None:
        """A sentence when the two runs were computed in different precisions (part of what
        differs is then rounding: up to about 2e-2 per probability in bfloat16), else None."""
        a, b = self.run_a.precision, self.run_b.precision
        if not a or not b or a == b:
            return None
        return (f"A was computed in {a} and B in {b}: part of the difference between them is rounding "
                "(bfloat16 and float16 move a probability by up to about 0.02). Pick one Precision in the "
                "sidebar to compare like with like.")

    @property
    def noise(self) -> float:
        """The largest change rounding alone gives in the runs' precisions (`rounding_noise`)."""
        return rounding_noise(self.kind, self.run_a.precision, self.run_b.precision)

    @property
    def unchanged(self) -> bool:
        """Every head's change lies within `noise` (the same model on the same text computed two ways, say)."""
        if self.change is None:
            return False
        finite = self.change[np.isfinite(self.change)]
        return bool(finite.size) and float(np.abs(finite).max()) <= self.noise

    def ranked(self, k: int | None = None) -> list[tuple[int, int, float]]:
        """[(layer row, head, change), ...], the most changed head first (ties in layer-major
        order); the first k, or all. Empty when the shapes differ."""
        if self.change is None:
            return []
        flat = self.change.ravel()
        order = np.argsort(-flat, kind="stable")[:k]
        H = self.change.shape[1]
        return [(int(i // H), int(i % H), float(flat[i])) for i in order]

    def pair(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None,
                                                   list[str], list[str]]:
        """(A, B, diff, labels_a, labels_b) of one head on the basis used: token matrices for
        "tokens", word matrices (`detail.word_level` of the aligned runs) for "words", each run's
        own token matrix for "metrics". diff = A − B (float32; note: the table's c_diff is b − a),
        None for "metrics". Labels are the raw tokens or words (not escaped)."""
        run_a, run_b = self.aligned
        if self.kind == "words":
            a = detail.word_level(run_a.head(layer, head), run_a.word_ids)
            b = detail.word_level(run_b.head(layer, head), run_b.word_ids)
            labels_a = detail.word_labels(run_a.tokens, run_a.word_ids)
            labels_b = detail.word_labels(run_b.tokens, run_b.word_ids)
        else:
            a, b = run_a.head(layer, head), run_b.head(layer, head)
            labels_a, labels_b = list(run_a.tokens), list(run_b.tokens)
        diff = None if self.kind == "metrics" else (np.asarray(a, np.float32) - np.asarray(b, np.float32))
        return a, b, diff, labels_a, labels_b


ROUNDING_UNITS = 8  # how many units in the last place a probability of either run may be off by, relatively


def rounding_noise(kind: str, *precisions: str) -> float:
    """The largest change rounding alone gives between runs in these precisions (the coarser counts, '' is
    float32): each probability off by r = ROUNDING_UNITS units in the last place, relatively, moves a row's JS by
    r² / 8 nats (JS ≈ Σ δ² / 8p) and a 0–1 metric by about r ("metrics"). Our MHA against Hugging Face's gave
    2e-16 in float32 and 2e-5 in bfloat16 (floors 1.1e-13, 4.9e-4); one word changed, 0.03 in bfloat16."""
    eps = max(float(torch.finfo(getattr(torch, p or "float32")).eps) for p in precisions or ("float32",))
    r = ROUNDING_UNITS * eps
    return r if kind == "metrics" else r * r / 8


def compare(run_a: AttentionRun, run_b: AttentionRun) -> Comparison:
    """Compare two runs head by head on the finest basis that applies (see the module doc).

    Rules, first that applies: runs of different (layers, heads) → "metrics" with `depth`;
    the same tokens (ids when both runs have them, else strings) → "tokens"; the same number of
    words, with special tokens hidden first when the two place them differently → "words";
    otherwise "metrics". The head table is computed once per run.
    """
    tables = (head_table(run_a), head_table(run_b))
    depth = depth_table(run_a, run_b, tables)
    same_shape = (run_a.num_layers, run_a.num_heads) == (run_b.num_layers, run_b.num_heads)
    if not same_shape:
        basis = (f"Compared by relative depth only: A has {run_a.num_layers} layers × {run_a.num_heads} "
                 f"heads and B has {run_b.num_layers} × {run_b.num_heads}, so heads cannot be matched one "
                 "to one.")
        return Comparison(run_a, run_b, "metrics", basis, False, None, None, depth, depth, tables,
                          (run_a, run_b))
    kind, basis, aligned = choose_basis(run_a, run_b)
    divergence = None
    if kind == "tokens":
        divergence = run_divergence(run_a, run_b)
    elif kind == "words":
        divergence = word_divergence(*aligned)
    change = divergence if divergence is not None else metric_change(*tables, run_a.num_heads)
    table = diff_table(run_a, run_b, tables, change, divergence)
    return Comparison(run_a, run_b, kind, basis, True, divergence, change, table, depth, tables, aligned)


def pattern_divergence(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(L, H) mean over query rows of JS(a_i, b_i) in nats for two (L, H, n, n) arrays.

    JS(p, q) = ½ Σ p ln p + ½ Σ q ln q − Σ m ln m with m = (p + q) / 2 and 0 · ln 0 = 0 (no
    smoothing: identical rows give 0 up to rounding, ~1e-16, and disjoint rows ln 2). Each row
    is first divided by its sum (float32 rows sum to 1 only up to rounding; a word row with
    hidden pieces sums to less). Rows that are (almost) all zero in either run — queries whose attention all
    went to hidden tokens, see `sinks` — are skipped; a head with no row left scores 0.
    Float64, in blocks of heads of about CHUNK_ENTRIES entries.
    """
    if a.shape != b.shape or a.ndim != 4:
        raise ValueError(f"pattern_divergence needs two (L, H, n, n) arrays of one shape; "
                         f"got {a.shape} and {b.shape}")
    L, H, n, _ = a.shape
    flat_a, flat_b = a.reshape(L * H, n, n), b.reshape(L * H, n, n)
    total, count = np.zeros(L * H), np.zeros(L * H)
    step = max(1, CHUNK_ENTRIES // max(n * n, 1))
    for i0 in range(0, L * H, step):
        total[i0:i0 + step], count[i0:i0 + step] = row_divergence(flat_a[i0:i0 + step], flat_b[i0:i0 + step])
    return (total / np.maximum(count, 1)).reshape(L, H)


def row_divergence(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Σ over rows of JS, rows counted), each (h,), of the rows of a and b (h, rows, n) as
    `pattern_divergence` defines them (rows normalised, all-zero rows left out), in float64."""
    # a copy: p is scaled in place below, and the runs' arrays are shared read-only
    p = tensor_view(np.ascontiguousarray(a)).to(torch.float64, copy=True)  # (h, b, n)
    q = tensor_view(np.ascontiguousarray(b)).double()
    sp, sq = p.sum(-1), q.sum(-1)  # (h, b)
    valid = (sp > EMPTY_BELOW) & (sq > EMPTY_BELOW)
    sp, sq = torch.where(valid, sp, 1.0), torch.where(valid, sq, 1.0)
    # Σ p' ln p' of the normalised row p' = p / s is Σ p ln p / s − ln s: no scaled copy of p
    hp = torch.xlogy(p, p).sum(-1) / sp - sp.log()
    hq = torch.xlogy(q, q).sum(-1) / sq - sq.log()
    m = torch.addcmul(p.mul_((0.5 / sp)[..., None]), q, (0.5 / sq)[..., None])  # (h, b, n)
    row = 0.5 * (hp + hq) - torch.xlogy(m, m).sum(-1)
    row = torch.where(valid, row.clamp_min(0.0), 0.0)
    return row.sum(-1).numpy(), valid.sum(-1).double().numpy()


def run_divergence(run_a: AttentionRun, run_b: AttentionRun) -> np.ndarray:
    """`pattern_divergence` of two runs of one shape on the same tokens, each layer's rows read from
    both a block at a time (`row_blocks.aligned`): never every head's array of either run."""
    L, H, n = run_a.num_layers, run_a.num_heads, run_a.n
    total, count = np.zeros((L, H)), np.zeros((L, H))
    rows = max(1, CHUNK_ENTRIES // max(H * n, 1))
    for layer in range(L):
        readers = [run_a.source(layer, None, 0, n), run_b.source(layer, None, 0, n)]
        for _first, (a, b) in aligned(readers, 0, n, rows):
            t, c = row_divergence(a, b)
            total[layer] += t
            count[layer] += c
    return total / np.maximum(count, 1)


def word_divergence(run_a: AttentionRun, run_b: AttentionRun) -> np.ndarray:
    """`pattern_divergence` of every head at word level (`word_layer`), a layer of each run at a time."""
    L, H = run_a.num_layers, run_a.num_heads
    return np.concatenate([pattern_divergence(word_layer(run_a, layer)[None], word_layer(run_b, layer)[None])
                           for layer in range(L)]).reshape(L, H)


def word_layer(run: AttentionRun, layer: int) -> np.ndarray:
    """(H, W, W) float32: every head of one layer at word level, equal to `detail.word_level` of each head,
    from the layer's rows a block at a time (its n × n never whole)."""
    groups = detail.word_groups(run.word_ids)
    starts = np.array([g[0] for g in groups])
    sizes = np.array([len(g) for g in groups])
    word_of = np.repeat(np.arange(len(groups)), sizes)
    out = np.zeros((run.num_heads, len(groups), len(groups)))
    for first, block in run.source(layer, None, 0, run.n):
        keys = np.add.reduceat(block.astype(np.float64), starts, axis=2)  # (H, b, W): key pieces summed
        which = word_of[first:first + block.shape[1]]
        cuts = np.flatnonzero(np.r_[True, np.diff(which) != 0])  # the block's rows of each query word
        out[:, which[cuts]] += np.add.reduceat(keys, cuts, axis=1)
    return (out / sizes[:, None]).astype(np.float32)


JS_CHANGE = "each head's change is the mean Jensen–Shannon divergence (nats) of its"


def choose_basis(run_a: AttentionRun, run_b: AttentionRun) -> tuple[str, str, tuple[AttentionRun, ...]]:
    """(kind, basis sentence, the two runs as compared) for runs of the same shape."""
    if same_tokens(run_a, run_b):
        ids = bool(run_a.token_ids) and bool(run_b.token_ids)  # else strings, as same_tokens compares
        keys_a, keys_b = (token_keys(run_a), token_keys(run_b)) if ids else (run_a.tokens, run_b.tokens)
        differ = sum(a != b for a, b in zip(keys_a, keys_b))
        what = (f"both runs have the same {run_a.n} tokens" if not differ else
                f"both runs come from one tokenizer with {run_a.n} tokens each, position by position "
                f"({differ} of them {'differs' if differ == 1 else 'differ'})")
        return "tokens", f"Compared token by token: {what}, so {JS_CHANGE} attention rows.", (run_a, run_b)
    words_a, words_b = word_flags(run_a), word_flags(run_b)
    aligned, hidden = (run_a, run_b), ""
    if words_a != words_b:
        # the tokenizers place [CLS] / [SEP] / BOS differently: align on the other words
        plain = (without_special(run_a), without_special(run_b))
        if None in plain or len(word_flags(plain[0])) != len(word_flags(plain[1])):
            counts = f"{len(words_a)} and {len(words_b)}"
            if None not in plain and (plain[0] is not run_a or plain[1] is not run_b):
                plain_counts = [len(word_flags(r)) for r in plain]
                counts += f"; {plain_counts[0]} and {plain_counts[1]} without special tokens"
            basis = (f"Compared by head metrics only: the runs have different tokens and different numbers "
                     f"of words ({counts}), so no attention row of A matches one of B; each head's change "
                     f"is the mean absolute difference of its {len(CHANGE_COLUMNS)} head metrics that lie "
                     "in 0–1.")
            return "metrics", basis, (run_a, run_b)
        names = [run.tokens[i] for run, new in zip((run_a, run_b), plain) if new is not run
                 for i in np.flatnonzero(np.asarray(run.special_mask, dtype=bool))]
        aligned, hidden = plain, f" once the special tokens ({', '.join(dict.fromkeys(names))}) were hidden"
    count = len(detail.word_groups(aligned[0].word_ids))
    texts = [[bare(w).strip().lower() for w in detail.word_labels(r.tokens, r.word_ids)] for r in aligned]
    if texts[0] == texts[1]:
        basis = (f"Compared word by word: the runs split the same {count} words into different "
                 f"tokens{hidden}, so every head was merged to word level (summed over a word's key pieces, "
                 f"averaged over its query pieces); {JS_CHANGE} word rows.")
    else:
        basis = (f"Compared word position by word position: the texts differ but both have {count} "
                 f"words{hidden}, so word i of A is set against word i of B and {JS_CHANGE} word rows.")
    return "words", basis, aligned


def basis_kind(run_a: AttentionRun, run_b: AttentionRun) -> str:
    """The kind of basis `compare` will choose ("tokens", "words" or "metrics"), from the tokens and words alone:
    no run is read or copied (special tokens hidden are counted out, as `choose_basis` hides them)."""
    if (run_a.num_layers, run_a.num_heads) != (run_b.num_layers, run_b.num_heads):
        return "metrics"
    if same_tokens(run_a, run_b):
        return "tokens"
    flags = word_flags(run_a), word_flags(run_b)
    words = [len(f) - sum(f) for f in flags]  # the words left once the special ones are hidden
    if flags[0] == flags[1] or (words[0] == words[1] and words[0] > 0):
        return "words"
    return "metrics"


def token_keys(run: AttentionRun) -> list:
    """What identifies each token: its id when the run has ids, else its string."""
    return [int(i) for i in run.token_ids] if run.token_ids else list(run.tokens)


def same_tokens(run_a: AttentionRun, run_b: AttentionRun) -> bool:
    """Whether the token sequences align position by position: the same length, and one
    tokenizer (the same model, e.g. two sentences of a minimal pair, or the same model with
    and without our MHA) or the very same tokens (ids when both runs have them, else strings).
    Special tokens sit at the same places then."""
    if run_a.n != run_b.n:
        return False
    if run_a.model_name == run_b.model_name and run_a.model_name != "array":
        return list(run_a.special_mask) == list(run_b.special_mask)
    if bool(run_a.token_ids) != bool(run_b.token_ids):
        return list(run_a.tokens) == list(run_b.tokens)
    return token_keys(run_a) == token_keys(run_b)


def word_flags(run: AttentionRun) -> list[bool]:
    """One flag per word: True when every token of the word is special ([CLS], [SEP], BOS…)."""
    special = np.asarray(run.special_mask, dtype=bool)
    return [bool(special[g].all()) for g in detail.word_groups(run.word_ids)]


def without_special(run: AttentionRun) -> AttentionRun | None:
    """The run without its special tokens (rows renormalised as `sinks.drop_tokens` does, read a block at a
    time from the run's rows: `row_blocks.kept_source`) and with its word ids renumbered 0, 1, … over the
    words left; the run itself when it has none, None when every token is special."""
    mask = np.asarray(run.special_mask, dtype=bool)
    if not mask.any():
        return run
    if mask.all():
        return None
    kept = np.flatnonzero(~mask)
    ids = np.empty(len(kept), dtype=int)
    for word, group in enumerate(detail.word_groups([run.word_ids[i] for i in kept])):
        ids[group] = word
    def pick(values):
        return [values[i] for i in kept] if len(values) == run.n else list(values)
    return AttentionRun(
        tokens=pick(run.tokens), source=kept_source(run, kept, EMPTY_BELOW), shape=(run.num_layers, run.num_heads),
        is_causal=run.is_causal, num_kv_heads=run.num_kv_heads, model_name=run.model_name,
        token_ids=pick(run.token_ids), raw_tokens=pick(run.raw_tokens), special_mask=pick(run.special_mask),
        word_ids=ids.tolist(), text=run.text, num_input_tokens=max(run.num_input_tokens - int(mask.sum()), len(kept)),
        layer_ids=run.layer_ids, model_layers=run.model_layers, precision=run.precision, lens=run.lens,
        layer_kv_heads=run.layer_kv_heads)


def numeric_columns(table: pd.DataFrame) -> list[str]:
    """The head table's numeric metric columns (not layer, head)."""
    return [c for c in table.columns
            if c not in ("layer", "head") and pd.api.types.is_numeric_dtype(table[c])
            and not pd.api.types.is_bool_dtype(table[c])]


def metric_change(table_a: pd.DataFrame, table_b: pd.DataFrame, num_heads: int) -> np.ndarray:
    """(L, H): per head the mean over CHANGE_COLUMNS of |b − a|, NaN left out, 0 when all are NaN."""
    cols = [c for c in CHANGE_COLUMNS if c in table_a.columns and c in table_b.columns]
    diff = np.abs(table_b[cols].to_numpy(np.float64) - table_a[cols].to_numpy(np.float64))  # (N, C)
    finite = np.isfinite(diff)
    mean = np.where(finite, diff, 0.0).sum(1) / np.maximum(finite.sum(1), 1)
    return mean.reshape(-1, num_heads)


def diff_table(run_a: AttentionRun, run_b: AttentionRun, tables, change: np.ndarray,
               divergence: np.ndarray | None) -> pd.DataFrame:
    """One row per head of two same-shape runs, the most changed first (see `Comparison`)."""
    table_a, table_b = tables
    out = {"layer": table_a["layer"].to_numpy()}
    if list(run_a.layer_ids) != list(run_b.layer_ids):
        out["layer_b"] = table_b["layer"].to_numpy()
    out["head"] = table_a["head"].to_numpy()
    for c in numeric_columns(table_a):
        if c in table_b.columns:
            a, b = table_a[c].to_numpy(np.float64), table_b[c].to_numpy(np.float64)
            out.update({f"{c}_a": a, f"{c}_b": b, f"{c}_diff": b - a})
    out["pattern_a"] = table_a["pattern"].to_numpy()
    out["pattern_b"] = table_b["pattern"].to_numpy()
    if divergence is not None:
        out["js"] = divergence.ravel()
    out["change"] = change.ravel()
    frame = pd.DataFrame(out)
    order = np.argsort(-change.ravel(), kind="stable")
    return frame.iloc[order].reset_index(drop=True)


def depth_table(run_a: AttentionRun, run_b: AttentionRun, tables) -> pd.DataFrame:
    """One row per (run, layer, head) with relative depth = the model's layer number /
    (model layers − 1), so a partial capture lands at its true depth; 0 for one-layer models."""
    frames = []
    for name, run, table in zip("AB", (run_a, run_b), tables):
        depth = np.asarray(run.layer_ids, dtype=np.float64) / max(run.model_layers - 1, 1)  # (L,)
        frame = pd.DataFrame({"run": name, "layer": table["layer"].to_numpy(),
                              "head": table["head"].to_numpy(),
                              "relative_depth": np.repeat(depth, run.num_heads)})
        for c in numeric_columns(table):
            frame[c] = table[c].to_numpy()
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
