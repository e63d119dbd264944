"""Faults while the app runs: each gives a clear message, the app stays up, the user's text
stays, and the last good result stays on screen."""

from __future__ import annotations

import pytest

import mha_viz
from mha_viz import analyze_text
from tests.app.helpers import charts, open_page, shown, start_app
from tests.helpers import byte_bpe_tokenizer

pytestmark = pytest.mark.model
OTHER = "Other: hub id or folder…"


def _after_a_good_run():
    at = start_app()
    at.text_area(key="text").input("A good sentence first.").run()
    assert not at.exception and not at.error and charts(at)
    return at


def _still_up(at, needle: str) -> None:
    assert not at.exception
    assert any(needle in shown(e.value) for e in at.error), [e.value for e in at.error]
    assert at.text_area(key="text").value == "A good sentence first."
    assert any("last successful result" in c.value for c in at.caption)
    assert charts(at)  # the last good overview stays
    at.selectbox(key="model_choice").set_value("minilm").run()  # and the app keeps answering
    assert not at.exception and not at.error


def _folder(at, folder) -> None:
    at.selectbox(key="model_choice").set_value(OTHER).run()
    at.text_input(key="model_other").input(str(folder)).run()


def test_truncated_safetensors(bert_dir, tmp_path):
    import shutil

    broken = tmp_path / "truncated"
    shutil.copytree(bert_dir, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    at = _after_a_good_run()
    _folder(at, broken)
    _still_up(at, "Cannot load the weights")


def test_an_architecture_without_attention_to_capture(tmp_path):
    from transformers import Lfm2Config, Lfm2ForCausalLM

    tok = byte_bpe_tokenizer()
    folder = tmp_path / "lfm2"  # every layer its short convolution: no softmax layer, not read as effective attention
    config = Lfm2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, layer_types=["conv", "conv"])
    Lfm2ForCausalLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    at = _after_a_good_run()
    _folder(at, folder)
    _still_up(at, "short convolution layers")


def test_a_model_that_raises_during_the_forward_pass(monkeypatch):
    at = _after_a_good_run()
    real = mha_viz.LoadedModel.capture

    def broken(self, *args, **kwargs):
        raise RuntimeError("the kernel failed")

    monkeypatch.setattr(mha_viz.LoadedModel, "capture", broken)
    at.text_area(key="text").input("This one breaks.").run()
    assert any("The analysis failed: RuntimeError: the kernel failed" in shown(e.value) for e in at.error)
    assert any("last successful result" in c.value for c in at.caption) and charts(at)
    open_page(at, "corpus")  # a page that runs the model itself draws no stale result: it says only why not
    assert any("The analysis failed" in shown(e.value) for e in at.error)
    assert not any("last successful result" in c.value for c in at.caption)
    assert any("fix the message above" in i.value for i in at.info)
    open_page(at, "model_view")
    monkeypatch.setattr(mha_viz.LoadedModel, "capture", real)
    at.text_area(key="text").input("A good sentence first.").run()
    assert not at.exception and not at.error


def test_cuda_asked_for_but_absent():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    at = _after_a_good_run()
    at.radio(key="device").set_value("cuda").run()
    assert any("CUDA was asked for" in shown(e.value) for e in at.error)
    assert any("last successful result" in c.value for c in at.caption) and charts(at)
    at.radio(key="device").set_value("auto").run()
    assert not at.exception and not at.error


def test_an_input_too_large_for_memory(monkeypatch):
    """Past the budget the capture is refused before it runs (tests/app/test_app_metrics.py);
    if memory runs out anyway, the message says what to do."""
    at = _after_a_good_run()

    def out_of_memory(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(analyze_text, "analyze", out_of_memory)
    at.text_area(key="text").input("Too much for this machine.").run()
    assert any("needs more memory than this machine has free" in shown(e.value) for e in at.error)
    assert any("last successful result" in c.value for c in at.caption) and charts(at)
    assert at.text_area(key="text").value == "Too much for this machine."


def test_a_gpu_out_of_memory_error_during_an_analysis(monkeypatch):
    """A CUDA out-of-memory error (simulated: no GPU here) becomes a message that says what to do;
    the cache is given back, the sidebar's text and choices stay as they were, and the last good
    result stays on screen."""
    import torch

    from mha_viz.budget import memory

    at = _after_a_good_run()
    at.number_input(key="token_limit").set_value(64).run()
    freed = []

    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(analyze_text, "analyze", out_of_memory)
    monkeypatch.setattr(memory, "free_cache", lambda: freed.append(True))
    sidebar = {k: at.session_state[k] for k in ("model_choice", "device", "local_attention", "token_limit")}
    at.text_area(key="text").input("Too much for this card.").run()
    assert not at.exception
    errors = [shown(e.value) for e in at.error]
    assert any("needs more memory than this machine has free. Lower the token limit in the sidebar, capture "
               "fewer layers, pick a lower precision or a smaller model." in e for e in errors), errors
    assert not any("Tried to allocate" in e or "Traceback" in e for e in errors)
    assert freed
    assert at.text_area(key="text").value == "Too much for this card."
    assert {k: at.session_state[k] for k in sidebar} == sidebar
    assert at.number_input(key="token_limit").value == 64
    assert any("last successful result" in c.value for c in at.caption) and charts(at)


def test_a_capture_over_the_memory_this_machine_has_is_refused_before_it_runs(monkeypatch):
    """With less memory available than the analysis needs (simulated), the message says which
    memory is short and by how much, and nothing runs."""
    from mha_viz.budget import memory

    at = _after_a_good_run()
    monkeypatch.setattr(memory, "host_available", lambda: 2**15)  # MiniLM at 8 tokens holds about 0.5 MB
    ran = []
    monkeypatch.setattr(analyze_text, "analyze", lambda *a, **k: ran.append(True))
    at.text_area(key="text").input("Too much for this machine.").run()
    assert not at.exception and not ran
    errors = [shown(e.value) for e in at.error]
    assert any("of memory," in e and "more than the 32.0 KiB this machine has available" in e
               and "Even one layer does not fit" in e for e in errors), errors
    assert at.text_area(key="text").value == "Too much for this machine."
    assert any("last successful result" in c.value for c in at.caption) and charts(at)


def test_a_gpu_out_of_memory_error_in_a_page_is_a_message(monkeypatch):
    """Any page's heavy work (here the head table of Head metrics) that runs out of memory: the
    advice, the cache given back, the text kept, no traceback; the next page works."""
    import torch

    from mha_viz import metrics
    from mha_viz.budget import memory
    from tests.app.helpers import open_page

    at = _after_a_good_run()
    freed = []

    def out_of_memory(*_a, **_k):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    monkeypatch.setattr(metrics, "head_table", out_of_memory)
    monkeypatch.setattr(memory, "free_cache", lambda: freed.append(True))
    at.session_state["_goto_page"] = "head_metrics"
    at.run()
    assert not at.exception
    assert any("needs more memory than is free" in shown(e.value) and "lower precision" in shown(e.value)
               for e in at.error), [e.value for e in at.error]
    assert not any("Tried to allocate" in shown(e.value) for e in at.error)
    assert freed and at.text_area(key="text").value == "A good sentence first."
    monkeypatch.undo()
    open_page(at, "model_view")
    assert not at.exception and not at.error
