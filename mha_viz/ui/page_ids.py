"""The pages' ids, which are also their URL paths, in the order the sidebar lists them: what links
and lessons name. `pages.PAGES` registers a page under each (tests/unit/test_lesson.py checks that
the two agree); this module imports nothing, so that what checks a lesson need not import the pages."""

IDS = ("model_view", "head_view", "focus", "lines", "compare_heads", "across_layers", "generate",
       "head_metrics", "similarity", "composition", "corpus", "examples", "compare", "prediction", "teaching",
       "ablation", "qk", "model_facts")
# pages retired, and the page an old link or lesson step naming one opens instead (its parts moved there)
RETIRED = {"whole_text": "head_view"}


def with_retired(ids) -> list[str]:
    """`ids` and every retired page whose successor is among them: what a lesson may name (its step opens on
    the successor)."""
    ids = list(ids)
    return ids + [old for old, new in RETIRED.items() if new in ids and old not in ids]
