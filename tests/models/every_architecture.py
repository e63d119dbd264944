"""Every text architecture of the installed transformers (5.23) with a causal-LM or masked-LM class, as a tiny
random-init model saved to a folder (`build`: its masked-LM class where it has one, an encoder's, else its causal-LM
class; 4 layers, d_model 64, 4 heads of 16, 2 KV heads, small experts and windows), what mha-viz makes of it
loaded as a user's folder (`survey`), and the table of docs/using.md made from that (`table`; `python -m
tests.models.every_architecture` writes it there). SKIPPED says which types are left out and why; BUGS which fail
through a bug of the loader. tests/models/test_every_architecture.py checks every row."""

from __future__ import annotations

import dataclasses
import inspect
import random
import re
import tempfile
import traceback
import warnings

import numpy as np
import torch

from tests.helpers import save_peaked
from tests.models import architectures_2026 as arch

_WRAPPER = "a multimodal wrapper (ForConditionalGeneration) whose text model is surveyed as {}"
_SAME = "its causal-LM class and config are {}'s (the text part of a multimodal config)"
# the types not surveyed: their class needs inputs other than text, or is another type's
SKIPPED = {
    **{t: _WRAPPER.format(f"{t}_text") for t in ("gemma3", "gemma3n", "gemma4", "gemma4_unified")},
    **{t: _SAME.format(f"{t}_text") for t in ("dots3_note", "llama4", "qwen3_5", "qwen3_5_moe", "qwen4_exp")},
    "gpt-sw3": "GPT-2's config and class (GPT2Config, GPT2LMHeadModel): the row of gpt2",
    "got_ocr2": "OCR: a vision encoder inside its class, before the text decoder",
    "moss_transcribe_diarize": "speech: an audio encoder inside its class, before the text decoder",
    "fuyu": "vision–language: image patches into a Persimmon decoder (surveyed as persimmon)",
    "git": "image-to-text: a vision encoder inside its causal-LM class",
    "phi4_multimodal": "vision and audio encoders inside its causal-LM class",
    "modernvbert": "vision–language: a vision encoder inside its masked-LM class",
    "ultravbert": "vision–language: a vision encoder inside its masked-LM class",
    "musicgen": "music: its decoder reads audio codebooks, not text",
    "musicgen_melody": "music: its decoder reads audio codebooks, not text",
    "gemma4_assistant": "a drafting head that reads the keys and values of the Gemma 4 it runs beside",
    "gemma4_unified_assistant": "a drafting head that reads the keys and values of the Gemma 4 it runs beside",
}
# the types that architectures_2026 builds, by its names
BUILT_THERE = {"olmo2": "olmo2", "smollm3": "smollm3", "gpt_oss": "gpt_oss", "cohere2": "cohere2",
               "deepseek_v3": "deepseek_v3", "llama4_text": "llama4", "deberta-v2": "deberta",
               "deepseek_v32": "deepseek_v32", "glm_moe_dsa": "glm_moe_dsa", "gemma3n_text": "gemma3n",
               "qwen3_next": "qwen3_next", "jamba": "jamba", "lfm2": "lfm2", "minimax": "minimax",
               "falcon_h1": "falcon_h1", "zamba2": "zamba2"}


class LayersNotCaptured(AssertionError):
    """A loaded model whose own forward returns attention probabilities for layers its capture leaves out."""


