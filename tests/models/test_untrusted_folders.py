"""Model folders from untrusted places: safetensors only unless pickles are allowed locally,
and code shipped with a model is never run (random-init BERT folders)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import mha_viz


def _random_bert(folder: Path, *, pickled: bool) -> Path:
    from transformers import AutoTokenizer, BertConfig, BertModel

    from mha_viz_models.loading.bundled import BUNDLED

    tok = AutoTokenizer.from_pretrained(BUNDLED["minilm"].locate())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=32)
    model = BertModel(config)
    model.save_pretrained(folder)
    if pickled:  # the older format (transformers 5 saves safetensors only): a pickle of the weights
        torch.save(model.state_dict(), folder / "pytorch_model.bin")
        (folder / "model.safetensors").unlink()
    tok.save_pretrained(folder)
    return folder


def test_pickled_weights_are_refused_unless_allowed_locally(tmp_path):
    folder = _random_bert(tmp_path / "pickled", pickled=True)
    assert (folder / "pytorch_model.bin").exists() and not (folder / "model.safetensors").exists()
    with pytest.raises(mha_viz.ModelLoadError, match="only pickled weights"):
        mha_viz.load_model(str(folder), device="cpu")
    import mha_viz_models

    model = mha_viz_models.load(str(folder), device="cpu", allow_pickle=True)  # the explicit local setting
    assert model.num_layers == 1
    safe = _random_bert(tmp_path / "safe", pickled=False)
    assert mha_viz.load_model(str(safe), device="cpu").num_layers == 1


def test_code_shipped_with_a_model_is_never_run(tmp_path):
    """A folder whose config points at its own Python code (auto_map) is refused, and that code
    does not run: the marker file it would write never appears."""
    folder = _random_bert(tmp_path / "remote", pickled=False)
    marker = tmp_path / "ran.txt"
    (folder / "evil_model.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from transformers import BertConfig as EvilConfig, BertModel as EvilModel\n")
    import json

    config = json.loads((folder / "config.json").read_text())
    config["model_type"] = "evil-model"
    config["auto_map"] = {"AutoConfig": "evil_model.EvilConfig", "AutoModel": "evil_model.EvilModel"}
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(mha_viz.ModelLoadError):
        mha_viz.load_model(str(folder), device="cpu")
    assert not marker.exists()
