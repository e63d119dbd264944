"""Shared fixtures: seeded randomness, the public deployment mode, the bundled models (loaded
once per session) and random-init GPT-2 / BERT / Llama folders saved to a temporary directory
(used by tests/models and tests/app). Also the tiers: each test is marked with its folder's
marker (unit, models, app, e2e), and the layout rules are checked at collection."""

from __future__ import annotations

import inspect
import os
import random
import shutil
from pathlib import Path

# Before torch loads its OpenMP runtime (read once, at load; inherited by the servers and command lines the
# tests start): a thread of torch's waiting for work sleeps instead of spinning. `make test` runs three
# processes, each with as many torch threads as cores, next to the browser and the tests' servers; spinning,
# the idle threads took the cores from the busy ones (a MiniLM forward 2 to 10 times slower on 2 loaded cores).
# The thread counts, and so every code path that reads them, stay as they were.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Without a GPU, Triton's kernels run under its interpreter on CPU tensors (tests/models/test_row_triton.py): it must
# be on before Triton is first imported (its library's own functions are made then), which torch may do.
if shutil.which("nvidia-smi") is None:  # no NVIDIA driver: no GPU to compile for
    os.environ.setdefault("TRITON_INTERPRET", "1")

import numpy as np  # noqa: E402 - after the OpenMP setting above
import pytest  # noqa: E402
import torch  # noqa: E402

from tests.helpers import MODEL_FIXTURES, PRETRAINED, SUITE_ONLY_ENV, TIERS, byte_bpe_tokenizer  # noqa: E402
from tests.waiting import wait_until  # noqa: E402


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# One PyTorch thread in each process of `make test` where its processes are at least as many as the cores (3 on
# 2 in CI): the cores are full with the processes themselves, and a second intra-op thread only adds its
# hand-offs (six model and app files on three processes: 7 % less CPU, user and system alike, stop 111). Set in
# this process only: the servers, command lines and kernels the tests start run as deployed. The code paths of
# several threads keep their own tests at a count they set (`two_torch_threads`; BlockSums and the pooled
# kernels take theirs as a parameter).
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")) >= _cores():
    torch.set_num_threads(1)


@pytest.fixture()
def two_torch_threads():
    """PyTorch's count at 2 for the test, whatever the machine or the suite's setting above, and back after: for
    the tests of what a scan's workers do to the count, which on 1 would change nothing."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield 2
    torch.set_num_threads(before)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
for _name, _value in SUITE_ONLY_ENV.items():  # tests/helpers.py says why; the browser tests' servers go without
    os.environ.setdefault(_name, _value)
# the suite reads its texts at the limit it was written for: locally the default is the model's whole
# context (tests/unit/test_deploy.py), which would make every long text a long run of SmolLM2's 8,192 tokens
os.environ.setdefault("MHA_VIZ_MAX_TOKENS", "512")


@pytest.fixture()
def triton_kernels():
    """For a test that runs Triton kernels: under the interpreter (no GPU), made quicker (tests/triton_interpreter.py).
    A fixture, not at import: importing Triton in every test process costs its start and prints its bindings' leak
    report at exit."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        from tests.triton_interpreter import quicken

        quicken()


@pytest.fixture(autouse=True)
def _seed():
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _thread_count_kept():
    """Every test leaves PyTorch's process-wide thread count (what a new thread reads) as it found it: a test that
    built a Ray actor's class in this process set 1, and every later test of its process ran on one core. A
    reduction under way on a thread another test left running holds 1 for a moment: polled until it is back."""
    from mha_viz.scan.torch_threads import process_count

    before = process_count()
    yield
    if not wait_until(lambda: process_count() == before, 10):
        after = process_count()
        torch.set_num_threads(before)
        pytest.fail(f"the test left PyTorch's thread count at {after} (it was {before})", pytrace=False)


@pytest.fixture()
def public(monkeypatch):
    """The app in public mode (allow-list, 32-token cap) with empty model cache and slots."""
    from mha_viz.ui.kit import resources

    monkeypatch.setenv("MHA_VIZ_PUBLIC", "1")
    monkeypatch.setenv("MHA_VIZ_MAX_TOKENS", "32")
    resources.model_cache.clear()
    resources.slots.clear()
    yield
    resources.model_cache.clear()
    resources.slots.clear()


def _bundled(name: str, local_attention: bool, fixture_name: str):
    """A session fixture loading a bundled model once, with HF's attention or ours."""
    @pytest.fixture(scope="session", name=fixture_name)
    def _fixture():
        import mha_viz
        return mha_viz.load_model(name, device="cpu", local_attention=local_attention)
    return _fixture


minilm = _bundled("minilm", False, "minilm")
minilm_ours = _bundled("minilm", True, "minilm_ours")
smollm2 = _bundled("smollm2", False, "smollm2")
smollm2_ours = _bundled("smollm2", True, "smollm2_ours")
toy_induction = _bundled("toy-induction", False, "toy_induction")


