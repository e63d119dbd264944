"""Text shown as typed in Streamlit's Markdown (messages, captions, tables)."""

from __future__ import annotations

import re

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>$~:=&])")  # &: "&amp;" would show as "&"


def plain(text: object) -> str:
    """`text` shown as typed in Streamlit's Markdown (messages, captions, tables): every
    Markdown, LaTeX ($), directive (:) and HTML character escaped, so that a model id, folder or
    error that quotes user input cannot become a link, an image, a formula or markup."""
    return _MARKDOWN.sub(r"\\\1", str(text))
