"""mha-viz's cache folder (mha_viz_models.cache_folder): $MHA_VIZ_CACHE_DIR or ~/.cache/mha-viz, decided in that
one module; the converted GGUF weights and the compiled metric loops are kept under it."""

from __future__ import annotations

import ast
import hashlib
import os
import stat
import time
from importlib.metadata import version

import pytest

from mha_viz import compiled
from mha_viz_models import cache_folder
from mha_viz_models.loading import gguf_cache
from tests.helpers import ROOT

SETTING = "MHA_VIZ_CACHE_DIR"


def test_the_setting_or_the_home_cache_decides_the_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(SETTING, str(tmp_path / "here"))
    assert cache_folder.cache_root() == tmp_path / "here"
    monkeypatch.delenv(SETTING)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder.cache_root() == tmp_path / "home" / ".cache" / "mha-viz"


def test_converted_gguf_weights_and_compiled_loops_live_under_it(monkeypatch, tmp_path):
    """A GGUF file already converted (its folder planted where the key by hand puts it: the transformers version,
    the size, the first and the last bytes, here the whole 4-byte file twice) is read back
    from under $MHA_VIZ_CACHE_DIR without converting; the compiled loops' folder is its numba/."""
    monkeypatch.setenv(SETTING, str(tmp_path / "cache"))
    gguf = tmp_path / "model" / "tiny.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    key = hashlib.sha256(f"{version('transformers')}|4".encode() + b"GGUF" + b"GGUF").hexdigest()[:16]
    planted = tmp_path / "cache" / "gguf" / f"tiny-{key}"
    planted.mkdir(parents=True)
    (planted / "config.json").write_text("{}")
    (planted / "model.safetensors").write_bytes(b"")
    said = []
    assert gguf_cache.gguf_cache(gguf.parent, gguf, lambda *a: said.append(a)) == planted
    assert not said  # read back, not converted
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    assert compiled.cache_folder() == tmp_path / "cache" / "numba" / compiled.source_hash()


def _modules():
    for root in ("mha_viz", "models/mha_viz_models"):
        for path in sorted((ROOT / root).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text())


def test_one_module_reads_the_setting_and_every_other_imports_it_from_there():
    """No second copy of the rule: only cache_folder.py names the setting or defines cache_root, and every
    module that uses cache_root imports it from mha_viz_models.cache_folder."""
    naming, defining, importing = [], [], {}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == SETTING:
                naming.append(path)
            if isinstance(node, ast.FunctionDef) and node.name == "cache_root":
                defining.append(path)
            if isinstance(node, ast.ImportFrom) and any(a.name == "cache_root" for a in node.names):
                importing[path] = node.module
    assert naming == defining == ["models/mha_viz_models/cache_folder.py"]
    assert {"models/mha_viz_models/loading/gguf_cache.py", "mha_viz/compiled.py"} <= set(importing)
    assert set(importing.values()) == {"mha_viz_models.cache_folder"}, importing


