"""The version of this mha-viz, in one place (`version()`, also `mha_viz.__version__`), for everything that
shows it (a notebook's first cell): the repository's own, pyproject.toml's [project] version, when the package
runs from a clone (installed or not, that is the code running), else the installed package's metadata."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import metadata
from pathlib import Path

NAME = "mha-viz"  # the distribution's name, pyproject.toml's [project] name
UNKNOWN = "unknown"  # neither a clone nor installed (the package's folder copied somewhere)


def clone_version(root: Path) -> str | None:
    """The [project] version of `root`/pyproject.toml when that is mha-viz's project file; else None."""
    try:
        project = tomllib.loads((Path(root) / "pyproject.toml").read_text(encoding="utf-8")).get("project", {})
    except (OSError, UnicodeDecodeError, ValueError):  # no file, or not TOML (TOMLDecodeError is a ValueError)
        return None
    if not isinstance(project, dict) or project.get("name") != NAME or not project.get("version"):
        return None
    return str(project["version"])


@lru_cache(maxsize=1)
def version() -> str:
    """This mha-viz's version: the clone's (the folder above the package), else the installed metadata's,
    else UNKNOWN."""
    found = clone_version(Path(__file__).resolve().parents[1])
    if found:
        return found
    try:
        return metadata.version(NAME)
    except metadata.PackageNotFoundError:
        return UNKNOWN
