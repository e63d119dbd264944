"""Text shown as typed in Streamlit's Markdown (messages, captions, tables)."""

from __future__ import annotations

import re

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>$~:=&])")  # &: "&amp;" would show as "&"
# Where GitHub-flavoured Markdown would start a link in plain text: "://" (http://, https://),
# "www." and an e-mail's "@". Its autolinks are found in the text left once the escapes are read
# (remark-gfm's transform, which Streamlit runs), so a backslash cannot stop them: an invisible
# word joiner (U+2060) inside each does.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"


def plain(text: object) -> str:
    """`text` shown as typed in Streamlit's Markdown (messages, captions, tables): every
    Markdown, LaTeX ($), directive (:) and HTML character escaped, and a word joiner where a bare
    URL or e-mail address would be linked, so that a model id, folder or error that quotes user
    input cannot become a link, an image, a formula or markup. Where no Markdown is needed, a
    plain-text element (`st.text`, `st.dataframe`) shows user text without this."""
    return _MARKDOWN.sub(r"\\\1", _AUTOLINK.sub(WORD_JOINER, str(text)))


FOLD_ABOVE = 600  # characters: a longer text typed or pasted is folded, not printed inline (issue 90: 17,850 printed
# inline pushed the next box 3,240 px down)


def tail(text: str, keep: int = FOLD_ABOVE) -> str:
    """`text`, or when longer than `keep` characters its last `keep` or fewer, from a word's start, after "…": what
    a stream shows of a long prompt before the words it writes."""
    if len(text) <= keep:
        return text
    end = text[-keep:]
    cut = end.find(" ")
    return "…" + (end[cut:] if 0 <= cut < keep // 2 else end)