# the types that fail through a bug of mha-viz's loader: (what is raised, the bug); the test expects them to fail
BUGS: dict[str, tuple[type, str]] = {}  # none left: moshi (a raw AttributeError) and Inkling (layers left out) fixed
LAYERS = 4
TOLERANCE = 1e-5  # capture against the model's own eager forward
PER_LAYER = ("layer_types", "layers_block_type", "mlp_layer_types")
# each size of the small shape, under every name a config of transformers gives it: set where the config has it
SIZES = {
    **dict.fromkeys(("num_hidden_layers", "n_layer", "n_layers", "num_layers", "decoder_layers", "encoder_layers",
                     "num_decoder_layers", "num_encoder_layers"), LAYERS),
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "n_embed", "emb_dim", "embed_dim", "dim", "dim_model",
                     "embedding_size"), 64),
    **dict.fromkeys(("num_attention_heads", "n_head", "n_heads", "num_heads", "decoder_attention_heads",
                     "encoder_attention_heads"), 4),
    **dict.fromkeys(("num_key_value_heads", "num_kv_heads", "n_kv_heads"), 2),
    **dict.fromkeys(("head_dim", "dim_head"), 16),
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_dim", "decoder_ffn_dim", "encoder_ffn_dim", "d_ff",
                     "ffn_hidden_size", "d_inner", "intermediate_size_mlp", "hidden_dim", "dim_ff", "dff"), 128),
    **dict.fromkeys(("moe_intermediate_size", "shared_expert_intermediate_size", "expert_intermediate_size"), 32),
    **dict.fromkeys(("max_position_embeddings", "n_positions", "n_ctx"), 128),
    **dict.fromkeys(("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts"), 2),
    **dict.fromkeys(("num_experts_per_tok", "moe_topk", "moe_k", "n_shared_experts", "num_shared_experts", "n_group",
                     "topk_group"), 1),
    **dict.fromkeys(("sliding_window", "attention_chunk_size"), arch.WINDOW),
    "kv_lora_rank": 16, "q_lora_rank": 24, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 12,  # MLA
    # linear attention and state-space layers of hybrids
    "linear_num_value_heads": 4, "linear_num_key_heads": 2, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
    **dict.fromkeys(("mamba_d_state", "state_size", "ssm_state_size"), 8),
    **dict.fromkeys(("mamba_n_heads", "mamba_num_heads"), 8), **dict.fromkeys(("mamba_d_head", "mamba_head_dim"), 16),
    **dict.fromkeys(("mamba_n_groups", "n_groups"), 2), **dict.fromkeys(("mamba_chunk_size", "chunk_size"), 16),
    # sparse attention's indexers (DeepSeek-V3.2 and its relatives), and its blocks
    "index_topk": arch.SPARSE_TOP_K, "index_head_dim": 16, "index_n_heads": 2, "index_block_size": 4,
    "index_topk_blocks": 2,
    **dict.fromkeys(("shared_intermediate_size", "dense_intermediate_size"), 128),
    **dict.fromkeys(("moe_shared_expert_intermediate_size", "shared_experts_intermediate_size"), 32),
    **dict.fromkeys(("input_embedding_size", "output_embedding_size"), 64),
    "max_2d_position_embeddings": 128, "o_lora_rank": 16, "rotary_dim": 8,
    "vocab_size": 400, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
}
# multi-head latent attention (DeepSeek-V2 and its relatives, known by kv_lora_rank): as architectures_2026's
# DeepSeek-V3, a key and value head for every query head, head_dim the rotary part's
MLA = {"num_key_value_heads": 4, "head_dim": 8}
# where the generic sizes are not enough (or wrong): the type's own, on top
OVERRIDES: dict[str, dict] = {
    "bamba": {"attn_layer_indices": [1, 3]},  # its default has no attention layer, Bamba-9B's has some
    "blt": {"encoder_hash_byte_group_vocab": 64, "local_attention_window_len": arch.WINDOW,
            **{part: {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 4, "num_hidden_layers": 2,
                      "intermediate_size": 128, "head_dim": 16, "hidden_size_global": 64}
               for part in ("patcher_config", "encoder_config", "decoder_config", "global_config")}},
    "cohere_compass_text": {"rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
    "cpmant": {"prompt_types": 4, "prompt_length": 4, "segment_types": 4, "position_bias_num_buckets": 32,
               "position_bias_max_distance": 128},
    "dbrx": {"attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
             "ffn_config": {"hidden_size": 64, "ffn_hidden_size": 128, "moe_num_experts": 2, "moe_top_k": 1}},
    "dots3_note_text": {"head_dim": 16,  # its sliding layers have fewer heads, as Dots3's
                        "per_layer_config": {layer: {"num_attention_heads": 2, "num_key_value_heads": 2}
                                             for layer in ("2", "3")}},
    "esmc": {"num_key_value_heads": 4},
    "gemma4_text": {"hidden_size_per_layer_input": 8, "vocab_size_per_layer_input": 400,
                    "layer_types": ["sliding_attention"] * 3 + ["full_attention"],
                    "per_layer_config": {"03": {"head_dim": 32}}},  # its global layer's heads larger, as Gemma 4's
    "funnel": {"block_sizes": [1, 1, 1], "d_head": 16},
    "gemma4_unified_text": {"per_layer_config": {"3": {"head_dim": 32}}},
    "gpt_neo": {"attention_types": [[["global", "local"], 2]], "window_size": arch.WINDOW},
    "granitemoehybrid": {"layer_types": ["mamba", "attention"] * 2},  # as bamba
    **dict.fromkeys(("inkling_text", "inkling2_text"), {
        "swa_num_attention_heads": 4, "swa_num_key_value_heads": 2, "swa_head_dim": 16,
        "sliding_window_size": arch.WINDOW}),
    "kimi_linear": {"linear_head_dim": 16, "linear_num_heads": 4, "num_experts_per_token": 1},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"] * 2, "num_dense_layers": 1},
    "longcat_flash": {"zero_expert_num": 1, "expert_ffn_hidden_size": 32, "moe_topk": 2},  # one: its router breaks
    "luke": {"entity_vocab_size": 16, "entity_emb_size": 16},
    "mamba2": {"num_heads": 8},
    "mobilebert": {"embedding_size": 32, "intra_bottleneck_size": 32},
    "neomme": {"patch_size": 4, "embedding_rank": 32},
    "perceiver": {"d_latents": 64, "num_latents": 16, "num_self_attends_per_block": 4, "num_self_attention_heads": 4,
                  "num_cross_attention_heads": 4},
    "qwen4_exp_text": {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 16, "indexer_budget": 8,
                       "indexer_compress_ratio": 2, "hc_lowrank": 8, "ple_embed_dim": 64, "ngram_vocab_size_base": 64,
                       "split_ngram_parts": 2, "heads_per_ngram": 2},
    "reformer": {"axial_pos_shape": [8, 16], "axial_pos_embds_dim": [32, 32], "attention_head_size": 16,
                 "feed_forward_size": 128, "local_attn_chunk_length": 8, "lsh_attn_chunk_length": 8,
                 "attn_layers": ["local", "lsh"] * 2,
                 "hash_seed": 0},  # else each forward draws its LSH buckets afresh: no two runs' attention agree
    "roc_bert": {"shape_vocab_size": 16, "pronunciation_vocab_size": 16, "shape_embed_dim": 32,
                 "pronunciation_embed_dim": 32},
    "zamba": {"layers_block_type": ["linear_attention", "hybrid"] * 2, "attention_hidden_size": 128,
              "attention_head_dim": 32, "mamba_dt_rank": 8},
}


def _mappings() -> tuple[dict, dict]:
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )
    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES


