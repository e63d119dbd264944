"""Print the `uv pip install` options that install from where pip would, one a line (`make install`).

uv reads no pip configuration, and a machine may set pip's indexes, wheel folders and constraints in pip.conf or
PIP_* variables. This reads them as pip sees them (`python -m pip config list`, files and environment alike) and
turns each into uv's option; with none set, it prints only the index strategy and uv installs from PyPI as pip
would. pip takes the best version among all its indexes and folders, so uv is told to do the same
(`--index-strategy unsafe-best-match`, not uv's default of the first index that has the package: a wheel folder
holding a CPU build of torch would otherwise lose to the index's).
"""

from __future__ import annotations

import ast
import subprocess
import sys

# pip's option -> uv's, for the options that take values (a list in pip: whitespace-separated)
VALUED = {"index-url": "--default-index", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
          "constraint": "--constraints", "trusted-host": "--allow-insecure-host"}


def pip_config(python: str) -> dict[str, list[str]]:
    """pip's settings (`:env:.find-links` and `global.find-links` alike), each option's values in order."""
    out = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    settings: dict[str, list[str]] = {}
    for line in out.stdout.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or "." not in key:
            continue
        scope, option = key.rsplit(".", 1)
        if scope not in (":env:", "global", "install"):
            continue
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        for item in str(value).split():
            if item not in settings.setdefault(option, []):
                settings[option].append(item)
    return settings


def uv_args(settings: dict[str, list[str]]) -> list[str]:
    args = ["--index-strategy", "unsafe-best-match"]
    for option, values in settings.items():
        if option in VALUED:
            for value in values[-1:] if option == "index-url" else values:
                args += [VALUED[option], value]
        elif option == "cert":  # a certificate file: uv reads the system's store, which holds it
            args.append("--system-certs")
        elif option == "no-index" and values[-1].lower() in ("1", "true", "yes", "on"):
            args.append("--no-index")
    return args


if __name__ == "__main__":
    print("\n".join(uv_args(pip_config(sys.argv[1] if len(sys.argv) > 1 else sys.executable))))
