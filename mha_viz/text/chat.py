"""A chat as an instruct model reads it: the messages (`Chat`: a system message, the user's, and the assistant's
reply, each but the user's optional) rendered with the model's own chat template (`render`), and the role of every
token of what it renders (`roles`): whose message it is in (system, user, assistant) and whether it is the template's
own (role headers, turn ends, a default system prompt the template adds) rather than a message's words.

The roles come from rendering the template one message more at a time: message i's turn is what the i-th render adds
to the one before, its words are where its text sits in that turn, and a generation prompt (the assistant's turn
opened, when there is no reply yet) is what the render with it adds. A template that does not grow that way (one
that rewrites earlier turns as later ones come) is refused, as is a message holding one of the template's own tokens
(it would close its turn or open another: an injection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mha_viz.text.encode import encode
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel

ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Chat:
    """One exchange: an optional system message, the user's message, and optionally the assistant's reply."""

    user: str
    system: str = ""
    assistant: str = ""

    def messages(self) -> list[dict[str, str]]:
        """The messages as a chat template takes them, empty ones left out."""
        said = (("system", self.system), ("user", self.user), ("assistant", self.assistant))
        return [{"role": role, "content": text} for role, text in said if text.strip()]


@dataclass(frozen=True)
class ChatText:
    """A rendered chat: the text the model reads, and for each of its tokens (as `tokenize` reads the whole text, before
    any cap) its role (an index into ROLES) and whether it is the template's own."""

    text: str
    role: np.ndarray  # (n,) int8: ROLES[role[t]]
    template: np.ndarray  # (n,) bool

    def of_role(self, name: str) -> np.ndarray:
        """(n,) bool: the tokens of that role's message words (the template's tokens left out)."""
        return (self.role == ROLES.index(name)) & ~self.template

    def with_reply(self, prompt: int, reply: list[int], special: set[int]) -> tuple[np.ndarray, np.ndarray] | None:
        """(role, template) of a generation from this chat's text (its first `prompt` tokens) followed by the token
        ids `reply` the model wrote: the reply's tokens are the assistant's, and the template's where they are one of
        the tokenizer's `special` ids (the turn's end); None when the chat holds fewer than `prompt` tokens."""
        if prompt > len(self.role):
            return None
        own = np.array([t in special for t in reply], dtype=bool)
        return (np.concatenate([self.role[:prompt], np.full(len(reply), ROLES.index("assistant"), self.role.dtype)]),
                np.concatenate([self.template[:prompt], own]))

    def aligned(self, run) -> tuple[np.ndarray, np.ndarray] | None:
        """(role, template) of the tokens a run of this chat's text shows: those it read (a cap cuts the text),
        without those it hides (`run.hidden`); None for a run of another text."""
        hidden = getattr(run, "hidden", None)
        read = hidden.n_before if hidden is not None else run.n
        if getattr(run, "text", None) != self.text or read > len(self.role):
            return None
        at = np.asarray(hidden.kept) if hidden is not None else np.arange(run.n)
        return self.role[at], self.template[at]


def has_template(model: LoadedModel) -> bool:
    """Whether the model's tokenizer has a chat template (an instruct model's)."""
    return bool(getattr(model.tokenizer, "chat_template", None))


def _render(model: LoadedModel, messages: list[dict[str, str]], opened: bool) -> str:
    if not messages:
        return ""
    try:
        return model.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=opened)
    except Exception as exc:  # noqa: BLE001 - a template's own refusal (an order of roles it does not take)
        raise InputError(f"{model.name}'s chat template does not take these messages: {str(exc)[:200]}") from exc


def _specials(model: LoadedModel) -> list[str]:
    """The tokenizer's special tokens as text (every added token marked special: SmolLM2's <file_sep> too), longest
    first."""
    tok = model.tokenizer
    found = set(getattr(tok, "all_special_tokens", []) or [])
    found |= {str(t) for t in getattr(tok, "added_tokens_decoder", {}).values() if getattr(t, "special", False)}
    return sorted((t for t in found if t and len(t) > 1), key=len, reverse=True)


def _check(model: LoadedModel, chat: Chat) -> None:
    """Refuse a chat the template cannot render as asked: no template, no user message, or a message holding one of
    the tokenizer's special tokens (the template's own among them)."""
    if not has_template(model):
        raise InputError(f"{model.name} has no chat template (an instruct model's tokenizer has one): type a text "
                         "instead.")
    if not chat.user.strip():
        raise InputError("Type the user's message to see the chat's attention.")
    specials = _specials(model)
    for message in chat.messages():
        found = next((t for t in specials if t in message["content"]), None)
        if found is not None:
            raise InputError(f"The {message['role']}'s message holds {found!r}, one of the chat template's own "
                             "tokens: it would close its turn or open another. Remove it.")


def _single_bos(model: LoadedModel, text: str) -> str:
    """`text` without a leading BOS that the tokenizer adds again (Gemma's and Llama 3's templates write it, and the
    tokenizer adds one: the model would read two)."""
    tok = model.tokenizer
    bos = getattr(tok, "bos_token", None)
    if not bos or not text.startswith(bos):
        return text
    added = encode(tok, "", add_special_tokens=True)["input_ids"]
    return text[len(bos):] if getattr(tok, "bos_token_id", None) in added else text


def render(model: LoadedModel, chat: Chat) -> str:
    """The chat as the model reads it: its messages through the model's chat template, the assistant's turn opened
    when there is no reply (so that the model answers); a BOS the template writes is left to the tokenizer.
    InputError for what `_check` refuses."""
    _check(model, chat)
    return _single_bos(model, _render(model, chat.messages(), opened=not chat.assistant.strip()))