def every_type() -> list[str]:
    """Every model type with a causal-LM or masked-LM class in the installed transformers."""
    causal, masked = _mappings()
    return sorted({*causal, *masked})


def surveyed() -> list[str]:
    return [t for t in every_type() if t not in SKIPPED]


def model_class(model_type: str):
    """The type's masked-LM class (an encoder's), else its causal-LM class; a masked-LM class that is an
    encoder–decoder's (BART's ForConditionalGeneration) gives way to the causal one (its decoder)."""
    import transformers

    causal, masked = _mappings()
    name = masked.get(model_type)
    if name is None or (name.endswith("ForConditionalGeneration") and model_type in causal):
        name = causal[model_type]
    return getattr(transformers, name)


def _config_class(model_type: str):
    """The config the class is built from: the type's own, or its class's where that is the text part of a
    composite (Emu3's, Mllama's)."""
    from transformers import CONFIG_MAPPING

    own = CONFIG_MAPPING[model_type]
    if getattr(own, "sub_configs", None) and "text_config" in own.sub_configs:
        return model_class(model_type).config_class
    return own


def _default(config_cls):
    """The config class's defaults, or None where it needs arguments."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return config_cls()
        except Exception:  # noqa: BLE001 - a config that needs arguments: its signature alone
            return None


def config(model_type: str):
    """The small random-init config of `model_type` (SIZES where it has them, OVERRIDES on top), its layers of
    every kind the default's are (a hybrid's default of 4 layers may have no attention layer)."""
    cls = _config_class(model_type)
    default = _default(cls)
    accepted = set(inspect.signature(cls.__init__).parameters) | set(default.to_dict() if default else ())
    kw = {k: v for k, v in SIZES.items() if k in accepted}
    if "kv_lora_rank" in accepted:
        kw.update(MLA)
    kw.update(OVERRIDES.get(model_type, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = cls(**kw)
        patterns = {}
        for name in PER_LAYER:
            kinds, wanted = getattr(made, name, None), getattr(default, name, None)
            if isinstance(kinds, list) and name not in kw:
                every = list(dict.fromkeys(wanted if isinstance(wanted, list) else kinds))  # in order of appearance
                if len(kinds) != LAYERS or not set(every) <= set(kinds):
                    patterns[name] = [every[i % len(every)] for i in range(LAYERS)]
        if patterns:
            made = cls(**kw, **patterns)
    return made


MAX_PARAMS = 3_000_000  # a config whose sizes were not all made small: refused before it is built


def build(model_type: str, out) -> str:
    """A random-init `model_type` (seeded, peaked heads) saved with a byte-level tokenizer to `out`."""
    if model_type in BUILT_THERE:
        return arch.build(BUILT_THERE[model_type], out)
    cls, made = model_class(model_type), config(model_type)
    with torch.device("meta"):
        size = sum(p.numel() for p in cls(made).parameters())
    if size > MAX_PARAMS:
        raise ValueError(f"{model_type}: {size:,} parameters, some sizes not made small")
    random.seed(0)  # torch's generator: save_peaked's seed
    np.random.seed(0)
    return save_peaked(cls, made, out, sharpened=arch.SHARPENED, scale=2.0, norm=2.0)


# --- the survey ------------------------------------------------------------------------------------------------
TEXT = "The cat sat on the mat and the dog ran to the park, then the cat sat on the mat again."
NOT_LOADED = "—"
LONGEST = 160  # a reason's characters in the table


@dataclasses.dataclass
class Found:
    """What mha-viz makes of one type: its table row (type, loads, capture = HF, heads' outputs z and values,
    our MHA stands in), and the capture's largest gap to the model's own eager forward and the layers it left out
    (`capture_gap`), a refusal's message or the raw exception `load_model` raised."""

    row: tuple[str, ...]
    gap: float | None = None
    missed: list[int] = dataclasses.field(default_factory=list)  # layers with probabilities not captured
    message: str | None = None
    error: BaseException | None = None
    model: object = None  # the loaded model, for the features run on it


