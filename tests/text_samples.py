"""Texts that tests of tokenization share: hard cases for cutting a text to a token limit, and real
prose (this project's documentation) of any length."""

from __future__ import annotations

from tests.helpers import ROOT

ESTIMATE_TOLERANCE = 0.06  # the estimated count of a long prose text, relative to the exact one

PROSE = "The keeper climbed the narrow stairs, lit the lamp and watched the boats come home. "
HARD = {  # the cut must not change the tokens kept, wherever the prefix ends in these
    "whitespace runs": "one two three " + " " * 700 + "four\t\t\t\n\n  five" + "\n" * 300 + " six seven " * 20,
    "one long word": "start here " + "x" * 3000 + " end of it " * 10,
    "long word, then prose": "y" * 150 + " " + PROSE * 8,
    "emoji and joiners": "👨‍👩‍👧‍👦 family 🎉🎉🎉 party 👍🏽 yes " * 30,
    "combining marks": "cafe\u0301 nai\u0308ve re\u0301sume\u0301 Ångström " * 30,
    "CJK": "我们在河边的老房子里看雨。東京は雨です。한국어 문장입니다. " * 30,
    "contractions": "don't it's we're they'll I'm you've she'd " * 30,
    "space before word": "a  b   c    d     e\u00a0f \u3000g " * 40,
    "digits": "1234567890 3.14159 2024-05-01 1,000,000 " * 30,
    "special tokens typed": "[SEP] x [CLS]y <|im_start|>user <|endoftext|> [MASK] <jupyter_output> " * 20,
    "punctuation": "!!!???...,,,;;;---___***((()))[[[]]] " * 40,
    "no spaces": (PROSE * 10).replace(" ", ""),
}


def docs_prose(chars: int) -> str:
    """Real prose: this project's documentation, paragraph after paragraph, to `chars` characters."""
    paragraphs = [p for f in sorted((ROOT / "docs").glob("*.md")) for p in f.read_text().split("\n\n")
                  if len(p) > 200 and not p.startswith(("|", "```", "#"))]
    text, i = "", 0
    while len(text) < chars:
        text += paragraphs[i % len(paragraphs)] + "\n\n"
        i += 7  # stride through the documents, not one after another
    return text[:chars]
