"""A loaded model ready for attention capture (`LoadedModel`); what a capture records: `reading.records`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import torch
from torch import nn

from mha_viz_models.attention.heads import ReusedValues, ValuePath, all_padded, kv_head, output_blocks, padded_heads
from mha_viz_models.attention.memory import split_layers
from mha_viz_models.device.placement import has_offloaded, resident_copy
from mha_viz_models.device.precision import dtype_name
from mha_viz_models.errors import ModelLoadError
from mha_viz_models.families.adapters import Adapter
from mha_viz_models.families.architectures import SUPPORTED, kv_heads_by_layer, softmax_attentions
from mha_viz_models.families.builtin import make_adapter, output_projection, value_path
from mha_viz_models.loading import switch, weight_versions
from mha_viz_models.loading.facts import describe
from mha_viz_models.loading.outputs_run import z_hooks
from mha_viz_models.reading import given, records
from mha_viz_models.reading.hooks import distinct
from mha_viz_models.reading.records import Capture, LayerInput, Seq2SeqCapture, input_hooks, value_hooks


@dataclass
class LoadedModel:
    """A Hugging Face model (or one of ours with the same interface) ready for capture, with
    the facts the app shows about it. `model_type` is the config's model type ("bert",
    "llama", "toy-induction"…); the attention family of each layer is in `attention_modules`."""

    name: str
    hf_model: nn.Module
    tokenizer: object
    device: torch.device
    is_causal: bool
    local_attention: bool
    model_type: str
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_model: int
    d_k: int
    num_params: int
    max_positions: int
    source: str
    adapters: list[Adapter] = field(default_factory=list, repr=False)
    # (module, family tag: `families.builtin.FAMILIES`) of each layer's self-attention as the model runs it (our
    # adapters, tagged "ours", when local_attention); empty when the heads' outputs z cannot be read off the input of
    # the layer that applies W_O (`unread` says why).
    attention_modules: list[tuple[nn.Module, str]] = field(default_factory=list, repr=False)
    # Why our MHA cannot compute these layers (lean capture, the teaching walkthrough, queries and
    # keys, W_Q, W_K and W_V need it): the features it lacks, named; None when it can
    stand_in: str | None = None
    # Why the heads' outputs (`attention_modules` empty) or their values (`reads_values` False) were not read, or None
    unread: str | None = None
    # whether each head's values are read (the contributions lens's value norms)
    reads_values: bool = True
    # A hybrid (Qwen3-Next, Jamba, LFM2…): the model's number of each of its `num_layers` softmax-attention
    # layers, and its other layers' numbers by kind ("linear_attention": [0, 1, 2, 4, …]); a run's
    # `layer_ids` are these numbers. Empty for a model whose layers are all attention.
    layer_numbers: tuple[int, ...] = ()
    other_layers: dict[str, list[int]] = field(default_factory=dict)
    # An encoder–decoder (T5, BART, Marian…): num_layers, num_heads are the encoder's; the decoder's
    # self- and cross-attention have decoder_layers × decoder_heads (see `capture_seq2seq`).
    is_encoder_decoder: bool = False
    decoder_layers: int = 0
    decoder_heads: int = 0
    effective: str = ""  # a model of effective layers alone (`loading.effective_only`): their kind; "" for others
    # what the weights compute in (`mha_viz_models.device.precision`); probabilities are float32 whatever it is
    dtype: torch.dtype = torch.float32
    # the devices accelerate spread the model over ("cuda:0", "cpu", "disk"); empty: all on `device`
    placement: tuple[str, ...] = ()
    # Derived once per instance (a `dataclasses.replace` copy starts afresh):
    _weights: tuple | None = field(default=None, init=False, repr=False, compare=False)  # (version, stacked)
    _views: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # layer -> (version, Adapter)
    # One forward at a time per model (sessions share it); re-entrant: `head_weights` holds it in `layer_adapter`
    lock: threading.RLock = field(default_factory=threading.RLock, init=False, repr=False, compare=False)
    # Builds `layer_adapter`'s adapters once however many sessions ask (not `lock`: head_weights holds that one)
    _views_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def attention_bytes(self, n: int, *, layers: int | None = None, batch: int = 1) -> int:
        """Bytes of float32 probabilities of `batch` inputs of n tokens over `layers` (default: all), as captured."""
        return (self.num_layers if layers is None else layers) * batch * self.num_heads * n * n * 4

    def facts(self) -> dict[str, str]:
        """What the model is, as plain strings (the Model facts page, the HTML report): `facts.describe`."""
        return describe(self)

    @property
    def precision(self) -> str:
        """'float32', 'bfloat16' or 'float16': what the model computes in."""
        return dtype_name(self.dtype)

    @property
    def device_text(self) -> str:
        """The device, or where accelerate spread the layers ("cuda:0 + cpu (spread by accelerate)")."""
        if self.placement and self.placement != (str(self.device),):
            return f"{self.device} (layers on {' + '.join(self.placement)}, placed by accelerate)"
        return str(self.device)

    @property
    def implementation(self) -> str:
        return "ours (mha-viz MultiHeadAttention)" if self.local_attention else "Hugging Face eager"

    @property
    def layer_ids(self) -> list[int]:
        """The model's number of each attention layer that is captured (a hybrid's softmax layers)."""
        return list(self.layer_numbers) if self.layer_numbers else list(range(self.num_layers))

    @property
    def layer_kv_heads(self) -> dict[int, int]:
        """{layer number: its key/value heads} where the layers differ (Gemma 4's global layers); {}: num_kv_heads."""
        return kv_heads_by_layer(getattr(self.hf_model, "config", None))

    @property
    def total_layers(self) -> int:
        """The model's layers: its softmax layers and a hybrid's others (a layer that holds both counted once)."""
        return len({*self.layer_ids, *(n for numbers in self.other_layers.values() for n in numbers)})

    @property
    def has_head_outputs(self) -> bool:
        """Whether each head's output z and W_O can be read: head outputs, direct logit attribution,
        patching, switching heads off, the metrics that need z."""
        return bool(self.attention_modules)

    @property
    def can_recompute(self) -> bool:
        """Whether our MHA computes each layer's attention from the model's weights: lean capture,
        the teaching walkthrough, queries and keys, W_Q, W_K and W_V."""
        return bool(self.attention_modules) and self.stand_in is None

    def value_path(self, layer: int) -> ValuePath | None:
        """Where layer `layer`'s values come out of the model's own modules, for a model whose values
        are not read through our MHA (`can_recompute` False); None otherwise, or when they cannot be read."""
        if self.can_recompute or not self.reads_values or not self.attention_modules:
            return None
        module, family = self.attention_modules[layer]
        found = value_path(module, family, self.hf_model.config)
        if isinstance(found, ReusedValues):  # the values of the earlier layer whose keys and values it reuses
            stores = [i for i, (m, _) in enumerate(self.attention_modules)
                      if getattr(m, "layer_idx", None) == found.layer_idx and i != layer]
            return self.value_path(stores[0]) if stores else None
        return found

    def capture(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, *, lean: bool = False,
                head_outputs: bool = True, inputs: bool = False, watch=(), on_input=None,
                gives_outputs: bool = False) -> Capture:
        """Run the model once, recording every layer's probabilities and every head's output z.

        lean: run the model with fused attention (PyTorch's SDPA) instead, record only each
        attention layer's input (and RoPE angles), and leave `attentions` None: `recompute`
        then gives the probabilities of the layers and heads that are wanted.
        head_outputs: False (lean only) skips recording each head's output z, which at long n
        is as large as the recorded inputs (L × n × d_model floats).
        inputs: an eager capture records each attention layer's input too (a lean one always
        does), and each layer's values as W_V wrote them, for what is computed from them
        (`mha_viz_models.reading.values.value_norms`, which then projects no values again).
        watch (eager): (module, hook) pairs registered as forward hooks for this run only, inside the lock
        (another session's forward never sees them). on_input (lean): `on_input(layer, LayerInput)` inside
        the forward as each layer's input arrives, instead of keeping it (`layer_inputs` None).
        gives_outputs (lean, with on_input, where `takes_outputs`): `on_input` returns that layer's attention
        output before W_O, (B, H, n, d_v), which the layer uses instead of computing its attention
        (`reading.given`).
        """
        input_ids = input_ids.to(self.device)
        attention_mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(self.device)
        if lean:
            return self._capture_lean(input_ids, attention_mask, head_outputs, on_input, gives_outputs)
        probs: list[torch.Tensor] = []
        zs: list[torch.Tensor] = []
        w_vs = []  # each layer's W_V, its adapter built outside inference mode (a fused layout's
        # copies of rows must stay ordinary tensors, whose versions the MHA reads)
        if inputs and self.can_recompute:  # (an offloaded layer's W_V never runs as such: its values
            # are projected again from the recorded input)
            w_vs = [None if self.placement and has_offloaded(m) else self.layer_adapter(layer).mha.w_v
                    for layer, (m, _) in enumerate(self.attention_modules)]
        elif inputs and self.has_head_outputs:  # values off the model's own modules (no input needed)
            paths = [self.value_path(layer) for layer in range(len(self.attention_modules))]
            w_vs = [None if p is None else p.module for p in paths]

        with self.lock, torch.inference_mode():  # hooks inside the lock: one run's capture each
            hooks = [a.register_forward_hook(lambda _m, _i, out: probs.append(out[1])) for a in distinct(self.adapters)]
            hooks += [module.register_forward_hook(hook) for module, hook in watch]
            hooks += z_hooks(self, zs)  # z from W_O's input, ours or the model's
            layer_inputs: list[LayerInput] = []
            written: dict[int, list[torch.Tensor]] = {}  # id(W_V) -> its outputs
            if inputs:
                hooks += value_hooks(w_vs, written) + (
                    input_hooks(self.attention_modules, layer_inputs) if self.can_recompute else [])
            try:
                out = self.hf_model(
                    input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True,
                    output_attentions=not self.local_attention, use_cache=False,
                )
            finally:
                for h in hooks:
                    h.remove()
        attentions = tuple(probs) if self.local_attention else tuple(
            softmax_attentions(out.attentions, self.layer_numbers, self.total_layers))
        # DeepSeek-V4's compressed layers: rows over the tokens, then over the memory entries
        attentions, memory = (attentions, None) if self.local_attention else split_layers(attentions, self.hf_model)
        if len(attentions) != self.num_layers or any(a is None for a in attentions):
            raise ModelLoadError(
                f"'{self.name}' ({self.model_type}) did not return the attention probabilities of its "
                f"{self.num_layers} layers, so it cannot be captured. {SUPPORTED}."
            )
        head_outputs = all_padded(zs) if len(zs) == self.num_layers else None  # Gemma 4's smaller heads: zeros after
        recorded = tuple(layer_inputs) if len(layer_inputs) == self.num_layers else None
        kept = [written.get(id(w), []) for w in w_vs]  # W_V shared by layers (ALBERT) or never run: None
        values = tuple(w[0] if len(w) == 1 else None for w in kept) if w_vs else None
        return Capture(out.hidden_states[-1], attentions, head_outputs, out, recorded, attention_mask, values=values,
                       memory=memory)

    def capture_seq2seq(self, source_ids: torch.Tensor, target_ids: torch.Tensor) -> Seq2SeqCapture:
        """Run an encoder–decoder once on source ids (B, n_src) and decoder input ids (B, n_tgt)
        (the decoder's start token first), recording every attention of both stacks."""
        source_ids, target_ids = source_ids.to(self.device), target_ids.to(self.device)
        kept: dict[str, list] = {"encoder": [], "decoder": [], "cross": []}  # our adapters' probabilities
        with self.lock, torch.inference_mode():
            hooks = [a.register_forward_hook(lambda m, _i, out: kept[m.role].append(out[-1]))  # T5's: 3 outputs
                     for a in self.adapters]
            try:
                out = self.hf_model(input_ids=source_ids, attention_mask=torch.ones_like(source_ids),
                                    decoder_input_ids=target_ids, output_attentions=not self.local_attention,
                                    use_cache=False)
            finally:
                for h in hooks:
                    h.remove()
        if self.local_attention:
            parts = (tuple(kept["encoder"]), tuple(kept["decoder"]), tuple(kept["cross"]))
        else:
            parts = (tuple(out.encoder_attentions or ()), tuple(out.decoder_attentions or ()),
                     tuple(out.cross_attentions or ()))
        wanted = (self.num_layers, self.decoder_layers, self.decoder_layers)
        if tuple(map(len, parts)) != wanted or any(a is None for part in parts for a in part):
            raise ModelLoadError(
                f"'{self.name}' ({self.model_type}) did not return the attention probabilities of its encoder, "
                f"decoder and cross-attention layers, so it cannot be captured. {SUPPORTED}.")
        return Seq2SeqCapture(*parts, out)

    def decoder_start(self) -> int:  # the token an encoder–decoder's decoder starts from (T5: padding; BART: </s>)
        for holder in (getattr(self.hf_model, "generation_config", None), self.hf_model.config):
            start = getattr(holder, "decoder_start_token_id", None)
            if start is not None:
                return int(start)
        return int(self.tokenizer.pad_token_id or 0)

    def greedy_target(self, source_ids: torch.Tensor, max_new_tokens: int) -> list[int]:
        """What an encoder–decoder writes for source ids (1, n_src), greedily: the decoder's input
        ids, its start token first, at most `max_new_tokens` after it (stopping at end of text)."""
        source_ids = source_ids.to(self.device)
        with self.lock, torch.inference_mode():
            out = self.hf_model.generate(
                input_ids=source_ids, attention_mask=torch.ones_like(source_ids), do_sample=False, num_beams=1,
                max_new_tokens=int(max_new_tokens), decoder_start_token_id=self.decoder_start(),
                # transformers sizes the decoder's cache by the encoder's layer count: a decoder
                # with more layers (some T5 variants) writes without one
                use_cache=self.decoder_layers == self.num_layers)
        return [int(i) for i in out[0]]

    def _capture_lean(self, input_ids: torch.Tensor, mask: torch.Tensor, head_outputs: bool, on_input,
                      gives_outputs: bool) -> Capture:
        if gives_outputs and (on_input is None or not self.takes_outputs):
            raise ValueError(f"'{self.name}' cannot take given attention outputs (takes_outputs), or no on_input "
                             f"gives them.")
        if not self.can_recompute:
            raise ModelLoadError(f"Lean capture recomputes each layer with our MHA, which cannot compute the "
                                 f"attention of '{self.name}': {self.stand_in or self.unread}")
        inputs: list[LayerInput] | records.InputSink = [] if on_input is None else records.InputSink(on_input)
        zs: list[torch.Tensor] = []

        with self.lock, torch.inference_mode():
            hooks, fused = [], False
            try:  # everything that changes the shared model is undone in `finally`, even on error
                hooks += input_hooks(self.attention_modules, inputs)
                if head_outputs:
                    hooks += z_hooks(self, zs)
                fused = switch.use_given(self) if gives_outputs else switch.use_fused(self)
                # the base model, without the LM head: SmolLM2's logits alone would be
                # n × 49,152 floats (1.6 GB at 8,192 tokens), and lean capture does not need
                # them; nor every layer's hidden states (its last_hidden_state is the last one)
                net = getattr(self.hf_model, "base_model", None) or self.hf_model
                out = net(input_ids=input_ids, attention_mask=mask, use_cache=False,
                          output_hidden_states=net is self.hf_model)
            finally:
                for h in hooks:
                    h.remove()
                given.forget()
                switch.use_eager(self, fused)
        last = out.last_hidden_state if net is not self.hf_model else out.hidden_states[-1]
        return Capture(last, None, tuple(zs) if head_outputs else None, out,
                       tuple(inputs) if on_input is None else None, mask)

    def recompute(self, capture: Capture, layer: int, heads: list[int] | None = None) -> torch.Tensor:
        """Probabilities (B, len(heads), n, n) of one layer from a lean capture: our MHA's
        projections, RoPE and softmax on that layer's recorded input, with the same causal and
        padding masks. Equal to eager capture within float rounding."""
        heads = list(range(self.num_heads)) if heads is None else list(heads)
        return self._heads_probs(self.projections(capture, layer), heads)

    def each_head(self, capture: Capture, layer: int):
        """Yield (head, probabilities (B, n, n)) of one layer of a lean capture, one head at a
        time, so that no more than one head's n × n matrix need exist (for long inputs)."""
        projections = self.projections(capture, layer)  # once per layer, not per head
        for h in range(self.num_heads):
            yield h, self._heads_probs(projections, [h])[:, 0]

    def _heads_probs(self, projections, heads: list[int]) -> torch.Tensor:
        """Probabilities (B, len(heads), n, n) from `projections`; query head h reads KV head
        h // (H / G)."""
        mha, q, k, v, padding = projections
        kv = [kv_head(h, self.num_heads, self.num_kv_heads) for h in heads]
        with self.lock, torch.inference_mode():
            _, probs = mha.attend(q[:, heads], k[:, kv], v[:, kv], key_padding_mask=padding, is_causal=self.is_causal,
                                  heads=heads)  # (each head's own sink logit, GPT-OSS)
        return probs

    def projections(self, capture: Capture, layer: int):
        """q (B, H, n, d_k), k and v (B, G, n, d) of one layer, RoPE applied, and the padding mask."""
        inp = capture.layer_inputs[layer]
        mha = self.layer_adapter(layer).mha
        with self.lock, torch.inference_mode():
            q, k, v = mha.project_self(inp.hidden, inp.position_embeddings)  # (B, H|G|G, n, d_k|d_k|d_v)
        padding = None if capture.attention_mask is None else capture.attention_mask == 0  # (B, n)
        return mha, q, k, v, padding

    def layer_adapter(self, layer: int) -> Adapter:
        """Our adapter over layer `layer`'s self-attention: the installed one (local attention,
        models built from our MHA), or one built over the original's weights (kept, made once, and
        only for the layers asked for). Its `.mha` computes that layer's attention step by step."""
        module, family = self.attention_modules[layer]
        if self.placement and has_offloaded(module):  # accelerate keeps its weights off the device: a copy for this
            # use only (kept, every offloaded layer's would add up beyond max_memory), under the model's
            # lock (loading them swaps the module's parameters, which another session's forward reads)
            with self.lock:
                return make_adapter(resident_copy(module), family, self.hf_model.config, causal=self.is_causal)
        now = weight_versions.version(module)  # a fused layout's copy of its rows: made again after an edit in place
        if (view := self._views.get(layer)) is None or view[0] != now:
            with self._views_lock:  # built once even when sessions ask at the same moment
                if (view := self._views.get(layer)) is None or view[0] != now:
                    view = (now, make_adapter(module, family, self.hf_model.config, causal=self.is_causal))
                    self._views[layer] = view
        return view[1]

    def forget_views(self) -> None:
        """Drop the adapters `layer_adapter` built (a fused layout's copies of its rows): built again when asked."""
        with self._views_lock:
            self._views = {}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """(last hidden states (B, n, d_model), per-layer probabilities (B, h, n, n), the output object)."""
        return (c := self.capture(input_ids, attention_mask)).hidden, c.attentions, c.output

    def fused_forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **extra):
        """Run the model once with fused attention (PyTorch's SDPA) and record nothing: the baseline
        capture's cost is measured against (benchmarks), a long generation's prompt read (`extra`: more
        arguments of the forward, use_cache=True). Returns its output; the model is eager again after."""
        input_ids = input_ids.to(self.device)
        attention_mask = (torch.ones_like(input_ids) if attention_mask is None else attention_mask).to(self.device)
        with self.lock, torch.inference_mode(), switch.fused(self):
            return self.hf_model(input_ids=input_ids, attention_mask=attention_mask, **{"use_cache": False} | extra)

    @property
    def takes_outputs(self) -> bool:
        """Whether a lean capture's `on_input` may hand each layer its attention output (`reading.given`): the
        model's own attention modules, each computing through transformers' attention interface."""
        return self.can_recompute and not self.local_attention and given.takes_outputs(
            [m for m, _ in self.attention_modules])

    def head_weights(self) -> dict[str, torch.Tensor]:
        """Every head's weights, stacked over layers (x @ W convention, biases left out): W_Q (L, H, d_model, d_k),
        W_K (L, G, d_model, d_k), W_V (L, G, d_model, d_v), W_O (L, H, d_v, d_model); only W_O where our MHA cannot
        compute the layers (`can_recompute`), read off the layer that applies it. Rows are the model's layer numbers:
        a hybrid's other layers hold zeros. Computed once, again after an attention module's weight changes in place
        (`weight_versions`). Raises ModelLoadError when the heads' outputs cannot be read."""
        if not self.attention_modules:
            raise ModelLoadError(
                f"The per-head weights of '{self.name}' ({self.model_type}) cannot be read: {self.unread}")
        now = weight_versions.of(p for m, _ in self.attention_modules for p in m.parameters())
        if self._weights is None or self._weights[0] != now:
            with self.lock:  # computed once where sessions ask at the same moment (the forward's lock: a spread
                if self._weights is None or self._weights[0] != now:  # model's weights are swapped in by it)
                    if self.can_recompute:
                        per_layer = [self.layer_adapter(layer).mha.head_weights()
                                     for layer in range(len(self.attention_modules))]
                    else:  # W_O alone, off each layer's own output projection
                        blocks = [output_blocks(resident_copy(output_projection(m, fam)), self.num_heads)
                                  for m, fam in self.attention_modules]  # Gemma 4's smaller heads: zero rows added
                        per_layer = [{"W_O": padded_heads(b, max(b.shape[1] for b in blocks), dim=1)} for b in blocks]
                    # on the CPU one layer at a time: a spread model's layers live on different devices
                    stacked = {k: torch.stack([w[k].float().cpu() for w in per_layer]) for k in per_layer[0]}
                    if self.layer_numbers:  # a hybrid: each softmax layer's row at its number
                        full = {k: w.new_zeros((self.total_layers, *w.shape[1:])) for k, w in stacked.items()}
                        for k, w in stacked.items():
                            full[k][list(self.layer_numbers)] = w
                        stacked = full
                    self._weights = (now, stacked)
        return self._weights[1]
