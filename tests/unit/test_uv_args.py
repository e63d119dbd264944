"""`make install`'s uv installs from where pip would (.ci/uv_args.py): pip's indexes, wheel folders and
constraints, read as pip reads them, become uv's options; with none set, uv is left to PyPI."""

from __future__ import annotations

import importlib.util
import os
import sys

from tests.helpers import ROOT

_spec = importlib.util.spec_from_file_location("uv_args", ROOT / ".ci" / "uv_args.py")
uv_args = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(uv_args)


def _pip_env(monkeypatch, **options: str) -> None:
    """pip with no configuration file and only `options` in its environment (PIP_*)."""
    for name in list(os.environ):
        if name.startswith("PIP_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # pip then reads no file
    for name, value in options.items():
        monkeypatch.setenv(name, value)


def _pairs(args: list[str]) -> list[tuple[str, str]]:
    valued = set(uv_args.VALUED.values()) | {"--index-strategy"}
    return [(a, args[i + 1]) for i, a in enumerate(args) if a in valued]


def test_pip_settings_become_uv_options_in_pip_order(monkeypatch, tmp_path):
    constraints = tmp_path / "constraints.txt"
    _pip_env(monkeypatch, PIP_FIND_LINKS=f"{tmp_path}/a {tmp_path}/b", PIP_EXTRA_INDEX_URL="file:///x/simple",
             PIP_INDEX_URL="https://example.org/simple", PIP_CONSTRAINT=str(constraints),
             PIP_CERT=str(tmp_path / "ca.pem"))
    args = uv_args.uv_args(uv_args.pip_config(sys.executable))
    pairs = _pairs(args)
    assert ("--index-strategy", "unsafe-best-match") in pairs  # pip's choice: the best version of every source
    assert [v for k, v in pairs if k == "--find-links"] == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert ("--extra-index-url", "file:///x/simple") in pairs
    assert ("--default-index", "https://example.org/simple") in pairs
    assert ("--constraints", str(constraints)) in pairs
    assert "--system-certs" in args and "--no-index" not in args


def test_without_pip_settings_uv_keeps_its_defaults(monkeypatch):
    _pip_env(monkeypatch)
    assert uv_args.uv_args(uv_args.pip_config(sys.executable)) == ["--index-strategy", "unsafe-best-match"]


def test_no_index_only_when_pip_is_told_so(monkeypatch):
    assert "--no-index" in uv_args.uv_args({"no-index": ["true"]})
    assert "--no-index" not in uv_args.uv_args({"no-index": ["false"]})
