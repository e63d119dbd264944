"""A chat's roles on the Head view's block and word levels (`drawing.chat_roles`): in the block view each token takes
its share of its block, so a block that mixes roles shows each role over its share (positions worked out by hand
below); in the word view each word takes its first token's role, and is the template's only where all its tokens are."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from mha_viz.drawing import chat_roles
from mha_viz.text.chat import ROLES


def _top_bands(fig: go.Figure) -> list:
    return sorted((s for s in fig.layout.shapes if s.yref == "paper"), key=lambda s: s.x0)


def test_a_block_that_mixes_roles_shows_each_over_its_share():
    # 10 tokens in 4 blocks: 0-2, 3-4, 5-7, 8-9; token 0 the template's (system), 1-3 system, 4-9 user
    edges = np.array([0, 3, 5, 8, 10])
    role = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1])
    template = np.array([True] + [False] * 9)
    fig = go.Figure(go.Heatmap(z=np.zeros((4, 4)), x=list("abcd"), y=list("abcd")))
    fig.update_xaxes(type="category")
    bands = _top_bands(chat_roles.with_roles(fig, role, template, edges=edges))
    # token p sits at block k + (p − edges[k]) / (edges[k + 1] − edges[k]), cells centred on k: −0.5 from there
    want = [(-0.5, 1 / 3 - 0.5, "system", True), (1 / 3 - 0.5, 1.5 - 0.5, "system", False),
            (1.5 - 0.5, 4 - 0.5, "user", False)]
    assert len(bands) == len(want)
    for band, (x0, x1, who, own) in zip(bands, want):
        assert band.x0 == pytest.approx(x0) and band.x1 == pytest.approx(x1)
        assert band.fillcolor == chat_roles.ROLE_COLOURS[who]
        assert (band.opacity < 1) == own


def test_without_edges_a_cell_is_a_token():
    role, template = np.array([0, 1, 1, 2]), np.array([False, True, False, False])
    fig = go.Figure(go.Heatmap(z=np.zeros((4, 4))))
    bands = _top_bands(chat_roles.with_roles(fig, role, template))
    assert [(b.x0, b.x1) for b in bands] == [(-0.5, 0.5), (0.5, 1.5), (1.5, 2.5), (2.5, 3.5)]


def test_a_word_takes_its_first_tokens_role_and_is_the_templates_when_all_its_tokens_are():
    role = np.array([0, 0, 1, 1, 1, 2])
    template = np.array([True, True, True, False, False, False])
    groups = [np.array([0, 1]), np.array([2, 3]), np.array([4]), np.array([5])]
    word_role, word_template = chat_roles.by_word(role, template, groups)
    assert word_role.tolist() == [0, 1, 1, 2]
    assert word_template.tolist() == [True, False, False, False]
    assert [ROLES[r] for r in word_role] == ["system", "user", "user", "assistant"]


def test_a_generated_reply_is_the_assistants_and_its_turn_end_the_templates():
    from mha_viz.text.chat import ChatText
    told = ChatText("rendered", np.array([0, 0, 1, 1, 2], np.int8), np.array([True, False, True, False, True]))
    role, template = told.with_reply(4, [17, 9, 2], special={2, 3})  # the prompt: its first 4 tokens
    assert role.tolist() == [0, 0, 1, 1, 2, 2, 2] and role.dtype == np.int8
    assert template.tolist() == [True, False, True, False, False, False, True]
    assert told.with_reply(6, [17], special=set()) is None  # a prompt longer than the chat: not this chat's
