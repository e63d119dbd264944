"""Where a chat's answer looks (issue 88): for every head, the attention from the assistant's tokens (its reply, or
the turn the template opens for it when there is none: where the answer starts) to the words of each role's message
and to the template's own tokens, each the mean over those query rows of the mass on those keys. A causal row sums to
1 over the tokens before it, so the four shares of a head sum to 1 (less a learned sink's share, or what *Hide tokens*
left out before renormalising). The system's share against the user's says which heads read the system prompt and
which the question while the model answers: what prompt injection, system-prompt drift and attention to the question
are asked about."""

from __future__ import annotations

import numpy as np
import pandas as pd

from mha_viz.text.chat import ROLES, ChatText
from mha_viz.text.tokenize import InputError

GROUPS = ("system", "user", "assistant", "template")  # the keys a share is taken over: each role's words, the template
ROWS_BYTES = 64 * 2**20  # the assistant's rows of a layer read at a time (a long reply of a long chat: in parts)


def role_mass(run, chat: ChatText) -> pd.DataFrame:
    """One row per head: layer (the model's number), head, and the share of its attention from the assistant's tokens
    to each of GROUPS. `run` is a run of `chat.text` (dense or long: one layer's rows of the assistant's tokens at a
    time). InputError where the run holds no assistant token (a token limit cut the chat before its turn) or is of
    another text."""
    told = chat.aligned(run)
    if told is None:
        raise InputError("These roles are of another text than the run's: analyse the chat again.")
    role, template = told
    queries = np.flatnonzero(role == ROLES.index("assistant"))
    if queries.size == 0:
        if getattr(run, "hidden", None) is not None and (chat.role == ROLES.index("assistant")).any():
            raise InputError("The assistant's turn has no token left: its reply is empty and the sidebar's Hide tokens "
                             "hides the chat template's tokens that open it. Type a reply, or show the template's "
                             "tokens.")
        raise InputError(f"The run's {run.n} tokens hold none of the assistant's: the token limit cut the chat "
                         "before its turn. Raise the token limit in the sidebar.")
    keys = np.stack([(role == ROLES.index(name)) & ~template for name in ROLES] + [template], 1).astype(np.float32)
    step = max(1, ROWS_BYTES // (4 * run.num_heads * max(run.n, 1)))  # rows of every head read at once
    rows = []
    for layer in range(run.num_layers):
        shares = np.zeros((run.num_heads, len(GROUPS)))
        for at in range(0, len(queries), step):
            part = queries[at:at + step]
            block = np.asarray(run.layer_rows(layer, int(part[0]), int(part[-1]) + 1), dtype=np.float32)
            shares += (block[:, part - part[0]] @ keys).sum(1)  # (H, 4)
        shares /= len(queries)
        for head in range(run.num_heads):
            rows.append({"layer": run.layer_ids[layer], "head": head,
                         **{name: float(shares[head, g]) for g, name in enumerate(GROUPS)}})
    return pd.DataFrame(rows)
