"""The row table (`mha_viz.metrics.row_table`, issue 87): a weighted measure is one record. A test table adds one
record of each kind (a diagonal two back, beyond the sink too; the second key; keys a mask of the text marks, beyond
the sink too; a match two tokens on, read as a share of the attention) and every reader follows: the compiled pass
(its loop written from the table), the tensors' backend, the head table and the catalogue, each new measure equal
to a hand computation written here from the record's definition, one row at a time. The default table's words are
docs/head-metrics.md's table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_viz import AttentionRun, metrics
from mha_viz.capture.sinks import EMPTY_BELOW
from mha_viz.metrics.measures import CHOICE_KEYS, current_metrics
from mha_viz.metrics.row_kernels import BlockSums
from mha_viz.metrics.row_measures import TextFacts, measures_from_sums
from mha_viz.metrics.row_stats import RowStats
from mha_viz.metrics.row_table import RECORDS, RowMeasure, RowTable, docs_table, using
from tests.helpers import ROOT


def capitals(tokens: list[str], special: list[bool]) -> np.ndarray:
    return np.array([t[:1].isupper() for t in tokens], dtype=bool)


NEW = (
    RowMeasure("prev2", "offset", "Two back", "mean_i A_i,i−2", "looks two tokens back", "does not", param=-2,
               beyond=True),
    RowMeasure("second", "column", "Second token", "mean_i A_i,1", "looks at the second token", "does not", param=1),
    RowMeasure("capital", "keys", "Capitals", "mean_i Σ_{j capitalised} A_ij", "looks at capitalised tokens",
               "does not", keys=capitals, beyond=True),
    RowMeasure("after2_score", "match", "Two after a copy", "Σ(A ⊙ P)/ΣA,  P[i, j+2] = 1 if tok_j = tok_i, j < i",
               "looks two tokens after an earlier copy", "does not", param=2, reads="share"),
)
TABLE = RowTable(RECORDS + NEW)
TOKENS = ["[CLS]", "The", "cat", "sat", ".", "The", "cat", "ran", ",", "Dogs", "sat", "[SEP]"]
SPECIAL = [True] + [False] * 10 + [True]


def _attention(heads: int, n: int, causal: bool, seed: int) -> np.ndarray:
    a = np.random.default_rng(seed).random((heads, n, n)) ** 4  # peaked rows
    if causal:
        a = np.tril(a)
    return (a / a.sum(-1, keepdims=True)).astype(np.float32)


def _by_hand(A: np.ndarray, facts: TextFacts) -> dict[str, float]:
    """One head's new measures from the records' definitions, one row at a time, in float64."""
    n, skip, A = facts.n, facts.skip, A.astype(np.float64)
    caps = capitals(TOKENS, SPECIAL)
    ids = facts.ids
    rows = {"prev2": [], "second": [], "capital": []}
    kept = {"prev2": [], "capital": []}
    after2 = 0.0
    for i in range(n):
        k = i + 1 if facts.causal else n
        rows["prev2"].append(A[i, i - 2] if i >= 2 else 0.0)
        rows["second"].append(A[i, 1])
        rows["capital"].append(A[i, caps].sum())
        after2 += sum(A[i, j] for j in range(2, n) if ids[j - 2] == ids[i] and j - 2 < i)
        mass = A[i, skip:k].sum()
        if i < skip or k - skip < CHOICE_KEYS or mass < EMPTY_BELOW:
            continue
        b = A[i, skip:k] / mass  # b[j − skip] for key j
        kept["prev2"].append(b[i - 2 - skip] if skip <= i - 2 < k else 0.0)
        kept["capital"].append((b * caps[skip:k]).sum())
    out = {name: np.mean(v) for name, v in rows.items()}
    out.update((f"beyond_{name}", np.mean(v) if v else np.nan) for name, v in kept.items())
    out["after2_score"] = after2 / A.sum()
    return out


@pytest.mark.parametrize("causal", [True, False])
def test_a_new_record_of_each_kind_is_measured_by_both_backends(causal):
    n, H = len(TOKENS), 3
    A = _attention(H, n, causal, seed=1)
    ids = [7, 1, 2, 3, 9, 1, 2, 5, 8, 4, 3, 6]  # "The cat" twice, "sat" twice
    with using(TABLE):
        facts = TextFacts.of(TOKENS, ids, SPECIAL, causal=causal)
        compiled = BlockSums(H, facts, threads=2)
        tensors = RowStats(facts, H, "cpu")
        for r0 in range(0, n, 5):  # blocks of rows, each with every key its rows may see
            r1 = min(n, r0 + 5)
            block = np.ascontiguousarray(A[:, r0:r1, :r1 if causal else n])
            compiled.add(block, r0, 0)
            tensors.add(torch.from_numpy(block), r0, 0)
        found = {"compiled": measures_from_sums(compiled.finish()[0], n), "tensors": tensors.finish()}
    assert facts.table is TABLE and "after2_score" in TABLE.row_sums
    for h in range(H):
        want = _by_hand(A[h], facts)
        for backend, measures in found.items():
            for name, value in want.items():
                assert measures[name][h] == pytest.approx(value, abs=2e-6, nan_ok=True), (backend, name, h)
    # the old measures are the default table's, unchanged by the new records
    with using(RowTable()):
        plain = BlockSums(H, TextFacts.of(TOKENS, ids, SPECIAL, causal=causal), threads=1)
    plain.add(np.ascontiguousarray(A), 0, 0)
    old = measures_from_sums(plain.finish()[0], n, plain.table)
    for name in old:
        np.testing.assert_allclose(found["compiled"][name], old[name], atol=2e-6, equal_nan=True)


def test_the_head_table_and_the_catalogue_take_a_new_record_in_its_place():
    n = len(TOKENS)
    run = AttentionRun.from_array(_attention(2, n, False, seed=2).reshape(1, 2, n, n), TOKENS)
    run.special_mask = SPECIAL
    with using(TABLE):
        table = metrics.head_table(run)
        catalogue = list(current_metrics())
    assert "prev2" not in metrics.head_table(run).columns  # outside the block: the default table
    for name in ("prev2", "second", "capital", "after2_score", "beyond_prev2", "beyond_capital"):
        assert name in table.columns and name in catalogue, name
    assert catalogue.index("second") < catalogue.index("prev_token_score") < catalogue.index("after2_score")
    assert catalogue.index("after2_score") < catalogue.index("sink") < catalogue.index("beyond_capital")
    facts = TextFacts.of(TOKENS, run.token_ids, SPECIAL, causal=False, table=TABLE)
    for h in range(2):
        want = _by_hand(run.attentions[0, h], facts)
        row = table[(table["layer"] == 0) & (table["head"] == h)].iloc[0]
        for name, value in want.items():
            assert row[name] == pytest.approx(value, abs=2e-6, nan_ok=True), name


def test_a_record_says_what_is_wrong_with_it():
    with pytest.raises(ValueError, match="kind"):
        RowMeasure("x", "diagonal", "X", "", "", "")
    with pytest.raises(ValueError, match="names its keys"):
        RowMeasure("x", "keys", "X", "", "", "")
    with pytest.raises(ValueError, match="m ≥ 0"):
        RowMeasure("x", "match", "X", "", "", "", param=-1)
    with pytest.raises(ValueError, match="beyond the sink"):
        RowMeasure("x", "match", "X", "", "", "", beyond=True)
    with pytest.raises(ValueError, match="share a name"):
        RowTable(RECORDS + RECORDS[:1])


def test_the_docs_table_is_written_from_the_records():
    docs = (ROOT / "docs" / "head-metrics.md").read_text()
    assert docs_table() in docs
    assert all(f"`{r.name}`" in docs_table() for r in RECORDS)


def test_the_effective_table_takes_the_new_records_but_marked_keys():
    """A hybrid's effective attention (`mixing_measures`, each row |A| normalised) is measured by the same records;
    one of marked keys, which reads the text's tokens, is left out."""
    from mha_viz.metrics.mixing_measures import effective_names, group_measures

    n = 14
    a = np.tril(np.random.default_rng(5).normal(size=(2, n, n)))
    ids = np.random.default_rng(6).integers(0, 4, n)
    with using(TABLE):
        got = group_measures(a, ids)
        names = effective_names()
    assert {"prev2", "second", "after2_score"} <= set(names) and "capital" not in names
    p = np.abs(a) / np.abs(a).sum(-1, keepdims=True)
    for g in range(2):
        want = {"prev2": np.mean([p[g, t, t - 2] if t >= 2 else 0.0 for t in range(n)]),
                "second": p[g, :, 1].mean(),
                "after2_score": np.mean([sum(p[g, t, j] for j in range(2, n) if ids[j - 2] == ids[t] and j - 2 < t)
                                         for t in range(n)])}
        for name, value in want.items():
            assert got[name][g] == pytest.approx(value, abs=1e-9), name


def test_the_cross_table_takes_the_new_records_that_read_the_keys_alone():
    """An encoder–decoder's cross-attention (`cross_attention.cross_stats`, target rows over source keys) is measured
    by the records of a column or of marked keys; one of a diagonal or a match (about a text attending to itself)
    is left out."""
    from mha_viz.metrics.cross_attention import columns, cross_stats

    a = np.random.default_rng(7).random((2, 3, 5, len(TOKENS)))
    a /= a.sum(-1, keepdims=True)
    with using(TABLE):
        stats = cross_stats(a, SPECIAL, TOKENS)
        names = list(columns())
    assert list(stats) == names and {"second", "capital", "first", "sep"} <= set(names)
    assert not {"prev2", "after2_score", "self"} & set(names)
    np.testing.assert_allclose(stats["second"], a[..., 1].mean(-1))
    np.testing.assert_allclose(stats["capital"], a[..., capitals(TOKENS, SPECIAL)].sum(-1).mean(-1))