def reply_of(model: LoadedModel, generated: list[int]) -> str:
    """What a model generated after a chat's opened turn (its token ids), as the assistant's reply: the text of the
    ids before the first special token (its turn's end; the template writes its own when the reply is rendered)."""
    special = set(getattr(model.tokenizer, "all_special_ids", []) or [])
    special |= {i for i, t in getattr(model.tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", 0)}
    kept = []
    for token in generated:
        if int(token) in special:
            break
        kept.append(int(token))
    return model.tokenizer.decode(kept, skip_special_tokens=True).strip()


MARK = "\u2063"  # an invisible separator: stands in for a message's words, which no template rewrites


def _words(model: LoadedModel, chat: Chat, text: str) -> list[tuple[int, int, int]]:
    """Each message's words in `text` as (role, first char, end char): where a render of the whole chat with that
    message's words replaced by MARK puts the mark (everything before it renders alike), wherever the template puts
    them (Gemma's folds the system message into the user's turn); a message whose words are not found there (a
    template that rewrites them) is left out."""
    messages, opened = chat.messages(), not chat.assistant.strip()
    found = []
    for i, message in enumerate(messages):
        marked = [dict(m, content=MARK) if k == i else m for k, m in enumerate(messages)]
        at = _single_bos(model, _render(model, marked, opened)).find(MARK)
        for content in (message["content"], message["content"].strip()):
            if at >= 0 and text.startswith(content, at):
                found.append((ROLES.index(message["role"]), at, at + len(content)))
                break
    return found


def _turns(model: LoadedModel, chat: Chat, text: str) -> list[tuple[int, int, int]]:
    """Each turn of `text` as (role, first char, end char): what rendering one message more adds, then the generation
    prompt. A template whose renders do not grow that way is refused."""
    messages = chat.messages()
    turns, start = [], 0
    for i, message in enumerate(messages):
        rendered = _single_bos(model, _render(model, messages[:i + 1], opened=False))
        if not text.startswith(rendered):
            raise InputError(f"{model.name}'s chat template rewrites earlier turns as later ones come: the roles of "
                             "its tokens cannot be told apart.")
        turns.append((ROLES.index(message["role"]), start, len(rendered)))
        start = max(start, len(rendered))
    if start < len(text):
        turns.append((ROLES.index("assistant"), start, len(text)))
    return turns


def _default_system(model: LoadedModel, chat: Chat, text: str, first_words: int) -> tuple[int, int, int]:
    """In a chat without a system message, a system prompt the template adds by default (SmolLM2's), before the first
    message's header: (where the first message's own turn starts, the prompt words' first char, their end char),
    read off renders with a system message of its own (its header and turn end around its words); (0, 0, 0) when the
    template adds none, or takes no system message (Gemma 2)."""
    first = chat.messages()[0]
    if first["role"] == "system":
        return 0, 0, 0
    try:
        alone = _single_bos(model, _render(model, [{"role": "system", "content": MARK}], opened=False))
        both = _single_bos(model, _render(model, [{"role": "system", "content": MARK}, first], opened=False))
    except InputError:
        return 0, 0, 0
    words_at = both.find(first["content"], len(alone))
    if not both.startswith(alone) or words_at < 0 or MARK not in alone:
        return 0, 0, 0
    header = both[len(alone):words_at]
    at = text.rfind(header, 0, first_words + 1) if header else -1
    if at <= 0:
        return 0, 0, 0
    opens, closes = alone.split(MARK, 1)
    prompt = text[:at]
    if prompt.startswith(opens) and prompt.endswith(closes) and len(prompt) >= len(opens) + len(closes):
        return at, len(opens), at - len(closes)
    return at, at, at


def roles(model: LoadedModel, chat: Chat) -> ChatText:
    """The rendered chat (`render`) and the role of each of its tokens: a token is the template's own unless its first
    character is in a message's words (`_words`: then it is that message's); a template token belongs to the turn its
    first character is in (`_turns`); what a template puts before the first message's header when there is no system
    message (a default system prompt) is the system's: its words as a system message's, its header and turn end the
    template's; the tokens the tokenizer adds are the first turn's (before the text) or the last's (after it). Needs a
    tokenizer that gives each token's characters (a fast one)."""
    text = render(model, chat)
    turns, words = _turns(model, chat, text), _words(model, chat, text)
    try:
        enc = encode(model.tokenizer, text, add_special_tokens=True, return_offsets_mapping=True)
    except (NotImplementedError, ValueError) as exc:
        raise InputError(f"{model.name}'s tokenizer does not say which characters each token holds: the roles of a "
                         "chat's tokens cannot be told.") from exc
    offsets = np.asarray(enc["offset_mapping"], dtype=np.int64).reshape(-1, 2)
    first = offsets[:, 0]
    added = offsets[:, 0] == offsets[:, 1]  # tokens the tokenizer adds (BOS, [SEP]): no characters of the text
    lead = added & (np.cumsum(~added) == 0)  # those before the text's first token
    role = np.zeros(len(first), np.int8)
    template = np.ones(len(first), bool)
    for who, start, end in turns:
        role[(first >= start) & (first < end)] = who
    for who, w0, w1 in words:
        inside = (first >= w0) & (first < w1) & ~added
        role[inside], template[inside] = who, False
    role[lead], role[added & ~lead] = turns[0][0], turns[-1][0]
    user_words = next((w0 for who, w0, _ in words if who == ROLES.index("user")), len(text))
    own_start, w0, w1 = _default_system(model, chat, text, user_words)
    role[(first < own_start) & ~added] = ROLES.index("system")
    template[(first >= w0) & (first < w1) & ~added] = False  # the default prompt's words: the system's
    return ChatText(text, role, template)
