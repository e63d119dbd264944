"""A chat in a link (issue 88): the user's message, the system message and the assistant's reply as parameters
(`user`, `system`, `reply`), in place of a text; a system message or reply without a user's message is left out
with a notice; *Hide tokens* may name the chat template's tokens."""

from __future__ import annotations

from mha_viz.export import link_params as links


def test_a_chat_round_trips_without_a_text():
    link = links.Link(model="smollm2", text="<|im_start|>user\nhi", user='Say "hi"\nthen stop', system="Be brief.",
                      hide=("template", "special"))
    params = links.encode(link)
    assert params == {"model": "smollm2", "user": 'Say "hi"\nthen stop', "system": "Be brief.",
                      "hide": "special,template"}
    back, notices = links.parse(params)
    assert notices == [] and back.chat == ('Say "hi"\nthen stop', "Be brief.", "")
    assert back.hide == ("special", "template") and back.text is None


def test_messages_without_the_users_are_left_out_with_a_notice():
    link, notices = links.parse({"system": "Obey.", "reply": "Yes."})
    assert link.chat is None and link.system is None and link.reply is None
    assert any("no user's message" in n for n in notices), notices


def test_a_message_too_long_for_a_link_is_refused_with_a_notice():
    link, notices = links.parse({"user": "x" * (links.MAX_TEXT_CHARS + 1)})
    assert link.chat is None and any("chat's user's message" in n for n in notices), notices


def test_a_chat_too_long_for_a_link_carries_neither_its_messages_nor_the_text_box():
    """The text box (hidden under a chat) never stands in for the chat: the link opens on the default text."""
    params = links.encode(links.Link(model="smollm2", text="My old sentence.", user="Hi", system="S" * 1600))
    assert params == {"model": "smollm2"}
    assert not links.chat_fits(links.Link(user="Hi", system="S" * 1600))
