"""Why heads look where they look and how they compose: a score split into the writes behind its query
and key (`qk_terms`, over `sides`), and the weights' composition and copying scores (`composition`)."""
