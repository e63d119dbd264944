"""Every call of a model's tokenizer, one at a time per tokenizer.

A fast (Rust) tokenizer keeps its truncation and padding settings in the tokenizer itself: each call
sets them for its own arguments, then encodes. Streamlit runs every session as a thread of one
process and the model cache shares one tokenizer between them, so two sessions tokenizing at once
can swap settings: measured on MiniLM, 8 threads alternating a truncated call (max_length 20 + i) and
a whole one, 42 of 3,200 calls came back with the other call's length (a whole text cut to 21
tokens, a truncated one 352 long). `encode` holds a lock per tokenizer around the call.
"""

from __future__ import annotations

import threading
import weakref

_LOCKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # tokenizer -> its lock
_MAKING = threading.Lock()  # guards _LOCKS while a tokenizer's lock is made


def lock(tokenizer) -> threading.Lock:
    """The lock of `tokenizer` (made on first use)."""
    with _MAKING:
        found = _LOCKS.get(tokenizer)
        if found is None:
            found = _LOCKS[tokenizer] = threading.Lock()
        return found


def encode(tokenizer, text, **kwargs):
    """`tokenizer(text, **kwargs)`, with no other thread calling the same tokenizer meanwhile."""
    with lock(tokenizer):
        return tokenizer(text, **kwargs)