def plain(text: str, folder: str) -> str:
    """A message as a table cell: the folder named as "it", the list of what mha-viz reads left out, one line,
    no pipes, backticks or HTML, cut at LONGEST characters."""
    from mha_viz_models.families.architectures import SUPPORTED

    text = text.replace(SUPPORTED, "").replace(f"'{folder}'", "it").replace(str(folder), "it")
    text = text.replace("`", "").replace("|", "/").replace("<", "&lt;").replace(">", "&gt;")
    text = " ".join(text.split()).rstrip(" .")
    if len(text) > LONGEST:
        text = text[:LONGEST].rsplit(" ", 1)[0] + " …"
    return text


def capture_gap(model) -> tuple[float, list[int]]:
    """(the largest gap between every captured layer's probabilities of TEXT and the model's own eager forward's,
    the model's layers whose own forward returns attention probabilities (`_probabilities`) that are not
    captured). A hybrid's softmax layers are compared by their numbers where the model returns an entry for every
    layer; the gap is infinite where the layers differ in number or shape."""
    import mha_viz

    ids = torch.tensor([mha_viz.tokenize(model, TEXT).ids])
    cap = model.capture(ids)
    captured = [a if m is None else torch.cat([a, m], -1)  # a compressed layer's entries after its tokens (DeepSeek-V4)
                for a, m in zip(cap.attentions, cap.memory or [None] * len(cap.attentions))]
    with torch.inference_mode():
        own = list(model.hf_model(input_ids=ids, output_attentions=True, use_cache=False).attentions)
    missed = []
    if len(own) == model.total_layers != model.num_layers:
        missed = [n for n, a in enumerate(own) if n not in model.layer_ids and _probabilities(a, ids.shape[1])]
        own = [own[n] for n in model.layer_ids]
    own = [a for a in own if a is not None]
    if len(own) != len(captured) or any(a.shape != b.shape for a, b in zip(captured, own)):
        return float("inf"), missed
    return max(float((a.float() - b.float()).abs().max()) for a, b in zip(captured, own)), missed


