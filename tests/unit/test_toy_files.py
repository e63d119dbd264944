"""toy-induction without loading it: the committed weight files and its letter tokenizer."""

from __future__ import annotations

from mha_viz_models.toy.model import FOLDER, ToyConfig, make_tokenizer


def test_weights_are_committed_safetensors_under_2_mb():
    weights = FOLDER / "model.safetensors"
    assert weights.stat().st_size <= 2 * 2**20
    assert (FOLDER / "config.json").exists() and not list(FOLDER.glob("*.bin"))


def test_tokenizer_round_trips_letters_and_maps_the_rest_to_unknown():
    tok = make_tokenizer()
    ids = tok("a b c")["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["<bos>", "a", "b", "c"]
    assert tok.decode(ids, skip_special_tokens=True) == "a b c"
    odd = tok("a 1 b é")["input_ids"]
    assert odd[2] == odd[4] == tok.unk_token_id and tok.decode(odd[1:2]) == "a"
    assert tok.pad_token == "<pad>" and tok.model_max_length == 64
    assert tok.bos_token_id in tok.all_special_ids and tok.unk_token_id in tok.all_special_ids
    assert len(tok) == ToyConfig().vocab_size == 29
