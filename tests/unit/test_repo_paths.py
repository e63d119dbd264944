"""No tracked file names a path outside the repository: a fresh clone has nothing there, so a
docstring, doc, script or test that points there points at nothing. Flagged: the project's
folder of received documents beside the checkout (its name followed by a slash, or `../` and its
name), absolute paths under a machine's own top-level folders (the temporary folder, home
folders, mounts, the work folder…) and Windows drive paths. A few system paths are the same on
every machine the project runs on; they are allowed one by one below, each with its reason."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.helpers import ROOT

_FOLDER = "shared"  # spelled apart so that this file does not name the path it looks for
SHARED = re.compile(rf"(?<![\w-]){_FOLDER}/|\.\./{_FOLDER}\b")
# Top-level folders of Linux (FHS), macOS and the machines the project is developed on: an
# absolute path under one of them names a place on some machine, not in the repository.
TOP_LEVEL = ("bin", "boot", "dev", "etc", "home", "lib", "lib64", "media", "mnt", "opt", "private", "proc", "root",
             "run", "sbin", "srv", "sys", "tmp", "usr", "var", "work", "workspace", "Users", "Volumes", "Library",
             "System", "Applications")
# "/" + a top-level folder, as a whole name, not inside a relative path, a URL or an expression
# ("docs/bin", "http://host/tmp", "{base}/run" are not absolute paths)
ABSOLUTE = re.compile(rf"(?<![\w.~$:/\\}})\]-])/(?:{'|'.join(TOP_LEVEL)})(?![\w.-])(?:/[\w.+@-]*)*")
# a drive letter, a separator and a folder name ("s:\\n" in an f-string is a letter and an escape)
WINDOWS = re.compile(r"(?<![\w])[A-Z]:(?:\\{1,2}|/)[A-Za-z_]\w")

# System paths the code, the tests and CI rely on, identical on every Linux machine they run on.
ALLOWED = {
    "/usr/bin/chromium": "Debian's Chromium, which .ci/run installs and the browser tests and benchmarks drive "
                         "(MHA_VIZ_CHROMIUM names another)",
    "/usr/bin/env": "the shebang of .ci/run",
    "/usr/sbin/nginx": "Debian's nginx, which .ci/run installs and `mha-viz app --processes N` puts in front of the "
                       "app processes (outside a user's PATH there)",
    "/dev/shm": "the shared-memory mount, small in containers, that a Chromium flag works around",
    "/etc/passwd": "a hostile model name the link tests give the app, to see it refused; nothing reads it",
    "/etc": "a hostile model name the deployment tests give the loader in public mode, to see it refused",
}
# System folders whose whole tree is allowed
ALLOWED_TREES = {
    "/proc": "Linux's figures for memory and processes (meminfo, self/status, self/statm…), read by the memory "
             "budget and the benchmarks",
}


def _allowed(path: str) -> bool:
    path = path.rstrip("/") or "/"
    return path in ALLOWED or any(path == t or path.startswith(t + "/") for t in ALLOWED_TREES)


def outside_paths(text: str) -> list[tuple[int, str]]:
    """(line number, what is named) for every path outside the repository that `text` names."""
    found = []
    for number, line in enumerate(text.split("\n"), 1):
        found += [(number, m.group(0)) for m in SHARED.finditer(line)]
        paths = (m.group(0).rstrip(".") for m in ABSOLUTE.finditer(line))  # a sentence's full stop is not the path's
        found += [(number, path) for path in paths if not _allowed(path)]
        found += [(number, m.group(0) + "…") for m in WINDOWS.finditer(line)]
    return found


def tracked_text_files() -> dict[str, str]:
    """Every file git tracks, by its path, with its text; binaries (a NUL byte, or not UTF-8) and
    files deleted from the working tree are left out."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"not a git checkout: {exc}")
    texts = {}
    for name in filter(None, listed.stdout.decode().split("\0")):
        path = ROOT / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            texts[name] = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
    return texts


def test_no_tracked_file_names_a_path_outside_the_repository():
    texts = tracked_text_files()
    assert "README.md" in texts and "tests/unit/test_docs.py" in texts and ".ci/run" in texts
    named = [f"{name}:{number}: {what}" for name, text in sorted(texts.items()) for number, what in outside_paths(text)]
    assert not named, "paths outside the repository (a fresh clone has nothing there):\n" + "\n".join(named)


def test_planted_paths_are_found_on_their_lines():
    top, tmp, local = "/" + "work", "/" + "tmp", "/" + "usr/local/lib/python3"
    planted = "\n".join([
        "The definitions are in `docs/head-metrics.md`, section 1.",  # 1: inside the repository
        f"(the specification: `{_FOLDER}/docs/head-metrics.md`).",  # 2
        f"`python3 ../{_FOLDER}/hooks/house_check.py` checks cycles",  # 3
        f"see ../{_FOLDER} for the seeds",  # 4
        f'log = Path("{tmp}/server.log")',  # 5
        f"cd {top}/main && make test",  # 6
        f'home = "{"/" + "home"}/someone/.cache"; mac = "{"/" + "Users"}/someone"',  # 7: two
        f'default=Path("{tmp}")',  # 8: the folder itself
        "C" + r":\Users\someone\model",  # 9
        'CHROMIUM = "/usr/bin/chromium"; open("/proc/meminfo"); "/dev/shm"',  # 10: allowed system paths
        'url = "http://127.0.0.1:8501/tmp/x"; rel = "build/tmp/x"; f"{base}/run"; "docs/bin"',  # 11: not absolute
        f"an unshared/ folder; a {_FOLDER}-weights/ name; {_FOLDER}_docs/; f\"{{x}}s:\\n{{y}}\"",  # 12: not paths
        f'"{local}"',  # 13: a system folder that is not on the list
        "https://example.org/home/page and ~/.cache/mha-viz",  # 14: a URL, the user's cache folder
    ])
    found = outside_paths(planted)
    assert [n for n, _ in found] == [2, 3, 4, 5, 6, 7, 7, 8, 9, 13]
    assert found[0][1] == f"{_FOLDER}/" and found[3][1] == f"{tmp}/server.log" and found[7][1] == tmp
    assert found[-1][1] == local


def test_every_allowed_path_is_a_system_path_with_a_reason():
    for path, reason in {**ALLOWED, **ALLOWED_TREES}.items():
        assert path.startswith("/") and path.split("/")[1] in TOP_LEVEL and len(reason) > 20, path
        assert path.split("/")[1] in ("usr", "dev", "etc", "proc"), path  # never a user's or a temporary folder
