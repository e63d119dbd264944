"""A view as a link (mha_viz.export.link_params), without the app: parameters round-trip, every malformed part
is dropped with a notice a user can read (never an exception), the text limit and the allow-list
hold, and the layer is a model layer number that becomes the right row of a partial capture."""

from __future__ import annotations

import urllib.parse

import pytest

from mha_viz.export import link_params as links
from mha_viz.export.link_params import Link
from mha_viz.features import compare as compare_feature

BUNDLED = ("minilm", "smollm2", "toy-induction")


def test_round_trip_through_a_url():
    link = Link(model="smollm2", text="Harry Potter went home & back?\n<b>x</b> 100% #1",
                layer=29, head=8, detail="words", hide=("special", "first"), ours=True, contributions=True)
    params = links.encode(link)
    assert params == {"model": "smollm2", "text": link.text, "layer": "29", "head": "8", "detail": "words",
                      "hide": "special,first", "mha": "ours", "show": "contributions"}
    url = links.url("http://host:8501/prefix", "head_view", params)
    parts = urllib.parse.urlsplit(url)
    assert parts.path == "/prefix/head_view" and "hide=special,first" in parts.query
    back, notices = links.parse(dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True)),
                                allowed_models=BUNDLED, public=True)
    assert back == link and notices == []


def test_encode_leaves_out_defaults_but_names_the_model():
    default = Link(text="The cat sat.", layer=0, head=0, detail="tokens")
    view = Link(model="minilm", text="The cat sat.", layer=0, head=0, detail="tokens")
    assert links.encode(view, default=default) == {"model": "minilm"}
    assert links.encode(Link(model="minilm", layer=3, head=0), default=default) == {"model": "minilm",
                                                                                    "layer": "3"}
    assert links.url("http://h", "", {}) == "http://h/"  # the default page: no path, no query


def test_text_over_the_limit_is_left_out_and_refused():
    long = "x" * (links.MAX_TEXT_CHARS + 1)
    assert links.text_fits("x" * links.MAX_TEXT_CHARS) and not links.text_fits(long)
    assert "text" not in links.encode(Link(model="minilm", text=long))
    link, notices = links.parse({"model": "minilm", "text": long, "head": "2"})
    assert link == Link(model="minilm", head=2)  # the rest of the link applies
    assert len(notices) == 1 and f"{links.MAX_TEXT_CHARS + 1:,} characters" in notices[0]
    assert f"{links.MAX_TEXT_CHARS:,}" in notices[0]


def test_allow_list_and_folders():
    link, notices = links.parse({"model": "gpt2", "text": "hi"}, allowed_models=BUNDLED, public=True)
    assert link == Link(text="hi") and "does not offer" in notices[0] and "gpt2" in notices[0]
    _, notices = links.parse({"model": "/etc/passwd"}, allowed_models=(), public=True)
    assert notices and "not a model name" in notices[0]
    # a local server with no allow-list: hub ids and folders
    assert links.parse({"model": "owner/model-1.5"})[0].model == "owner/model-1.5"
    assert links.parse({"model": "/data/my model"})[0].model == "/data/my model"
    # an allow-list without public mode still holds
    assert links.parse({"model": "/data/x"}, allowed_models=("smollm2",))[0].model is None


@pytest.mark.parametrize("params,field,word", [
    ({"layer": "x"}, "layer", "layer"),
    ({"layer": "-1"}, "layer", "layer"),
    ({"layer": "1.5"}, "layer", "layer"),
    ({"layer": "99999"}, "layer", "layer"),
    ({"head": "x"}, "head", "head"),
    ({"head": ""}, "head", "head"),
    ({"detail": "everything"}, "detail", "detail"),
    ({"hide": "special,cls"}, None, "hide"),
    ({"mha": "theirs"}, "ours", "mha"),
    ({"show": "values"}, "contributions", "show"),
    ({"model": ""}, "model", "model"),
    ({"model": "a\x00b"}, "model", "model"),
    ({"model": "m" * 400}, "model", "model"),
    ({"evil": "1", "onload": "x"}, None, "evil, onload"),
], ids=lambda v: repr(v)[:30])
def test_every_malformed_part_gives_a_notice(params, field, word):
    link, notices = links.parse({"text": "kept", **params}, allowed_models=(), public=False)
    assert len(notices) == 1 and word in notices[0], notices
    assert link.text == "kept"  # the rest of the link applies
    if field is not None:
        assert getattr(link, field) == getattr(Link(), field)
    if "hide" in params:
        assert link.hide == ("special",)  # the known part stays


