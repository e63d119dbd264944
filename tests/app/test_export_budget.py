"""A download the server could never make says so in the sidebar, and its button is off: the
`.npz` and the HTML report declare their bytes (`export.downloads`: their plans), and one larger
than a whole budget would fail inside the browser's download with no word (AppTest, with a planted
budget)."""

from __future__ import annotations

from mha_viz.budget import admission
from mha_viz.ui.kit import resources
from tests.app.helpers import export_box, open_with_text


class Planted(admission.Admission):
    def __init__(self) -> None:
        self.host = 2**40
        super().__init__(0, budget=lambda place: self.host)


def _downloads(at) -> dict[str, bool]:
    return {b.proto.label: b.proto.disabled for b in at.get("download_button")}


def test_a_download_larger_than_the_servers_budget_is_off_and_says_why(monkeypatch):
    planted = Planted()
    monkeypatch.setattr(resources, "slots", lambda: planted)
    at = export_box(open_with_text("model_view", "The cat sat on the mat because it was tired."))
    shown = _downloads(at)
    assert shown["Attention data (.npz)"] is False and shown["HTML report"] is False
    planted.host = 1000  # smaller than either file
    at.run()
    assert not at.exception, at.exception
    shown = _downloads(at)
    assert shown["Attention data (.npz)"] is True and shown["HTML report"] is True
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "The .npz file needs about" in captions and "The report needs about" in captions
    assert "lower the token limit" in captions
