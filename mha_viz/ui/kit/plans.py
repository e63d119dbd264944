"""A page's plan (`mha_viz.budget.plan`), made before its button: the plan, or why the computation cannot run (the
`InputError`'s words, escaped for the page), and, for a plan that costs a rerun something to make (an edge graph, a
set of pairs checked), the same kept in the session for its key; and a plan run inside the server's admission."""

from __future__ import annotations

from typing import Callable, Hashable

from mha_viz.budget.plan import Plan
from mha_viz.text.tokenize import InputError
from mha_viz.ui.kit import resources, session
from mha_viz.ui.kit.text import plain


def try_plan(make: Callable[[], Plan]) -> tuple[Plan | None, str | None]:
    """(`make()`, None), or (None, why it cannot run) when planning refuses it."""
    try:
        return make(), None
    except InputError as exc:
        return None, plain(str(exc))


def kept_plan(store: str, key: Hashable, make: Callable[[], Plan]) -> tuple[Plan | None, str | None]:
    """`try_plan(make)` for `key`, kept under the session key `store` (one key at a time): a rerun with the same key
    plans nothing again."""
    kept = session.get(store)
    if kept is not None and kept[0] == key:
        return kept[1], kept[2]
    planned, why = try_plan(make)
    session.put(store, (key, planned, why))
    return planned, why


def run_admitted(plan: Plan, *, wait: bool = False, **options):
    """`plan.run(**options)` inside the server's admission for `plan.need` (raises admission.Busy while the server is
    full: call it through `resources.one_at_a_time`; `wait`: wait for room instead, where no page shows a notice, as
    a download's click); a plan that runs no model (`Plan.admit` False) is not admitted."""
    if not plan.admit:
        return plan.run(**options)
    with resources.slots().hold(wait=wait, need=plan.need):
        return plan.run(**options)
