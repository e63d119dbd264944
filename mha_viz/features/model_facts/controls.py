"""The page's own session keys (model_facts): its tables and results, which no link or lesson carries."""

from __future__ import annotations

# views
DL_FACTS = "dl_facts"
