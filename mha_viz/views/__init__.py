"""Views of a captured run: level of detail for one head, token focus, the long-text overview, queries and keys,
the teaching walkthrough, two runs compared.
"""

from mha_viz.views.comparison import Comparison, compare
from mha_viz.views.long_overview import Overview, overview
from mha_viz.views.token_pair import heads_from_tokens

__all__ = ["Comparison", "Overview", "compare", "heads_from_tokens", "overview"]
