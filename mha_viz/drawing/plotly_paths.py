"""Plotly parses every property path it is handed (`xaxis_title_text`, `marker.color`, `coloraxis.colorbar.len`) from
its string, anew, each time a figure is built or updated: splitting on dots, brackets and underscores through several
helper functions. A page builds its figures on every visit, and a class builds them for each student, so that parse
was about 40 % of building one head's map (MiniLM, 15 tokens: 19 ms, 11 ms with the parse remembered; a layers ×
heads grid 31 ms against 17 ms; issue 91). The parse is a function of the string alone
(`plotly.basedatatypes._str_to_dict_path_full`; its answer read, never changed, by its callers), so `remember` keeps
its answers, once per process, when the drawing package is imported. On a Plotly without that function, or one that
keeps its answers itself, nothing changes; what a figure holds never does (tests/unit/test_plotly_paths.py)."""

from __future__ import annotations

import functools

import plotly.basedatatypes as plotly_base

PATHS_KEPT = 4096  # distinct property paths remembered (the app's figures use a few hundred)
NAME = "_str_to_dict_path_full"


def remember() -> bool:
    """Make Plotly's path parse remember its answers (`PATHS_KEPT` of them, least recently used out first). True when
    it was installed now; False where it already was or where this Plotly parses differently."""
    parse = getattr(plotly_base, NAME, None)
    if parse is None or hasattr(parse, "cache_info"):
        return False
    kept = functools.lru_cache(maxsize=PATHS_KEPT)(parse)

    @functools.wraps(parse)
    def parse_once(path):
        if not isinstance(path, str):  # what Plotly never passes here; parsed as it would be
            return parse(path)
        keys, starts = kept(path)
        return keys, list(starts)  # the caller's own list: nothing it does reaches the kept answer

    parse_once.cache_info = kept.cache_info
    parse_once.original = parse
    setattr(plotly_base, NAME, parse_once)
    return True