def test_script_in_the_text_is_just_text_and_values_are_quoted_short():
    text = "<script>alert(1)</script>"
    link, notices = links.parse({"text": text, "<img src=x onerror=alert(1)>" * 5: "1"})
    assert link.text == text
    assert len(notices) == 1 and len(notices[0]) < 200 and "…" in notices[0]


def test_repeated_parameters_count_by_their_last_value():
    link, notices = links.parse({"layer": ["1", "4"], "hide": ["first"], "text": []})
    assert link.layer == 4 and link.hide == ("first",) and link.text is None and not notices


def test_embed_parameters_are_streamlits():
    assert links.parse({"embed": "true", "embed_options": "dark_theme"}) == (Link(), [])


def test_layer_is_a_model_layer_number_not_a_row():
    link = Link(layer=7, head=3)
    assert links.resolve_head(link, [5, 7, 9], 12) == (1, 3, [])  # a partial capture: layer 7 is row 1
    row, head, notices = links.resolve_head(Link(layer=99, head=12), list(range(6)), 12)
    assert (row, head) == (None, None) and len(notices) == 2
    assert "layer 99" in notices[0] and "0–5" in notices[0]
    assert "head 12" in notices[1] and "12 heads" in notices[1]
    assert "5, 7, 9" in links.resolve_head(Link(layer=6), [5, 7, 9], 12)[2][0]


@pytest.mark.parametrize("value", ["1" * 5000, "0" * 5000, "00003"])
def test_numbers_too_long_to_be_a_layer_are_notices_not_exceptions(value):
    link, notices = links.parse({"layer": value, "head": value, "text": "ok"})
    assert link.layer is None and link.head is None and link.text == "ok"
    assert len(notices) == 2


def test_run_b_is_compares_controls_round_trips_and_is_checked():
    # run B's parameters are Compare's controls (its record), under the names links gave them before
    controls = {c.link_name: c for c in compare_feature.FEATURE.controls if c.carried}
    assert {"compare", "text_b", "model_b", "mha_b"} <= set(controls)
    page = (("compare", "models"), ("text_b", "B & c?"), ("model_b", "owner/other-1"), ("mha_b", "ours"))
    link = Link(model="minilm", text="A cat.", page=page)
    params = links.encode(link)
    assert params == {"model": "minilm", "text": "A cat.", "compare": "models", "text_b": "B & c?",
                      "model_b": "owner/other-1", "mha_b": "ours"}
    back, notices = links.parse(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(
        links.url("http://h", "compare", params)).query)), controls=controls)
    assert back == link and notices == []
    # model B is checked like model A, and each bad part has its own notice
    link, notices = links.parse({"model": "minilm", "model_b": "/etc/passwd", "compare": "all", "mha_b": "x",
                                 "text_b": "y" * (links.MAX_TEXT_CHARS + 1)}, allowed_models=BUNDLED, public=True,
                                controls=controls)
    assert link == Link(model="minilm") and len(notices) == 4
    [about_b] = [n for n in notices if "model B" in n]
    assert "“/etc/passwd”" in about_b and about_b.endswith("model B is the default.")
    assert any("1,500 characters" in n for n in notices) and any("“x” is not “ours” or “hf”" in n for n in notices)
    outside, [notice] = links.parse({"model": "minilm", "model_b": "gpt2"}, allowed_models=BUNDLED, controls=controls)
    assert outside.page == () and "does not offer the link's model B “gpt2”" in notice
    # mha_b's words, and the flag's own 1 and 0, read as B's implementation; written back as its words
    assert links.parse({"mha_b": "hf", "compare": "texts"}, controls=controls)[0] == Link(
        page=(("mha_b", "hf"), ("compare", "texts")))
    assert links.parse({"mha_b": "1"}, controls=controls)[0].page == (("mha_b", "ours"),)
