"""Text in: the one door from text to token ids (`tokenize`), readable tokens and word groups (`readable`), the
prefix a token cap reads (`prefix`), the ids and targets of a model's loss (`loss_inputs`).
"""

from mha_viz.text.tokenize import InputError, Tokens, count_tokens, session_cap, token_limit, unknown_tokens

# `tokenize` is `mha_viz.tokenize` (the face); here `mha_viz.text.tokenize` stays the module
__all__ = ["InputError", "Tokens", "count_tokens", "session_cap", "token_limit", "unknown_tokens"]
