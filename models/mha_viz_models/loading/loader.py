"""Load a model by registry name, Hugging Face hub id or local folder, ready for attention capture.

Every model is loaded with eager attention (the only kind that returns probabilities), never
with remote code, in the precision asked for (`mha_viz_models.device.precision`; by default "auto": the
checkpoint's own dtype, float32 where the device cannot compute in it, the bundled models
float32), on one device (`mha_viz_models.loading.resolve`; by default "auto": CUDA when there is a GPU,
else the CPU) or, given `max_memory`, spread by accelerate over the GPUs and the CPU
(`mha_viz_models.device.placement`). With `local_attention=True` each self-attention is replaced by our
MHA (`mha_viz_models.families.adapters`). Failures become `ModelLoadError`, whose message says what is
missing and what to do: the UI shows it as it is.

Where the rest lives: `mha_viz_models.loading.bundled` (the bundled models), `mha_viz_models.loading.resolve`
(what a name or folder means, the device), `mha_viz_models.loading.gguf_cache` (GGUF conversion),
`mha_viz_models.loading.loaded` (`LoadedModel`, `Capture`) and `mha_viz_models.toy.model` (toy-induction, built
in code).
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import shutil
import tempfile
import threading
import weakref
from pathlib import Path

import torch
from torch import nn

from mha_viz_models.device.dense_head import dense_head_input
from mha_viz_models.device.placement import devices_used, input_device, is_spread, normalise_max_memory, resolve_device
from mha_viz_models.device.precision import HALF, NOT_FINITE, checkpoint_dtype, dtype_name, resolve_dtype
from mha_viz_models.effective.kinds import named_kinds
from mha_viz_models.errors import ModelLoadError, UnsupportedArchitecture
from mha_viz_models.families.adapters import Adapter
from mha_viz_models.families.architectures import (
    EFFECTIVE_ONLY,
    SUPPORTED,
    head_sizes_differ,
    hybrid_layers,
    per_layer_values,
    refusal,
    softmax_attentions,
)
from mha_viz_models.families.builtin import find_attention, heads_unread, install_local_attention, stand_in_refusal
from mha_viz_models.families.multipliers import fold_multipliers
from mha_viz_models.loading import effective_only
from mha_viz_models.loading.bundled import BUNDLED
from mha_viz_models.loading.loaded import LoadedModel
from mha_viz_models.loading.resolve import RECURRENT_LIMIT, Progress, hub_error, max_positions, resolve_spec
from mha_viz_models.loading.toy_loader import load_toy
from mha_viz_models.reading import verify
from mha_viz_models.toy.model import NAME as TOY_NAME

# Random-init twins are seeded through torch's process-wide generator: two sessions building one
# at the same moment would interleave their draws, so they take turns.
_SEEDED = threading.Lock()
log = logging.getLogger("mha_viz.models")

__all__ = ["load", "load_model", "random_twin"]


def _is_causal(config) -> bool:
    if isinstance(getattr(config, "causal", None), bool):  # XLM, FlauBERT: masked-LM models with an LM head, said
        return config.causal
    archs = config.architectures or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs) or getattr(config, "is_decoder", False):
        return True
    if archs:
        return False
    # heavy (transformers): imported only when a model is loaded
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )
    return config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and \
        config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def _model_class(config, causal: bool):
    # heavy (transformers): imported only when a model is loaded
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

    if getattr(config, "is_encoder_decoder", False):
        return AutoModelForSeq2SeqLM  # with its LM head: the decoder writes the target
    if causal:
        return AutoModelForCausalLM
    archs = config.architectures or []
    if any(a.endswith(("ForMaskedLM", "ForPreTraining", "WithLMHeadModel")) for a in archs):  # XLM's: masked
        return AutoModelForMaskedLM  # keeps the LM head for masked-token predictions
    return AutoModel


def load(
    spec: str | os.PathLike,
    device: str = "auto",
    local_attention: bool = False,
    *,
    progress: Progress | None = None,
    allow_pickle: bool = False,
    dtype: str | torch.dtype = "auto",
    max_memory: dict | None = None,
    offload_folder: str | os.PathLike | None = None,
) -> LoadedModel:
    """Load `spec` (a name in BUNDLED, a hub id or a folder) for capture; see module doc.
    Weights are read from safetensors (or GGUF) only, unless `allow_pickle`; code that comes
    with a model is never run.

    device: "auto" (CUDA when there is a GPU, else the CPU), "cpu", "cuda" or "cuda:N".
    dtype: "auto" (the checkpoint's own, float32 where the device cannot run it; the bundled
    models float32), "float32", "bfloat16" or "float16". The probabilities of every capture are
    float32 whatever the model computes in.
    max_memory: {GPU number | "cpu" | "disk": size}, e.g. {0: "24GiB", "cpu": "64GiB"}: accelerate
    places the layers (`device_map="auto"`) within those budgets; layers it keeps on the CPU or on
    disk are loaded onto the GPU as they run. `device` is then ignored. "disk" offloads to
    `offload_folder` (a temporary folder when none is given)."""
    progress = progress or (lambda _f, _m: None)
    spec = os.fspath(spec)  # a pathlib.Path to a folder is a folder
    if spec.strip() == TOY_NAME:  # built in code (models/mha_viz_models/toy/model.py), not a Hugging Face model
        return load_toy(device, local_attention, progress,
                        dtype=resolve_dtype(dtype, resolve_device(device), fixed=True))
    # heavy (transformers): imported only when a Hugging Face model is loaded
    from transformers import AutoConfig, AutoTokenizer

    dev = resolve_device(device)
    progress(0.0, f"Finding '{spec}'…")
    source, name = resolve_spec(spec, progress, allow_pickle)
    is_local = Path(source).is_dir()
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError, KeyError) as exc:
        if not is_local and not isinstance(exc, (ValueError, KeyError)):
            raise hub_error(spec, exc) from exc
        raise ModelLoadError(
            f"Cannot read the configuration of '{spec}': {str(exc).splitlines()[0][:300]}. "
            "Its architecture may be unknown to the installed transformers; mha-viz never runs "
            "code downloaded with a model."
        ) from exc
    why = refusal(config, spec)
    if why is not None:
        raise ModelLoadError(why)
    sizes = head_sizes_differ(config)  # Gemma 4: read by Hugging Face's attention, stacked at the largest size
    if sizes and local_attention:
        raise ModelLoadError(f"Our MHA cannot stand in for '{spec}': its layers' heads differ in size ({sizes}, by "
                             "layer). Use Hugging Face's attention (every head's attention is still shown).")
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    causal = not seq2seq and _is_causal(config)  # an encoder–decoder's encoder reads both ways
    want = resolve_dtype(dtype, dev, saved=checkpoint_dtype(config), fixed=spec.strip() in BUNDLED)
    placing = _placement(max_memory, offload_folder)
    progress(0.4, f"Loading the weights of '{name}' in {dtype_name(want)}…")
    try:
        model = _model_class(config, causal).from_pretrained(
            source, attn_implementation="eager", dtype=want,
            use_safetensors=None if allow_pickle else True, **placing,
        )
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as exc:
        if not is_local:
            raise hub_error(spec, exc) from exc
        raise ModelLoadError(f"Cannot load the weights in '{spec}': {str(exc).splitlines()[0][:300]}") from exc
    except (ValueError, KeyError, RuntimeError) as exc:
        if placing and "offload" in str(exc).lower():
            raise ModelLoadError(
                f"'{spec}' does not fit in the max_memory given ({placing['max_memory']}): add room on the CPU, "
                "or 'disk' to offload the rest to disk.") from exc
        raise ModelLoadError(
            f"'{spec}' cannot be loaded for attention capture: {str(exc).splitlines()[0][:300]}"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - e.g. safetensors' own error for a damaged file
        raise ModelLoadError(
            f"Cannot load the weights in '{spec}': the file may be incomplete or damaged "
            f"({type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]})."
        ) from exc
    if tokenizer.pad_token is None:  # decoders often have none; padding is only for batches
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    if is_spread(model):  # accelerate placed every layer; inputs go where the embeddings compute
        dev = input_device(model)
        if "offload_folder" in placing:  # the folder goes with the model
            weakref.finalize(model, shutil.rmtree, placing["offload_folder"], True)
        if local_attention and any(p.device.type == "meta" for p in model.parameters()):
            raise ModelLoadError(
                f"Our MHA cannot stand in for the layers of '{spec}' that accelerate keeps off the GPU (offloaded "
                "to the CPU or to disk): use Hugging Face's attention, or give max_memory room for every layer.")
    else:
        model.to(dev)
    model.eval()
    fold_multipliers(model)  # Falcon-H1's μP factors around its attention, into the attention's own weights
    dense_head_input(model)  # the last rows handed to the LM head, made contiguous (bfloat16 on a CPU: 200 ×)
    if config.model_type in EFFECTIVE_ONLY:  # Mamba, Mamba-2: each layer read as its effective attention
        return effective_only.load(model, config, tokenizer, name, source, dev, want, local_attention,
                                   max_positions=max_positions(config, tokenizer, RECURRENT_LIMIT),
                                   progress=progress)
    ids = verify.probe(config.vocab_size, dev)
    reference = None
    if local_attention and not seq2seq:  # what the model's own attention gives, to compare ours with
        progress(0.7, "Running the model's own attention once, to check ours against it…")
        reference = (verify.reference_calls(model, verify.own_attention(model), ids, float32=True) if want in HALF
                     else verify.eager_attentions(model, ids))  # half precision: each layer's call, checked alone
    if local_attention:
        progress(0.8, "Putting our multi-head attention in place of the model's…")
    try:
        adapters, modules, stand_in = _attention_layers(model, causal=causal, local_attention=local_attention,
                                                        seq2seq=seq2seq)
    except UnsupportedArchitecture as exc:
        raise ModelLoadError(str(exc)) from exc
    unread = heads_unread(modules)
    if unread:  # every head's attention is read, not its output
        modules = []
    num_heads = config.num_attention_heads
    d_model = config.hidden_size
    hybrid = None if seq2seq else hybrid_layers(config)  # (softmax layers' numbers, the others' by kind)
    if hybrid and isinstance(reference, list):  # eager probabilities: the softmax layers' (MiniMax returns more)
        reference = softmax_attentions(reference, hybrid[0], config.num_hidden_layers)
    model.requires_grad_(False)  # gradients are taken for activations only (attribution patching, importance)
    loaded = LoadedModel(
        name=name, hf_model=model, tokenizer=tokenizer, device=dev, is_causal=causal,
        local_attention=local_attention, model_type=config.model_type,
        num_layers=len(hybrid[0]) if hybrid else config.num_hidden_layers, num_heads=num_heads,
        layer_numbers=tuple(hybrid[0]) if hybrid else (), other_layers=named_kinds(model, hybrid[1]) if hybrid else {},
        num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads, d_model=d_model,
        d_k=max(per_layer_values(config).get("head_dim")
                or [getattr(config, "head_dim", None) or d_model // num_heads]),  # Gemma 4's largest
        num_params=sum(p.numel() for p in model.parameters()), max_positions=max_positions(config, tokenizer),
        source=source, adapters=adapters, attention_modules=modules, is_encoder_decoder=seq2seq, stand_in=stand_in,
        unread=None if modules or seq2seq else unread or _UNREAD,
        dtype=want, placement=tuple(devices_used(model)),
        decoder_layers=(getattr(config, "decoder_layers", None) or getattr(config, "num_decoder_layers", None)
                        or config.num_hidden_layers) if seq2seq else 0,
        decoder_heads=(getattr(config, "decoder_attention_heads", None) or num_heads) if seq2seq else 0,
    )
    if loaded.can_recompute and not local_attention:
        try:  # read one layer's weights through our adapter: an unexpected layout shows here
            loaded.layer_adapter(0).mha.head_weights()
        except Exception:  # noqa: BLE001 - heads' outputs are still read; our MHA does not stand in
            loaded = dataclasses.replace(loaded, stand_in=f"'{config.model_type}' attention lays out its weights "
                                         "in a way our MHA does not read")
    if loaded.can_recompute:  # key/value heads as the layers compute them (Falcon-7B: 1, not its config's)
        kv = loaded.layer_adapter(0).mha.num_kv_heads
        if kv != loaded.num_kv_heads:
            loaded = dataclasses.replace(loaded, num_kv_heads=kv)
    progress(0.9, "Checking that every layer's attention can be captured…")
    eager = None
    try:  # the probe that every load runs; its probabilities, heads' outputs and values are checked below
        if seq2seq:
            loaded.capture_seq2seq(ids, torch.tensor([[loaded.decoder_start()]]))
        else:
            loaded, eager = verify.check_heads(loaded, ids, verify.tolerance(want))
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - a model that cannot run is reported, not raised
        log.warning("'%s' failed on the probe", spec, exc_info=True)
        raise ModelLoadError(f"'{spec}' ({config.model_type}) loaded but could not run on a test input of "
                             f"{verify.PROBE_TOKENS} tokens with attention probabilities returned. "
                             f"{SUPPORTED}.") from exc
    sinks = any(name.endswith("sinks") for name, _ in model.named_parameters())  # GPT-OSS's, DeepSeek-V4's
    why = None if local_attention else verify.not_probabilities(eager or [], ids.shape[1], want, sinks=sinks)
    if why is not None:  # Longformer's window, Reformer's chunks, SqueezeBERT's and YOSO's weights
        raise ModelLoadError(f"'{spec}' ({config.model_type}) {why}: mha-viz reads softmax attention over the tokens. "
                             f"{SUPPORTED}.")
    heads = eager[0].shape[1] if eager else loaded.num_heads
    if heads != loaded.num_heads:  # ConvBERT's config counts its convolution heads, JetMoE's its experts' heads
        loaded = dataclasses.replace(loaded, num_heads=heads, num_kv_heads=heads, attention_modules=[], unread=(
            f"it returns {heads} heads' probabilities a layer where its config says {num_heads} (some of its "
            "heads are not attention, or are mixed from several), so no head's output is read apart"))
    # the model's own attention too (its calls before ours took their place): ours may stay finite where it is not
    seen = [*(eager or ()), *(c.probs for c in reference or () if isinstance(c, verify.Call))]
    if want in HALF and eager is not None and not all(bool(torch.isfinite(a).all()) for a in seen):
        why, instead = NOT_FINITE[dtype_name(want)]
        raise ModelLoadError(f"'{spec}' gives attention that is not finite (NaN or infinity) on a test input in "
                             f"{dtype_name(want)}: {why}. Choose {instead}.")
    tolerance = verify.tolerance(want)
    if want in HALF and eager is not None and (reference is not None or loaded.can_recompute):
        loaded = verify.half_verdict(loaded, spec, reference, ids)  # each layer against its own rounding
    elif reference is not None:
        layer, gap = verify.worst_gap(reference, eager)
        if gap > tolerance:
            raise ModelLoadError(
                f"Our MHA does not reproduce the attention of '{spec}' ({config.model_type}): layer "
                f"{hybrid[0][layer] if hybrid and 0 <= layer < len(hybrid[0]) else layer} is "
                f"{gap:.2g} away from the model's own on a test input (its rotary positions, masks or biases "
                "differ from the families mha-viz knows). Use Hugging Face's attention for this model.")
    elif loaded.can_recompute and eager is not None:  # the per-layer recompute must match, or our MHA
        try:                                              # does not stand in (heads' outputs are still read)
            layer, gap = verify.recompute_gap(loaded, ids, eager)
        except Exception:  # noqa: BLE001 - a layout the recompute cannot follow
            layer, gap = -1, float("inf")
        if gap > tolerance:
            log.warning("'%s': recomputed attention is %.2g from the model's own (layer %d): our MHA does not stand in",
                        spec, gap, layer)
            number = loaded.layer_ids[layer] if 0 <= layer < len(loaded.layer_ids) else layer  # the model's number
            where = f"layer {number} is {gap:.2g} away from the model's own" if layer >= 0 else "its layers do not run"
            loaded = dataclasses.replace(loaded, stand_in=(
                f"our MHA does not reproduce the attention of '{config.model_type}' ({where} on a test input: its "
                "rotary positions, masks or biases differ from the families mha-viz knows)"))
    progress(1.0, f"'{name}' ready.")
    return loaded


def load_model(name: str | os.PathLike, device: str = "auto", local_attention: bool = False, *,
               dtype: str = "auto", max_memory: dict | None = None, progress: Progress | None = None) -> LoadedModel:
    """Load a registry name ('minilm', 'smollm2'), hub id or folder (`mha_viz.load_model`); see `load`.

    device: "auto" (CUDA when there is a GPU, else the CPU), "cpu", "cuda" or "cuda:N".
    dtype: "auto" (the checkpoint's own, float32 where the device cannot run it; the bundled
    models float32), "float32", "bfloat16" or "float16": what the model computes in;
    probabilities are float32 in every precision.
    max_memory: e.g. {0: "24GiB", "cpu": "64GiB"}: accelerate spreads the model over the GPUs and
    the CPU within those budgets (`device` is then ignored)."""
    return load(name, device=device, local_attention=local_attention, progress=progress, dtype=dtype,
                max_memory=max_memory)


def random_twin(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """The same architecture and tokenizer at random initialisation (the model's own init
    scheme, seeded): the baseline that gives head-diversity numbers their meaning."""
    if len(loaded.placement) > 1 or "disk" in loaded.placement:
        raise ModelLoadError(
            f"{loaded.name} is spread over {' + '.join(loaded.placement)} by accelerate: a random-init twin of it "
            "would need all of it on one device, so no random baseline is built.")
    with loaded.lock:  # a lean capture switches the shared config to SDPA while it holds the lock
        config = copy.deepcopy(loaded.hf_model.config)
    config._attn_implementation = "eager"  # the only kind that returns probabilities
    with _SEEDED, torch.random.fork_rng(devices=[]):  # one seeded build at a time: the generator is global
        torch.manual_seed(seed)
        model = type(loaded.hf_model)(config)
    model.to(device=loaded.device, dtype=loaded.dtype).eval().requires_grad_(False)  # the precision of the model beside
    fold_multipliers(model)
    dense_head_input(model)
    adapters, modules, _ = _attention_layers(model, causal=loaded.is_causal, local_attention=loaded.local_attention,
                                             seq2seq=loaded.is_encoder_decoder)
    return dataclasses.replace(  # a fresh lock, and weights and adapters derived afresh
        loaded, name=f"{loaded.name} (random init, seed {seed})", hf_model=model,
        source=f"random initialisation of {loaded.source}", adapters=adapters,
        attention_modules=modules if loaded.attention_modules else [], placement=(),  # all on `device`
    )


def _placement(max_memory: dict | None, offload_folder) -> dict:
    """from_pretrained's placement arguments: none (the caller moves the model to one device), or
    accelerate's device map within `max_memory`."""
    if max_memory is None:
        return {}
    budget = normalise_max_memory(max_memory)
    placing = {"device_map": "auto", "max_memory": budget}
    if offload_folder is not None or "disk" in budget:
        placing["offload_folder"] = os.fspath(offload_folder or tempfile.mkdtemp(prefix="mha-viz-offload-"))
    return placing


