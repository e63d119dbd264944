"""The sidebar's chat input (issue 88): for an instruct model (its tokenizer has a chat template), *Input* offers Chat
beside Text: a system message (optional), the user's message and the assistant's reply (optional, typed); the text
analysed is the chat rendered with the model's own template (`mha_viz.text.chat`), and every view that draws tokens
can tell each token's role (`Current.chat`). Whether a model has a template is known once it is loaded: the choice is
offered from then on (`learn`), and a model without one keeps its text box.
"""

from __future__ import annotations

import threading

import streamlit as st

import mha_viz
from mha_viz.text import chat
from mha_viz.ui.kit import keys, session
from mha_viz.ui.kit.text import plain

TEXT, CHAT = "Text", "Chat"
_templates: dict[str, bool] = {}  # model spec -> whether its tokenizer has a chat template (learnt at load)
_lock = threading.Lock()


def chat_offered(spec: str | None) -> bool:
    """Whether Chat is offered for the model `spec` (known to have a chat template)."""
    with _lock:
        return bool(spec) and _templates.get(spec, False)


def learn(spec: str, model: mha_viz.LoadedModel) -> bool:
    """Remember whether the loaded model `spec` has a chat template; True when that is news (the choice should show)."""
    has = chat.has_template(model)
    with _lock:
        news = _templates.get(spec) != has
        _templates[spec] = has
    return news and has


def chosen(spec: str | None) -> bool:
    """Whether this run reads a chat: Chat is picked and offered for `spec`."""
    return session.get(keys.CHAT_MODE) == CHAT and chat_offered(spec)


def draw_mode(slot, spec: str | None, model: mha_viz.LoadedModel | None = None) -> None:
    """*Input*: Text or Chat, in `slot` (above the text boxes), where the model has a chat template; where it has none
    and a chat was asked for (a link, a lesson, another model before), why the text box is read instead."""
    if not chat_offered(spec):
        if session.get(keys.CHAT_MODE) == CHAT and model is not None:
            slot.caption(f"{plain(model.name)} has no chat template (an instruct model's tokenizer has one): its "
                         "input is the text below, not a chat.")
        return
    slot.radio("Input", (TEXT, CHAT), key=keys.CHAT_MODE, persist_state=keys.KEEP, horizontal=True,
               help="Chat: a system message, the user's message and the assistant's reply, rendered with "
                    "the model's own chat template, as the model reads them when people use it. Every token "
                    "then has a role (system, user, assistant), and the template's own tokens are told apart.")


def draw_fields() -> chat.Chat:
    """The chat's boxes (their contents stay when the input switches back to text)."""
    system = st.text_area("System message (optional)", key=keys.CHAT_SYSTEM, persist_state=keys.KEEP, height=68,
                          placeholder="Empty: the template's own default, if it has one")
    user = st.text_area("User", key=keys.CHAT_USER, persist_state=keys.KEEP, height=100,
                        placeholder="The user's message, then press Ctrl+Enter")
    reply = st.text_area("Assistant's reply (optional)", key=keys.CHAT_REPLY, persist_state=keys.KEEP, height=68,
                         placeholder="Empty: the assistant's turn is opened, as when the model answers")
    return chat.Chat(user=user or "", system=system or "", assistant=reply or "")
