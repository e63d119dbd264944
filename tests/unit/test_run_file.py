"""`AttentionRun.save` / `load` and `mha_viz.capture.run_file`: a run survives the `.npz` round trip
field by field (value norms included; a file without them loads without them), float16 halves
it within 1e-3, and a bad or hostile file is a ValueError."""

from __future__ import annotations

import dataclasses
import io
import zipfile

import numpy as np
import pytest

from mha_viz.capture import run_file
from mha_viz.capture.run import AttentionRun

# a file holds a dense run: its rows' source and shape come from its array, and a long run's summary
# (the scan) is not saved with it, nor the model's own outputs (`own`: a loaded run's Switch heads off runs its pass)
FIELDS = [f.name for f in dataclasses.fields(AttentionRun)
          if f.name not in ("hidden", "source", "shape", "summary", "own")]


def _stochastic(shape, rng) -> np.ndarray:
    a = rng.random(shape).astype(np.float32) ** 4  # peaked rows, like real heads
    return a / a.sum(-1, keepdims=True)


def _run(n: int = 12, L: int = 3, H: int = 4) -> AttentionRun:
    """A run with every field set to something other than its default."""
    rng = np.random.default_rng(0)
    tokens = ["[CLS]", "the", "cat", "<script>x</script>", "</script>", "é ü", "the", "\u200bz",
              "tab\there", "", "end\x00", "[SEP]"][:n]
    return AttentionRun(
        tokens=tokens, attentions=_stochastic((L, H, n, n), rng), is_causal=False, num_kv_heads=2,
        model_name="org/model-ß", token_ids=list(range(100, 100 + n)),
        raw_tokens=[f"raw{i}" for i in range(n)], special_mask=[i in (0, n - 1) for i in range(n)],
        word_ids=[i // 2 for i in range(n)], text="the cat <b>bold</b>\nline two\x00", num_input_tokens=n + 5,
        num_input_tokens_is_estimate=True,
        head_outputs=rng.standard_normal((L, H, n, 8)).astype(np.float32), layer_ids=[1, 3, 5],
        model_layers=6, value_norms=(rng.random((L, H, n)) * 3 + 0.1).astype(np.float32))


def _assert_same(a: AttentionRun, b: AttentionRun, atol: float = 0.0) -> None:
    for name in FIELDS:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert y.dtype == np.float32 and y.shape == x.shape, name
            np.testing.assert_allclose(y, x, atol=atol, rtol=atol, err_msg=name)
        else:
            assert x == y and type(x) is type(y), (name, x, y)


def test_round_trip_every_field(tmp_path):
    run = _run()
    path = tmp_path / "run.data"  # written as named: no '.npz' appended
    run.save(path)
    assert path.exists() and not (tmp_path / "run.data.npz").exists()
    back = AttentionRun.load(path)
    _assert_same(run, back)
    assert back.text.endswith("\x00") and back.tokens[10] == "end\x00"  # numpy would drop these NULs


def test_round_trip_causal_without_head_outputs():
    rng = np.random.default_rng(1)
    a = np.tril(rng.random((2, 2, 5, 5))).astype(np.float32)
    run = AttentionRun.from_array(a / a.sum(-1, keepdims=True), list("abcde"), is_causal=True)
    back = AttentionRun.load(run_file.to_bytes(run))
    _assert_same(run, back)
    assert back.is_causal and back.head_outputs is None and back.token_ids == []


def test_float16_close_rows_still_sum_to_one_and_smaller():
    run = _run()
    half = run_file.to_bytes(run, float16=True)
    full = run_file.to_bytes(run)
    back = AttentionRun.load(half)
    _assert_same(run, back, atol=1e-3)
    np.testing.assert_allclose(back.attentions.sum(-1), 1.0, atol=2e-3)
    with np.load(io.BytesIO(half)) as z:
        assert z["attentions"].dtype == z["head_outputs"].dtype == z["value_norms"].dtype == np.float16
    assert len(half) < 0.75 * len(full), (len(half), len(full))


def test_float16_keeps_float32_for_values_out_of_its_range():
    run = _run()
    run.head_outputs[0, 0, 0, 0] = 1e6  # beyond float16's 65504: would turn into inf
    back = AttentionRun.load(run_file.to_bytes(run, float16=True))
    assert back.head_outputs[0, 0, 0, 0] == 1e6


def test_value_norms_kept_exactly_in_float32_and_within_float16_rounding():
    run = _run()
    exact = AttentionRun.load(run_file.to_bytes(run)).value_norms
    assert exact.dtype == np.float32 and np.array_equal(exact, run.value_norms)
    half = AttentionRun.load(run_file.to_bytes(run, float16=True)).value_norms
    assert half.dtype == np.float32 and not np.array_equal(half, run.value_norms)  # rounded, not lost
    np.testing.assert_allclose(half, run.value_norms, rtol=2**-11, atol=0)  # float16: 11 significant bits


def test_a_file_without_value_norms_loads_without_them():
    """Files written before value norms were saved (or from a run whose value path cannot be read)."""
    older = run_file.arrays(_run())
    del older["value_norms"]
    back = AttentionRun.load(_npz(**older))
    assert back.value_norms is None and back.n == 12
    np.testing.assert_array_equal(back.head_outputs, _run().head_outputs)


def test_a_file_without_the_estimate_flag_reads_its_count_as_exact():
    """Files written before long texts' counts were estimated: every count in them was exact."""
    older = run_file.arrays(_run())
    del older["num_input_tokens_is_estimate"]
    back = AttentionRun.load(_npz(**older))
    assert back.num_input_tokens == 17 and back.num_input_tokens_is_estimate is False
    assert AttentionRun.load(run_file.to_bytes(_run())).num_input_tokens_is_estimate is True


def test_hidden_tokens_keep_their_value_norm_columns():
    run = _run()
    mask = np.zeros(run.n, dtype=bool)
    mask[[0, 4, 5, 11]] = True  # not one block: each kept key must keep its own column
    shown = run.drop_tokens(mask)
    kept = [j for j in range(run.n) if not mask[j]]
    assert shown.tokens == [run.tokens[j] for j in kept]
    for col, j in enumerate(kept):
        np.testing.assert_array_equal(shown.value_norms[:, :, col], run.value_norms[:, :, j])
    back = AttentionRun.load(run_file.to_bytes(shown))
    np.testing.assert_array_equal(back.value_norms, shown.value_norms)


def test_file_object_paths():
    run = _run()
    buf = io.BytesIO()
    run.save(buf)
    buf.seek(0)
    _assert_same(run, AttentionRun.load(buf))
    assert buf.getvalue() == run_file.to_bytes(run)


def test_hidden_tokens_saved_as_shown_with_their_label():
    run = _run()
    shown = run.drop_tokens(np.asarray(run.special_mask))
    data = run_file.to_bytes(shown)
    back = AttentionRun.load(data)
    assert back.tokens == run.tokens[1:-1] and back.hidden is None
    np.testing.assert_array_equal(back.attentions, shown.attentions)
    assert run_file.hidden_label(data) == shown.hidden.label
    assert run_file.hidden_label(run_file.to_bytes(run)) is None


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def test_object_array_refused_not_unpickled():
    called = []

    class Boom:
        def __reduce__(self):
            return (called.append, ("unpickled",))

    good = run_file.arrays(_run())
    data = _npz(**good | {"tokens": np.array([Boom()] * 12, dtype=object)})
    with pytest.raises(ValueError, match="Python objects"):
        AttentionRun.load(data)
    assert not called


@pytest.mark.parametrize("data", [b"", b"not a zip at all", b"PK\x03\x04" + b"\x00" * 40])
def test_garbage_is_a_value_error(data):
    with pytest.raises(ValueError, match="not a readable mha-viz run file"):
        AttentionRun.load(data)


def test_truncated_file_is_a_value_error(tmp_path):
    data = run_file.to_bytes(_run())
    for cut in (len(data) // 2, len(data) - 10):
        with pytest.raises(ValueError, match="not a readable mha-viz run file"):
            AttentionRun.load(data[:cut])


def test_npy_or_foreign_zip_is_a_value_error():
    buf = io.BytesIO()
    np.save(buf, np.zeros(3))
    with pytest.raises(ValueError, match="not a readable"):
        AttentionRun.load(buf.getvalue())
    z = io.BytesIO()
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match="not a readable"):
        AttentionRun.load(z.getvalue())


def test_missing_arrays_named():
    good = run_file.arrays(_run())
    del good["attentions"], good["layer_ids"]
    with pytest.raises(ValueError, match="missing attentions, layer_ids"):
        AttentionRun.load(_npz(**good))


def test_newer_format_refused():
    good = run_file.arrays(_run())
    good["format_version"] = np.array(run_file.FORMAT_VERSION + 1)
    with pytest.raises(ValueError, match="newer mha-viz"):
        AttentionRun.load(_npz(**good))


@pytest.mark.parametrize("name, value, message", [
    ("attentions", np.full((2, 3, 4), 0.25, dtype=np.float32), "shape \\(layers, heads, n, n\\)"),
    ("tokens", np.array(["a"] * 11), "tokens must have shape \\(12,\\)"),
    ("layer_ids", np.array([0, 1]), "layer_ids must have shape \\(3,\\)"),
    ("token_ids", np.arange(5), "token_ids must be empty or 12 ids"),
    ("head_outputs", np.zeros((3, 4, 11, 8), dtype=np.float32), "head_outputs must be floats"),
    ("value_norms", np.ones((3, 4, 11), dtype=np.float32), "value_norms must be floats of shape \\(3, 4, 12\\)"),
    ("value_norms", np.full((3, 4, 12), -1.0, dtype=np.float32), "value_norms must be finite and non-negative"),
    ("num_kv_heads", np.array(3), "must divide"),
    ("layer_ids", np.array([1, 3, 9]), "layer_ids must lie in 0..5"),
])
def test_wrong_shapes_named(name, value, message):
    good = run_file.arrays(_run())
    good[name] = value
    with pytest.raises(ValueError, match=message):
        AttentionRun.load(_npz(**good))


def test_not_probabilities_refused():
    good = run_file.arrays(_run())
    good["attentions"] = good["attentions"] * 2
    with pytest.raises(ValueError, match="sum to 1"):
        AttentionRun.load(_npz(**good))
    good["attentions"][0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        AttentionRun.load(_npz(**good))


def test_max_bytes_refuses_before_loading():
    data = run_file.to_bytes(_run())
    with pytest.raises(ValueError, match="over the limit"):
        AttentionRun.load(data, max_bytes=1000)
    assert AttentionRun.load(data, max_bytes=10**6).n == 12


def test_a_forged_string_length_is_refused_not_allocated():
    """A 1 KB file must not make the reader build a 2 GB string (tokens_len says how long each
    token is, to restore trailing NULs; it can never exceed what the file stores)."""
    arrays = run_file.arrays(_run())
    arrays["tokens_len"] = np.array([2 * 10**9] + [1] * (len(arrays["tokens"]) - 1))
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    with pytest.raises(ValueError, match="tokens_len"):
        run_file.read(buf.getvalue())


def test_a_run_saved_as_contributions_loads_as_contributions():
    from mha_viz.interventions import attribution

    shown = attribution.as_contributions(_run())
    back = AttentionRun.load(run_file.to_bytes(shown))
    assert back.lens == shown.lens == "value-weighted (‖α f(x)‖, row-normalised)"
    assert np.array_equal(back.attentions, shown.attentions)
    assert AttentionRun.load(run_file.to_bytes(_run())).lens == ""  # weights stay weights
