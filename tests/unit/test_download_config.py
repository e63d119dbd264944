"""Chart downloads (Plotly's camera button): format, publication size and a safe file name."""

from __future__ import annotations

from mha_viz.drawing import style as figure_style


def test_svg_at_paper_size_and_png_scaled():
    svg = figure_style.download_config("svg", "paper, full width (7 in at 300 dpi)", "minilm-head")
    opts = svg["toImageButtonOptions"]
    assert opts["format"] == "svg" and opts["width"] == 1050 and opts["scale"] == 1
    png = figure_style.download_config("png", "paper, full width (7 in at 300 dpi)", "x")["toImageButtonOptions"]
    assert png["width"] * png["scale"] == 2100  # 7 inches at 300 dpi
    assert svg["displaylogo"] is False


def test_unknown_choices_fall_back_and_as_shown_has_no_fixed_size():
    opts = figure_style.download_config("exe", "huge", "a")["toImageButtonOptions"]
    assert opts["format"] == "png" and "width" not in opts and opts["scale"] == 2


def test_file_names_are_safe():
    assert figure_style.safe_filename("../../etc/passwd <x>") == "etc-passwd--x"
    assert figure_style.safe_filename("owner/model:v1") == "owner-model-v1"
    assert figure_style.safe_filename("///") == "mha-viz"
    assert len(figure_style.safe_filename("a" * 500)) == 80