_UNREAD = ("mha-viz does not know where this architecture's heads' outputs meet W_O (no attention module of a "
           "family it knows)")


def _attention_layers(model: nn.Module, *, causal: bool, local_attention: bool, seq2seq: bool = False) -> tuple[
        list[Adapter], list[tuple[nn.Module, str]], str | None]:
    """(adapters installed, [(module, family tag)] per layer, why our MHA cannot stand in or None).
    With local_attention every self-attention is replaced by ours (UnsupportedArchitecture when it
    cannot be); otherwise the originals are found (their heads' outputs are read whether or not our
    MHA computes them), or none when no family knows them (attention is still shown). An
    encoder–decoder's attentions are read by `LoadedModel.capture_seq2seq`, not as layers: none are listed."""
    if local_attention:
        adapters = install_local_attention(model, causal=causal)
        return adapters, [] if seq2seq else _in_call_order(model, [(a, "ours") for a in adapters]), None
    if seq2seq:
        return [], [], None
    try:
        found = find_attention(model)
    except UnsupportedArchitecture:
        return [], [], None
    return [], _in_call_order(model, [(m, fam) for _, _, m, fam in found]), stand_in_refusal(found, model.config)


def _in_call_order(model: nn.Module, modules: list[tuple[nn.Module, str]]) -> list[tuple[nn.Module, str]]:
    """One (module, family) per softmax-attention layer (a hybrid's other layers have none), in the
    order the model runs them: the modules themselves when there is one per layer; where layers share
    one (ALBERT runs its one attention module 12 times), the order a two-token probe calls them in;
    none when that does not give one a layer."""
    hybrid = hybrid_layers(model.config)
    layers = len(hybrid[0]) if hybrid else model.config.num_hidden_layers
    if len(modules) == layers or not modules:
        return modules
    family = {id(m): fam for m, fam in modules}
    calls: list[nn.Module] = []
    hooks = [m.register_forward_pre_hook(lambda mod, _args: calls.append(mod)) for m, _ in modules]
    try:
        with torch.inference_mode():
            model(input_ids=torch.tensor([[0, 1]], device=next(model.parameters()).device))
    except Exception:  # noqa: BLE001 - the caller's own probe reports a model that cannot run
        calls = []
    finally:
        for h in hooks:
            h.remove()
    return [(m, family[id(m)]) for m in calls] if len(calls) == layers else []