@pytest.fixture
def umask_022():
    """The usual umask for the test (restored after): what `write_whole`'s modes follow."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def test_a_file_is_written_whole_readable_by_all_and_a_failed_write_leaves_nothing(tmp_path, umask_022):
    target = tmp_path / "scores" / "a.npz"
    cache_folder.write_whole(target, lambda tmp: tmp.write_bytes(b"12345"))
    assert target.read_bytes() == b"12345" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["a.npz"]  # no temporary file left

    def fails(tmp):
        tmp.write_bytes(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        cache_folder.write_whole(tmp_path / "scores" / "b.npz", fails)
    assert [p.name for p in target.parent.iterdir()] == ["a.npz"]  # neither b nor its temporary file


def test_a_folder_written_by_another_process_first_is_kept_and_the_second_write_refused(tmp_path, umask_022):
    target = tmp_path / "corpus" / "r"
    cache_folder.write_whole(target, lambda tmp: (tmp / "x.txt").write_text("first"), folder=True)
    with pytest.raises(OSError):  # a folder in place already: the rename fails, theirs stays
        cache_folder.write_whole(target, lambda tmp: (tmp / "x.txt").write_text("second"), folder=True)
    assert (target / "x.txt").read_text() == "first"
    assert [p.name for p in target.parent.iterdir()] == ["r"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o755  # another user's server reads it (a class's, a notebook's)


def test_the_modes_follow_the_umask_as_open_and_mkdir_do(tmp_path, umask_022):
    """A user who keeps their files from others (umask 027) gets a file and a folder the group reads and others
    do not, as open() and mkdir would make them; the umask is read, not changed."""
    os.umask(0o027)
    assert cache_folder.umask() == 0o027 and cache_folder.umask() == 0o027
    cache_folder.write_whole(tmp_path / "f.npz", lambda tmp: tmp.write_bytes(b"x"))
    cache_folder.write_whole(tmp_path / "d", lambda tmp: (tmp / "x").write_text("x"), folder=True)
    (tmp_path / "by_open").write_text("x")
    (tmp_path / "by_mkdir").mkdir()
    assert stat.S_IMODE((tmp_path / "f.npz").stat().st_mode) == stat.S_IMODE((tmp_path / "by_open").stat().st_mode)
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == stat.S_IMODE((tmp_path / "by_mkdir").stat().st_mode)
    assert stat.S_IMODE((tmp_path / "f.npz").stat().st_mode) == 0o640


def test_a_folder_is_gone_whole_from_its_name_even_where_its_removal_stops_halfway(tmp_path, monkeypatch):
    """A reader finds all of a kept folder or none of it: `remove` renames it to a temporary name first, so a
    removal stopped after one file (another process's prune killed, a file that may not go) leaves nothing under its
    name, and what it leaves is a temporary entry that a later prune removes once stale."""
    target = tmp_path / "result"
    target.mkdir()
    for name in ("stats.npz", "examples.npz"):
        (target / name).write_bytes(b"x")
    os.utime(target, (time.time() - 1000,) * 2)

    def stops_after_one(path, ignore_errors=False):
        next(iter(sorted(path.iterdir()))).unlink()
    monkeypatch.setattr(cache_folder.shutil, "rmtree", stops_after_one)
    cache_folder.remove(target)
    assert not target.exists()
    left = list(tmp_path.iterdir())
    assert len(left) == 1 and left[0].name.startswith(cache_folder.TMP_PREFIX) and len(list(left[0].iterdir())) == 1
    monkeypatch.undo()
    os.utime(left[0], (time.time() - cache_folder.STALE_TMP_S - 10,) * 2)
    cache_folder.prune(tmp_path, 5)
    assert list(tmp_path.iterdir()) == []
    cache_folder.remove(tmp_path / "never-there")  # nothing to do, nothing raised


def test_touch_leaves_a_file_it_may_not_change_and_makes_one_only_when_asked(tmp_path, monkeypatch):
    """Another user's hint may not be touched: it is left, with no attempt to write it; a missing one is made only
    where asked (`make`)."""
    missing = tmp_path / "a.hint"
    cache_folder.touch(missing)
    assert not missing.exists()
    cache_folder.touch(missing, make=True)
    assert missing.is_file()

    def refused(path, *args, **kwargs):
        raise PermissionError(f"not yours: {path}")
    monkeypatch.setattr(cache_folder.os, "utime", refused)
    monkeypatch.setattr(type(missing), "touch", refused)  # Path.touch would try to open it for writing
    cache_folder.touch(missing, make=True)  # nothing raised: left as it is


def test_prune_keeps_the_most_recently_used_and_removes_only_stale_temporary_entries(tmp_path):
    now = time.time()
    for i, name in enumerate(["a.npz", "b.npz", "c.npz", "d.npz"]):
        (tmp_path / name).write_bytes(b"x")
        os.utime(tmp_path / name, (now - 100 + i,) * 2)  # a oldest, d newest
    (tmp_path / "folder.npz").mkdir()  # a folder is an entry like a file
    os.utime(tmp_path / "folder.npz", (now - 1000,) * 2)
    other = tmp_path / "notes.txt"
    other.write_text("not ours")
    os.utime(other, (now - 10_000,) * 2)
    stale, fresh = tmp_path / f"{cache_folder.TMP_PREFIX}dead.npz", tmp_path / f"{cache_folder.TMP_PREFIX}now.npz"
    stale.write_bytes(b"")
    fresh.write_bytes(b"")
    os.utime(stale, (now - cache_folder.STALE_TMP_S - 10,) * 2)
    cache_folder.touch(tmp_path / "a.npz")  # read just now: the most recently used
    cache_folder.prune(tmp_path, 3, suffix=".npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.npz", "c.npz", "d.npz", "notes.txt", fresh.name])
    cache_folder.prune(tmp_path / "missing", 3)  # a folder that is not there: nothing to do, nothing raised


def test_prune_of_folders_neither_counts_nor_removes_the_files_beside_them(tmp_path):
    """The corpus store's results are folders: a file beside them (a lock, a note) takes no result's place."""
    now = time.time()
    for i, name in enumerate(["old", "new"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (now - 100 + i,) * 2)
    (tmp_path / "lock").write_text("")  # the most recently used entry of all
    cache_folder.prune(tmp_path, 2, folders=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock", "new", "old"]
    cache_folder.prune(tmp_path, 1, folders=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock", "new"]