def _probabilities(a, n: int) -> bool:
    """Whether `a` is one input's attention probabilities over its n tokens: (1, heads, n, n), no weight negative, no
    row summing past 1 (a sink's share leaves some below)."""
    return (isinstance(a, torch.Tensor) and a.dim() == 4 and tuple(a.shape[2:]) == (n, n) and bool((a >= 0).all())
            and bool((a.float().sum(-1) <= 1 + 1e-4).all()))


def survey(model_type: str, folder: str) -> Found:
    """Load the model saved in `folder` as a user's, and read what it gets (module doc)."""
    import mha_viz
    from mha_viz_models.errors import ModelLoadError

    try:
        model = mha_viz.load_model(folder, device="cpu")
    except ModelLoadError as exc:
        row = (model_type, f"refused: {plain(str(exc), folder)}", *[NOT_LOADED] * 3)
        return Found(row, message=str(exc))
    except Exception as exc:  # noqa: BLE001 - a bug of the loader: said in the table, raised by the test
        last = traceback.format_exception_only(exc)[-1]
        return Found((model_type, f"fails: {plain(last, folder)}", *[NOT_LOADED] * 3), error=exc)
    gap, missed = (0.0, []) if model.effective else capture_gap(model)  # effective: no probabilities of its own
    if model.effective:  # checked against each layer's own output: tests/models/test_effective_attention.py
        capture = f"effective attention of its {model.effective} layers (no softmax)"
    elif missed:
        capture = f"no: {_numbers(missed)} of {model.total_layers} give probabilities not captured"
    elif gap > TOLERANCE:
        capture = f"no: {gap:.1g} away"
    else:
        capture = f"yes, {_numbers(model.layer_ids)} of {model.total_layers}" if model.layer_numbers else "yes"
    if model.has_head_outputs and model.reads_values:
        heads = "yes"
    elif model.has_head_outputs:
        heads = f"z, not values: {plain(model.unread or '', folder)}"
    else:
        heads = f"no: {plain(model.unread or '', folder)}"
    if model.can_recompute:
        stand_in = "yes"
    elif model.stand_in:
        stand_in = f"no: {plain(model.stand_in, folder)}"
    else:
        stand_in = "no: its heads' outputs are not read"
    return Found((model_type, "yes", capture, heads, stand_in), gap=gap, missed=missed, model=model)


def _numbers(numbers) -> str:
    """"layer 2" or "layers 1, 3"."""
    return ("layers " if len(numbers) > 1 else "layer ") + ", ".join(map(str, numbers))


HEADER = ("type", "loads", "capture = HF", "heads' outputs z and values", "our MHA stands in")


def table(rows) -> str:
    """The Markdown table of `rows` (Found.row each), in the order given."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def rows_of(markdown: str) -> list[tuple[str, ...]]:
    """The rows of a table `table` made (its header and rule left out)."""
    return [tuple(cell.strip() for cell in line.strip().strip("|").split(" | ")) for line in markdown.splitlines()[2:]]


FLOAT = re.compile(r"\d+\.\d+(?:e[-+]?\d+)?|\d+e[-+]?\d+")


def shape(row) -> tuple[str, ...]:
    """A row with its measured numbers (a gap "0.94 away") as "#": another machine's rounding may move them."""
    return tuple(FLOAT.sub("#", cell) for cell in row)


DOC = "docs/using.md"
BLOCK = re.compile(r"(<!-- architectures:[^>]*-->\n)(.*?)(<!-- /architectures -->)", re.S)


def documented() -> dict[str, tuple[str, ...]]:
    """Each type's row of the table in DOC, by type."""
    from tests.helpers import ROOT

    (_, body, _), = BLOCK.findall((ROOT / DOC).read_text())
    return {row[0]: row for row in rows_of(body.strip())}


def write_docs() -> None:
    """Survey every type and put the table between DOC's markers."""
    from tests.helpers import ROOT

    rows = []
    for model_type in surveyed():
        with tempfile.TemporaryDirectory() as out:
            rows.append(survey(model_type, build(model_type, out)).row)
    page = ROOT / DOC
    text, found = BLOCK.subn(lambda m: m.group(1) + table(rows) + "\n" + m.group(3), page.read_text())
    assert found == 1, f"{DOC} has no <!-- architectures: --> markers"
    page.write_text(text)


if __name__ == "__main__":
    write_docs()
