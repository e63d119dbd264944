"""What the Compare page compares run A (the sidebar's) with: its mode (two sentences on one model,
or one sentence on two models), sentence B and model B, with the minimal pairs it offers; set
before the page draws them and read back as a link's fields (`links`)."""

from __future__ import annotations

from dataclasses import replace

from mha_viz.export import link_params as links
from mha_viz.features.compare import controls as compare_keys
from mha_viz.ui.kit import link_parts, session, shared_head
from mha_viz.ui.shell import sidebar

SENTENCES, MODELS = "Two sentences, one model", "One sentence, two models"
MODES = {"texts": SENTENCES, "models": MODELS}  # by their slug in a link (links.COMPARE)
PAIRS = {  # minimal pairs: (A, B)
    "Agreement: are / is": ("The keys to the old wooden cabinet are missing.",
                            "The keys to the old wooden cabinet is missing."),
    "Coreference: tired / wide": ("The animal didn't cross the street because it was too tired.",
                                  "The animal didn't cross the street because it was too wide."),
    "Word order": ("The dog chased the cat across the yard.", "The cat chased the dog across the yard."),
    "Repetition": ("Harry Potter went to Hogwarts.", "Harry Potter went to Hogwarts. Later, Harry Potter went home."),
}
DEFAULT_TEXT_B = PAIRS["Agreement: are / is"][1]


def choose_run_b(*, mode: str | None = None, text_b: str | None = None, model_b: str | None = None,
           ours_b: bool = False) -> bool:
    """Set the page's mode (a slug of MODES) and run B before it is drawn (a link); None leaves
    one as it is. False when this server does not offer `model_b`."""
    if mode is not None:
        session.put(compare_keys.CMP_MODE, MODES[mode])
    if text_b is not None:
        session.put(compare_keys.CMP_TEXT_B, text_b)
    if not sidebar.put_model(model_b, compare_keys.CMP_MODEL_B, compare_keys.CMP_OTHER_B):
        return False
    if model_b is not None:
        session.put(compare_keys.CMP_LOCAL_B, ours_b)
    return True


def run_b_choices() -> dict:
    """The page's mode and run B as `mha_viz.export.link_params.Link` fields (what its widgets hold)."""
    slug = {mode: slug for slug, mode in MODES.items()}.get(session.get(compare_keys.CMP_MODE), "texts")
    if slug == "texts":
        return {"compare": slug, "text_b": session.get(compare_keys.CMP_TEXT_B) or None}
    return {"compare": slug, "model_b": sidebar.picked_model(compare_keys.CMP_MODEL_B, compare_keys.CMP_OTHER_B),
            "ours_b": bool(session.get(compare_keys.CMP_LOCAL_B))}


def open_run_b(link: links.Link) -> list[str]:
    """Run B from a link (`choose_run_b`); a notice when this server does not offer its model B."""
    if choose_run_b(mode=link.compare, text_b=link.text_b, model_b=link.model_b, ours_b=link.ours_b):
        return []
    return [f"This server does not offer the link's model B “{link.model_b}”: model B is the default."]


def _default(link: links.Link) -> links.Link:
    """Compare opens on two sentences, B the default pair's; a link without a head opens it on the head that
    changed most, so a head chosen is always written."""
    link = replace(link, compare="texts", text_b=DEFAULT_TEXT_B)
    return replace(link, layer=None, head=None) if shared_head.head_chosen() else link


LINK = link_parts.register(link_parts.LinkPart("compare", open_run_b, run_b_choices, _default))
