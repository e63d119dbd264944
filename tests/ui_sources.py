"""The UI's sources and session keys, for the tests that read the UI's code: every module under `mha_viz/ui` (its
folders `kit` and `shell`) and every feature's page (`features/<id>/page.py`, and the modules of its folder that
read the UI: what it keeps in the session, as Compare's `run_b` and the Head view's `subset`), together `MODULES`;
and every session key module: the kit's (`keys`), the shared controls' and each feature's
(`features/<id>/controls.py`, imported as `<id>_keys`), with `key_value` resolving a `keys.NAME` or `<id>_keys.NAME`
of the source to its value."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

from mha_viz.export import shared_controls
from mha_viz.ui.kit import keys

ROOT = Path(__file__).resolve().parents[1]
UI = ROOT / "mha_viz" / "ui"
FEATURES = ROOT / "mha_viz" / "features"


def _reads_the_ui(path: Path) -> bool:
    """Whether a feature's module imports the UI (`mha_viz.ui…`): its page and the page's own parts."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mha_viz.ui"):
            return True
        if isinstance(node, ast.Import) and any(a.name.startswith("mha_viz.ui") for a in node.names):
            return True
    return False


# each page's id -> its modules: `features/<id>/page.py` first, then the parts of its folder that read the UI
PAGES = {f.name: sorted((p for p in f.rglob("*.py") if p.name == "page.py" or _reads_the_ui(p)),
                        key=lambda p: (p != f / "page.py", p.as_posix()))
         for f in sorted(FEATURES.iterdir()) if (f / "page.py").is_file()}
MODULES = sorted(UI.rglob("*.py")) + sorted(p for files in PAGES.values() for p in files)
# the name a module of the UI imports each key module under -> the module
KEY_MODULES = {"keys": keys, "shared_controls": shared_controls} | {
    f"{p.parent.name}_keys": importlib.import_module(f"mha_viz.features.{p.parent.name}.controls")
    for p in sorted((ROOT / "mha_viz" / "features").glob("*/controls.py"))}
NOT_KEPT = frozenset().union(*(getattr(m, "NOT_KEPT", frozenset()) for m in KEY_MODULES.values()))


def key_names() -> dict[str, str]:
    """Every session key by its name as written in the UI ("keys.TEXT", "prediction_keys.PRED_GO") -> its value."""
    return {f"{alias}.{name}": value for alias, module in KEY_MODULES.items() for name, value in vars(module).items()
            if name.isupper() and isinstance(value, str)}


def key_value(node: ast.AST):
    """The value of `node` when it is a key module's name (`keys.X`, `<id>_keys.X`), else None."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in KEY_MODULES:
        return getattr(KEY_MODULES[node.value.id], node.attr, None)
    return None


def page_module(page_id: str) -> Path:
    """The file that draws page `page_id`: `features/<id>/page.py`."""
    return FEATURES / page_id / "page.py"
