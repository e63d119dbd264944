"""Why heads look where they look and how they compose: a score split into the writes behind its query
and key (`qk_terms`, over `sides`), the weights' composition and copying scores (`composition`), and
circuits: every edge between components estimated (`edges`) and checked by path patching (`path_patching`)."""
