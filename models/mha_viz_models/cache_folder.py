"""mha-viz's cache folder, the one place its location is decided: converted GGUF weights (`loading.gguf_cache`),
the compiled metric loops (`mha_viz.compiled`), stored corpus results and a model's weights-only scores
(`mha_viz.circuits.kept`) are kept in folders under it; and what is
written there once is made by one process at a time (`exclusive`).

What is kept there by key (a file or a folder a result) is written whole under a temporary name and renamed into
place (`write_whole`: a reader never sees half of it; of two processes writing a file the last wins, of two writing a
folder the first, their results alike), marked used when read (`touch`), and past a number of them the least
recently used go, with temporary ones left by a process that died while writing (`prune`). An entry is removed by
renaming it to a temporary name first (`remove`): a reader finds all of a folder or none of it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


def cache_root() -> Path:
    """Where mha-viz keeps what it computes once: $MHA_VIZ_CACHE_DIR, else ~/.cache/mha-viz."""
    return Path(os.environ.get("MHA_VIZ_CACHE_DIR") or Path.home() / ".cache" / "mha-viz")


@contextmanager
def exclusive(lock_file: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Inside: this process alone, among those that ask for the same `lock_file` (an exclusive lock on it; `on_wait`
    is called first when another holds it). Where the system has no `fcntl`, no lock: each process goes in."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system
        yield
        return
    with open(lock_file, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


TMP_PREFIX = ".tmp-"  # a file or folder being written (`write_whole`)
STALE_TMP_S = 3600  # a temporary one this old was left by a process that died while writing


def umask() -> int:
    """The process's umask, read without changing it (os.umask would, for every thread at once): Linux's
    /proc/self/status says it; elsewhere the usual 0o022."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_whole(target: Path, write: Callable[[Path], None], *, folder: bool = False) -> None:
    """`write(tmp)` into a temporary file (a folder where `folder`) beside `target`, then renamed to `target`: a
    reader sees all of it or nothing. The file or folder gets the mode open() or mkdir would give it under the
    process's umask (`umask`; tempfile makes both for their owner alone): with the usual 0o022, readable by all, so
    that another user's server or notebook sharing the cache folder reads it. An OSError is raised with the
    temporary one removed (a folder in place already, written by another process, makes the rename fail)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=TMP_PREFIX))
    else:
        fd, name = tempfile.mkstemp(dir=target.parent, prefix=TMP_PREFIX, suffix=target.suffix)
        os.close(fd)
        tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, (0o777 if folder else 0o666) & ~umask())
        os.replace(tmp, target)
        tmp = None  # renamed: nothing left to remove
    finally:
        if tmp is not None:
            remove(tmp)


def touch(path: Path, *, make: bool = False) -> None:
    """Mark `path` as just used (the last that `prune` removes); a path this process may not change (another user's)
    is left as it is. `make`: an empty file is made where there is none (an OSError raised where it cannot be)."""
    try:
        os.utime(path)
    except FileNotFoundError:
        if make:
            path.touch()
    except OSError:
        pass


def prune(where: Path, keep: int, *, suffix: str = "", folders: bool = False) -> None:
    """Of the entries of `where` whose names end with `suffix` (only its folders where `folders`), all but the
    `keep` most recently used are removed, and the temporary ones older than STALE_TMP_S (one being written now is
    not touched). Entries another process removed meanwhile, or a folder that cannot be read, are passed over."""
    try:
        entries = [entry for entry in where.iterdir()
                   if entry.name.endswith(suffix) and (not folders or entry.is_dir())]
    except OSError:
        return
    used, stale, now = [], [], time.time()
    for entry in entries:
        try:
            mtime = entry.stat().st_mtime
        except OSError:  # removed meanwhile
            continue
        if not entry.name.startswith(TMP_PREFIX):
            used.append((mtime, entry))
        elif now - mtime > STALE_TMP_S:
            stale.append(entry)
    for old in [entry for _, entry in sorted(used, reverse=True)[keep:]] + stale:
        remove(old)


def remove(path: Path) -> None:
    """Remove a kept file or folder, or a temporary one, if this process may: a folder is first renamed to a temporary
    name, so that a reader never finds part of it (what a removal stopped halfway leaves is a stale temporary one,
    which `prune` removes later)."""
    try:
        if path.is_dir() and not path.is_symlink():
            if not path.name.startswith(TMP_PREFIX):
                gone = path.with_name(f"{TMP_PREFIX}gone-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
                os.rename(path, gone)
                path = gone
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:  # removed meanwhile by another process, or not ours to remove
        pass
