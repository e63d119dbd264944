"""A model's composition and copying scores kept on disk (`mha_viz.circuits.kept`): a second load of the same
weights, a distinct model object as another process would have, reads them back without computing (the computation
is made to fail), and gets the very arrays; one weight changed, or the weights in another precision, are computed
anew; a file that does not hold the scores is computed again and replaced; MHA_VIZ_KEEP_SCORES=0 keeps nothing;
and what is worth keeping follows from the two costs (SmolLM2 kept, MiniLM not). A model whose scores take too long
to compute unasked (`circuits.ahead`) has them read back ahead where an earlier process kept them (its hint), and
nothing hashed or computed where none did.

The suite itself runs with keeping off (tests/helpers.py's SUITE_ONLY_ENV: the other tests of these scores must
compute them); here it is on, in a cache folder of the test's own, on the random-init Llama (grouped-query
attention), whose scores take milliseconds: the hash's rate is raised so that they are worth keeping."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import mha_viz
from mha_viz.circuits import ahead, composition, kept
from mha_viz.progress import Cancelled


@pytest.fixture
def keeping(monkeypatch, tmp_path):
    monkeypatch.setenv("MHA_VIZ_KEEP_SCORES", "1")
    monkeypatch.setenv("MHA_VIZ_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kept, "HASH_RATE", 1e15)  # a hash of no cost: every model's scores are worth keeping
    return tmp_path / kept.FOLDER


def _load(folder, **kwargs) -> mha_viz.LoadedModel:
    return mha_viz.load_model(str(folder), device="cpu", **kwargs)


def _never(*args, **kwargs):
    raise AssertionError("computed, where the scores were kept on disk")


def _computing_fails(monkeypatch) -> list:
    """Both computations made to fail, and each call recorded: a thread swallows what they raise, the list says."""
    calls: list = []

    def never(*args, **kwargs):
        calls.append(args)
        _never()
    monkeypatch.setattr(composition, "_pair_scores", never)
    monkeypatch.setattr(composition, "_copying", never)
    return calls


def test_a_second_load_reads_the_scores_back_without_computing(llama_dir, keeping, monkeypatch):
    first = _load(llama_dir)
    scores, copying = composition.composition_scores(first), composition.copying_scores(first)
    assert sorted(p.name.split("-")[0] for p in keeping.glob("*.npz")) == ["composition", "copying"]
    second = _load(llama_dir)  # the same weights, another object: nothing kept in memory for it
    assert second.hf_model is not first.hf_model and not composition.composition_known(second)
    monkeypatch.setattr(composition, "_pair_scores", _never)
    monkeypatch.setattr(composition, "_copying", _never)
    again = composition.composition_scores(second)
    for kind in composition.KINDS:
        np.testing.assert_array_equal(again[kind], scores[kind])  # NaN where the first head is not earlier, both
    np.testing.assert_array_equal(composition.copying_scores(second), copying)
    assert composition.composition_known(second) and composition.copying_known(second)


def test_changed_weights_or_another_precision_are_computed_anew(llama_dir, keeping):
    scores = composition.composition_scores(_load(llama_dir))
    changed = _load(llama_dir)
    o_proj = changed.hf_model.model.layers[0].self_attn.o_proj.weight
    with torch.no_grad():  # noise on what head 0 of layer 0 writes (a scale alone: the same normalised scores)
        o_proj[:, :changed.d_k] += torch.randn(o_proj.shape[0], changed.d_k, generator=torch.Generator().manual_seed(1))
    assert kept.fingerprint(changed) != kept.fingerprint(_load(llama_dir))
    moved = composition.composition_scores(changed)
    assert not np.allclose(moved["v"][0, 0], scores["v"][0, 0], equal_nan=True)  # its scores as a writer moved
    half = _load(llama_dir, dtype="bfloat16")
    assert kept.fingerprint(half) not in (kept.fingerprint(changed), kept.fingerprint(_load(llama_dir)))
    composition.composition_scores(half)
    assert len(list(keeping.glob("composition-*.npz"))) == 3


def test_a_file_that_does_not_hold_the_scores_is_computed_again_and_replaced(llama_dir, keeping, monkeypatch):
    want = composition.composition_scores(_load(llama_dir))
    model = _load(llama_dir)
    where = kept.path(model, "composition")
    where.write_bytes(b"not an npz file")
    calls = []
    real = composition._pair_scores
    monkeypatch.setattr(composition, "_pair_scores", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = composition.composition_scores(model)
    assert calls == [1]
    for kind in composition.KINDS:
        np.testing.assert_array_equal(got[kind], want[kind])
    np.savez(where, q=want["q"][:1], k=want["k"], v=want["v"])  # readable, but the wrong shape: not the scores
    assert kept.read(model, "composition", dict.fromkeys(composition.KINDS, want["q"].shape)) is None
    assert not where.exists()


def test_nothing_is_kept_with_keeping_off(llama_dir, keeping, monkeypatch):
    monkeypatch.setenv("MHA_VIZ_KEEP_SCORES", "0")
    model = _load(llama_dir)
    composition.composition_scores(model), composition.copying_scores(model)
    assert not keeping.exists()


def test_only_the_files_used_last_stay(llama_dir, keeping, monkeypatch):
    monkeypatch.setattr(kept, "MAX_FILES", 2)
    model = _load(llama_dir)
    composition.composition_scores(model), composition.copying_scores(model)
    composition.composition_scores(_load(llama_dir, dtype="bfloat16"))
    assert len(list(keeping.glob("*.npz"))) == 2


@pytest.mark.model
def test_what_is_worth_keeping_follows_the_two_costs(minilm, smollm2, monkeypatch):
    """Computing SmolLM2's composition scores takes over twice as long as hashing its weights: kept; MiniLM's take
    less than its hash: computed each time. The setting turns keeping off for both."""
    monkeypatch.setenv("MHA_VIZ_KEEP_SCORES", "1")
    assert composition.composition_seconds(smollm2) > 2 * kept.hash_seconds(smollm2) > 0
    assert composition.worth_keeping(smollm2) and not composition.worth_keeping(minilm)
    monkeypatch.setenv("MHA_VIZ_KEEP_SCORES", "0")
    assert not composition.worth_keeping(smollm2)


def test_weights_not_in_memory_keep_nothing_and_the_scores_are_computed(llama_dir, keeping, monkeypatch):
    """A model spread to disk by accelerate has weights on the meta device, and a weight that cannot be read as
    bytes stops the hash as well: no name, nothing kept, the scores computed as without keeping."""
    want = composition.composition_scores(_load(llama_dir))
    for stand_in in (torch.empty(2, device="meta"), object()):
        model = _load(llama_dir)
        monkeypatch.setattr(kept, "_tensors", lambda m, t=stand_in: [("model.embed_tokens.weight", t)])
        assert kept.fingerprint(model) is None and kept.path(model, "composition") is None
        monkeypatch.setattr(kept, "hash_seconds", lambda m: 0.0)
        got = composition.composition_scores(model)
        np.testing.assert_array_equal(got["q"], want["q"])
    assert len(list(keeping.glob("*.npz"))) == 1  # the first load's composition scores, none for the others


def test_a_file_this_process_may_not_read_is_left_and_a_read_marks_it_used(llama_dir, keeping, monkeypatch):
    """A folder of another user's, or out of file handles: the scores are computed and the file stays for the
    processes that can read it. A read marks its file as the most recently used (the last to be pruned)."""
    want = composition.composition_scores(_load(llama_dir))
    model = _load(llama_dir)
    where = kept.path(model, "composition")
    os.utime(where, (1_000_000_000, 1_000_000_000))
    shapes = dict.fromkeys(composition.KINDS, want["q"].shape)
    real = np.load

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(np, "load", refused)
    assert kept.read(model, "composition", shapes) is None
    assert where.exists() and where.stat().st_mtime == 1_000_000_000
    monkeypatch.setattr(np, "load", real)
    got = kept.read(model, "composition", shapes)
    np.testing.assert_array_equal(got["v"], want["v"])
    assert where.stat().st_mtime > 1_000_000_000


def test_the_name_changes_with_the_code_that_computes_the_scores(llama_dir, keeping, monkeypatch):
    model = _load(llama_dir)
    before = kept.path(model, "composition")
    assert kept.code_version() in before.name
    monkeypatch.setattr(kept, "code_version", lambda: "another")
    assert kept.path(model, "composition") != before


def test_the_code_version_follows_every_source_and_the_libraries(tmp_path, monkeypatch):
    """`code_version` hashes the sources of mha_viz.circuits and of mha_viz_models (here copies of them, read where
    the module looks: its own folder and mha_viz_models'): a byte changed in either, or a file added, changes it;
    so does another PyTorch."""
    import shutil

    import mha_viz_models

    circuits = tmp_path / "circuits"
    models = tmp_path / "mha_viz_models"
    shutil.copytree(Path(kept.__file__).parent, circuits, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(Path(mha_viz_models.__file__).parent, models, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(kept, "__file__", str(circuits / "kept.py"))
    monkeypatch.setattr(mha_viz_models, "__file__", str(models / "__init__.py"))

    def version() -> str:
        kept.code_version.cache_clear()
        return kept.code_version()

    try:
        seen = [version()]
        assert version() == seen[0]  # the same sources: the same name
        with open(circuits / "composition.py", "a") as f:
            f.write("\n")
        seen.append(version())
        with open(models / "cache_folder.py", "a") as f:
            f.write("# changed\n")
        seen.append(version())
        (models / "loading" / "new_reader.py").write_text("")
        seen.append(version())
        monkeypatch.setattr(torch, "__version__", "0.0.0")
        seen.append(version())
        assert len(set(seen)) == len(seen), seen
    finally:  # the real sources' version for the tests after this one
        monkeypatch.undo()
        kept.code_version.cache_clear()


def _ahead(model, seconds: float = 60) -> threading.Thread | None:
    """`ahead.start` for `model`, its thread waited for."""
    thread = ahead.start(model)
    if thread is not None:
        thread.join(seconds)
        assert not thread.is_alive()
    return thread


def test_a_large_models_kept_scores_are_read_back_ahead_and_never_computed(llama_dir, keeping, monkeypatch):
    """As an 8B model in a second process: its scores take over AHEAD_S, so `ahead` computes nothing unasked; where
    an earlier load kept them, it reads them back, and the page finds them known (no button, no admission). A load of
    another precision (another hint) starts nothing and hashes nothing; the same names and shapes with other weights
    (the hint there) hash them, find no file, and compute nothing."""
    first = _load(llama_dir)
    scores, copying = composition.composition_scores(first), composition.copying_scores(first)
    assert len(list(keeping.glob("*.hint"))) == 1  # one model: one hint for both kinds
    _as_large(monkeypatch)
    computed = _computing_fails(monkeypatch)
    second = _load(llama_dir)
    assert not composition.composition_known(second) and _ahead(second) is not None
    assert composition.composition_known(second) and composition.copying_known(second)
    again = composition.composition_scores(second)
    for kind in composition.KINDS:
        np.testing.assert_array_equal(again[kind], scores[kind])
    np.testing.assert_array_equal(composition.copying_scores(second), copying)

    half = _load(llama_dir, dtype="bfloat16")  # no hint for it: nothing hashed
    hashed = []
    real = kept.fingerprint
    monkeypatch.setattr(kept, "fingerprint", lambda model, going=None: hashed.append(model) or real(model, going))
    assert not kept.hinted(half) and _ahead(half) is None and hashed == []
    changed = _load(llama_dir)
    with torch.no_grad():
        changed.hf_model.model.layers[0].self_attn.o_proj.weight.mul_(2.0).add_(0.01)
    assert kept.hinted(changed) and _ahead(changed) is not None and hashed  # hinted: hashed, then nothing found
    assert not composition.composition_known(changed) and not composition.copying_known(changed)
    assert computed == []
    # the hint that led to nothing is gone: the next load of either hashes nothing, until a read of the scores (the
    # page's) makes it again
    assert not kept.hinted(changed) and not list(keeping.glob("*.hint"))
    hashed.clear()
    third = _load(llama_dir)
    assert _ahead(third) is None and hashed == [] and not composition.composition_known(third)
    np.testing.assert_array_equal(composition.composition_scores(third)["k"], scores["k"])
    assert kept.hinted(third) and computed == []


def _as_large(monkeypatch) -> None:
    """Models whose scores take over AHEAD_S (`ahead` computes none unasked), still worth keeping."""
    monkeypatch.setattr(composition, "composition_seconds", lambda model: ahead.AHEAD_S + 1)
    monkeypatch.setattr(kept, "hash_seconds", lambda model: 0.0)


def test_composition_scores_kept_without_their_copying_scores_are_left_to_the_page(llama_dir, keeping, monkeypatch):
    """Read back ahead, the composition scores alone would have the page compute the copying ones unasked (an 8B
    model's take minutes): where only they were kept, nothing is known ahead, and nothing computed."""
    first = _load(llama_dir)
    composition.composition_scores(first)
    composition.copying_scores(first)
    for copying in keeping.glob("copying-*.npz"):
        copying.unlink()
    _as_large(monkeypatch)
    computed = _computing_fails(monkeypatch)
    second = _load(llama_dir)
    assert _ahead(second) is not None and computed == []
    assert not composition.composition_known(second) and not composition.copying_known(second)


def test_reading_back_ahead_stops_between_two_weights_at_the_processs_exit(llama_dir, keeping, monkeypatch):
    """An 8B model's hash is half a minute: the process's exit (`ahead.stop_all`) stops it at the next weight, reads
    nothing, and remembers no hash, so that the weights are hashed in full when next asked."""
    first = _load(llama_dir)
    composition.composition_scores(first)
    composition.copying_scores(first)
    _as_large(monkeypatch)
    monkeypatch.setattr(ahead, "_EXIT", threading.Event())  # this test's exit, not the process's
    inside = threading.Event()

    class Gated(list):
        """The weights as the hash walks them: after the first, it waits for the exit."""
        armed, walked = False, 0

        def __iter__(self):
            for i, item in enumerate(list.__iter__(self)):
                if self.armed and i == 1:
                    inside.set()
                    ahead._EXIT.wait(60)
                self.walked += self.armed
                yield item
    walks: list[Gated] = []
    listed, tied = kept._tensors, kept._tied

    def armed(tensors):  # the hash lists the tied weights just before it walks them
        found = tied(tensors)
        tensors.armed = True
        return found
    monkeypatch.setattr(kept, "_tensors", lambda model: walks.append(Gated(listed(model))) or walks[-1])
    monkeypatch.setattr(kept, "_tied", armed)
    second = _load(llama_dir)
    thread = ahead.start(second)
    assert thread is not None and inside.wait(60)
    ahead.stop_all(wait_s=60)
    assert not thread.is_alive()
    assert walks[-1].walked < len(walks[-1]), "the hash went on past the exit"
    assert not composition.composition_known(second) and kept.hinted(second)
    assert kept.fingerprint(second) == kept.fingerprint(first)  # hashed in full now: nothing was remembered


def test_a_tied_weight_is_read_once_and_named_as_the_same(llama_dir, keeping):
    """SmolLM2's embedding is its unembedding: hashed once, the second name marked as the same tensor. The estimate
    counts it once; the name still follows a change made through either."""
    model = _load(llama_dir)
    hf = model.hf_model
    with torch.no_grad():
        hf.lm_head.weight = hf.model.embed_tokens.weight  # tied, as SmolLM2's are
    once = sum(t.numel() * t.element_size() for name, t in hf.state_dict().items() if name != "lm_head.weight")
    assert kept.hash_seconds(model) == pytest.approx(once / kept.HASH_RATE)
    other = _load(llama_dir)
    with torch.no_grad():
        other.hf_model.lm_head.weight = other.hf_model.model.embed_tokens.weight
        other.hf_model.lm_head.weight[0, 0] += 1.0  # through the unembedding's name: the embedding moved too
    untied = _load(llama_dir)
    assert len({kept.fingerprint(model), kept.fingerprint(other), kept.fingerprint(untied)}) == 3


def test_a_model_whose_weights_were_changed_in_place_after_their_hash_keeps_and_reads_nothing(llama_dir, keeping):
    """In a notebook the weights are changed in place (a head zeroed) after a first score was kept: the model's hash
    no longer says what its scores were computed from (its per-head weights are kept from before), so nothing more of
    it is kept under either weights' hash, and nothing read; a later load of the original weights computes its own."""
    model = _load(llama_dir)
    composition.copying_scores(model)  # the hash taken on the original weights
    assert kept.fingerprint(model) is not None
    with torch.no_grad():
        model.hf_model.model.layers[0].self_attn.o_proj.weight[:, :8] = 0.0  # head 0 writes less
    assert kept.fingerprint(model) is None
    composition.composition_scores(model)
    assert [p.name.split("-")[0] for p in keeping.glob("*.npz")] == ["copying"]
    assert kept.read(model, "copying", {"copying": (model.num_layers, model.num_heads)}) is None


def test_composition_scores_of_a_model_refused_copying_scores_are_read_back_ahead(llama_dir, keeping, monkeypatch):
    """A model whose copying scores are refused by its config alone (a decoder's logit soft-capping, Gemma 2's) has
    none kept: its composition scores read back ahead are known at once, where it would otherwise hash its weights at
    every start for nothing."""
    first = _load(llama_dir)
    first.hf_model.config.final_logit_softcapping = 30.0
    with pytest.raises(Exception, match="soft-capping"):
        composition.copying_scores(first)
    scores = composition.composition_scores(first)
    assert [p.name.split("-")[0] for p in keeping.glob("*.npz")] == ["composition"]
    _as_large(monkeypatch)
    computed = _computing_fails(monkeypatch)
    second = _load(llama_dir)
    second.hf_model.config.final_logit_softcapping = 30.0
    assert _ahead(second) is not None and computed == []
    assert composition.composition_known(second)
    np.testing.assert_array_equal(composition.composition_scores(second)["q"], scores["q"])
    with pytest.raises(Exception, match="soft-capping"):  # refused at once, as for the first
        composition.copying_scores(second)
    assert computed == []


def test_nothing_starts_ahead_once_the_process_exits(llama_dir, monkeypatch):
    """The exit lists the threads it waits for: one started after that would be left inside PyTorch."""
    monkeypatch.setattr(ahead, "_EXIT", threading.Event())
    ahead.stop_all(wait_s=0)
    assert ahead.start(_load(llama_dir)) is None


def test_a_stop_asked_while_the_weights_are_hashed_stops_the_hash(llama_dir, keeping):
    """The page's or the thread's stop reaches the hash too: stopped there, the scores are cancelled and no hash is
    remembered, so that the next call hashes the weights in full."""
    model = _load(llama_dir)
    asked = []
    with pytest.raises(Cancelled):
        composition.composition_scores(model, progress=lambda fraction, message: asked.append(message) is False)
    assert asked[0] == "composition scores: looking for the kept ones"
    assert model.hf_model not in kept._FINGERPRINTS