def _save_random(tmp_path_factory, name, model_cls, config, tok, seed):
    """Save a random-init model and its tokenizer as a Hugging Face folder."""
    folder = tmp_path_factory.mktemp(name)
    torch.manual_seed(seed)
    model_cls(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def gpt2_dir(tmp_path_factory):
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = byte_bpe_tokenizer()
    config = GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=64, n_layer=3, n_head=4)
    return _save_random(tmp_path_factory, "gpt2-random", GPT2LMHeadModel, config, tok, 1)


@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory):
    """Random-init BertForMaskedLM with MiniLM's WordPiece vocabulary."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    import mha_viz  # noqa: F401 - makes sure the bundled package is importable
    from mha_viz_models.loading.bundled import BUNDLED

    tok = AutoTokenizer.from_pretrained(BUNDLED["minilm"].locate())
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)
    return _save_random(tmp_path_factory, "bert-random", BertForMaskedLM, config, tok, 2)


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory):
    """Random-init Llama with grouped-query attention (8 query heads, 2 KV heads)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = byte_bpe_tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                         max_position_embeddings=128)
    return _save_random(tmp_path_factory, "llama-random", LlamaForCausalLM, config, tok, 3)


@pytest.fixture(scope="session")
def mistral_window_dir(tmp_path_factory):
    """Random-init Mistral with a sliding window of 8 tokens (4 query heads, 2 KV heads)."""
    from transformers import MistralConfig, MistralForCausalLM

    tok = byte_bpe_tokenizer()
    config = MistralConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                           sliding_window=8)
    return _save_random(tmp_path_factory, "mistral-window-random", MistralForCausalLM, config, tok, 4)


@pytest.fixture(scope="session")
def t5_dir(tmp_path_factory):
    """Random-init T5 (an encoder–decoder: 2 encoder layers, 3 decoder layers, 4 heads)."""
    from transformers import T5Config, T5ForConditionalGeneration

    tok = byte_bpe_tokenizer()
    config = T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=3,
                      num_heads=4, decoder_start_token_id=0, pad_token_id=0, eos_token_id=0)
    return _save_random(tmp_path_factory, "t5-random", T5ForConditionalGeneration, config, tok, 5)


# --- tiers --------------------------------------------------------------------------------------



def _tier(item: pytest.Item) -> str | None:
    parts = item.path.relative_to(Path(__file__).parent).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def _fixtures(item: pytest.Item) -> set[str]:
    """The fixtures a test asks for: by name, or (if it takes `request`) as a parameter's value,
    the way tests pass a fixture's name to request.getfixturevalue."""
    names = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)
    if callspec is not None and "request" in inspect.signature(item.function).parameters:
        names |= {v for v in callspec.params.values() if isinstance(v, str)}
    return names


def _group(item: pytest.Item) -> str:
    """Which tests run in one process when `make test` spreads the suite over the cores (pytest-xdist,
    `--dist loadgroup`): a file's tests together, so its module and session fixtures are made once; every
    browser test in one process (tests/scheduling.py's `group`), so that the suite starts one shared server and
    one browser (tests/e2e/conftest.py's `server`, `browser`, a session's each)."""
    from tests.scheduling import group

    return group(item.nodeid)


def pytest_runtest_logstart(nodeid, location):
    """With MHA_VIZ_TEST_TIMELINE=FILE, each process of the suite writes when each test starts and ends
    (tests/scheduling.py's `timeline`: what runs beside what, where the suite's time goes)."""
    from tests.scheduling import timeline

    timeline(nodeid, "start")


def pytest_runtest_logfinish(nodeid, location):
    from tests.scheduling import timeline

    timeline(nodeid, "end")


def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` handing out the longest groups first (tests/scheduling.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.scheduling import LongestFirst

    return LongestFirst(config, log)


@pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the xdist_group marker
def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier (from its folder) and its group (`_group`; tests/scheduling.py reads
    the group from the test's id), and refuse a layout that breaks the rules: every test lives in a tier
    folder, no unit test uses a model fixture, and every test that uses a pretrained fixture carries the
    `model` marker."""
    problems = []
    for item in items:
        tier = _tier(item)
        if tier is None:
            problems.append(f"{item.nodeid}: not in a tier folder ({', '.join(TIERS)})")
            continue
        item.add_marker(getattr(pytest.mark, tier))
        item.add_marker(pytest.mark.xdist_group(_group(item)))
        used = _fixtures(item)
        if tier == "unit" and used & MODEL_FIXTURES:
            problems.append(f"{item.nodeid}: a unit test uses {sorted(used & MODEL_FIXTURES)}")
        if used & PRETRAINED and item.get_closest_marker("model") is None:
            problems.append(f"{item.nodeid}: uses {sorted(used & PRETRAINED)} without @pytest.mark.model")
    if problems:
        raise pytest.UsageError("test layout:\n  " + "\n  ".join(problems))
