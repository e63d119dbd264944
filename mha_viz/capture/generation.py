"""Watch attention while the model writes: generation step by step, captured incrementally.

`generate(model, prompt, ...)` runs a decoder token by token with its KV cache: the prompt once,
then one new position a step. With a KV cache a step's attention is one query row per head
(1 × n), which is what the model computes anyway, so every head's row is recorded as it is made
and written into one (layers, heads, n, n) array; earlier rows never change in a causal model.
The result equals one eager forward over the final sequence (tests/models/test_generation.py).
A model without a KV cache (toy-induction) reruns the whole sequence each step: it is 64 tokens
at most. A sliding-window layer (Mistral, Gemma 2, Phi-3) caches only the last keys of its window:
its row has zeros where the window hides earlier keys, as in one eager forward.

A **long generation** (the final sequence's every-head array past MHA_VIZ_DENSE_MB or the capture budget,
`goes_long`, or dense=False) never holds n × n of every head: the prompt but its last token is read with
fused attention (`LoadedModel.fused_forward`, keeping the KV cache, recording nothing), then each
position's rows, from the last prompt token's on, are recorded one (H, n) row a layer as the cache
computes them and kept ragged (`grown_rows.Recorded`). Once it ends, one scan of the final sequence
(`long_run`, what `mha_viz.generate` passes: `mha_viz.scan.long_run`) gives the run its summary
(head table, thumbnails, kept keys) and the earlier rows; its rows of the new tokens equal the recorded
ones within float rounding (tests/models/test_generation_long.py). The scan costs about 1.8 fused forwards
of the final sequence (docs/speed.md). A snapshot streamed to `on_step` reads its earlier rows from a scan
of the prompt, made only if something asks for them (a generation stopped from the app).

Greedy decoding (temperature 0) picks the same tokens as Hugging Face's
`generate(do_sample=False)`; sampling (temperature, top-k, top-p) is reproducible under `seed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from mha_viz.budget import capture_budget
from mha_viz.capture.finite import FiniteCheck, NotFiniteError, message
from mha_viz.capture.grown_rows import Earlier, GrownRows, Recorded, recorded_bytes
from mha_viz.capture.head_rows import held_densely
from mha_viz.capture.run import AttentionRun
from mha_viz.progress import Progress
from mha_viz.text.loss_inputs import NEXT_TOKEN, loss_kind
from mha_viz.text.tokenize import InputError, Tokens, count_text, label_ids, token_limit, tokenize
from mha_viz_models import LoadedModel, as_probabilities
from mha_viz_models.attention.memory import memory_layouts
from mha_viz_models.loading import effective_run
from mha_viz_models.reading.readout import keeps_last_logits

# the long run of a tokenized sequence, `(model, tokens, text, progress=) -> AttentionRun`: mha_viz.scan's
LongRun = Callable[..., AttentionRun]

TOP = 10  # alternatives kept per step


class GenerationError(InputError):
    """Generation cannot start or go on; the message is written for the person who asked."""


class NotFiniteGeneration(GenerationError, NotFiniteError):
    """Generation met NaN or infinity in the attention or the scores (`mha_viz.capture.finite`)."""


@dataclass
class GenerationStep:
    """One generated token: what was picked, how likely the model found it, what else it considered."""

    token: str  # display form
    token_id: int
    prob: float  # the model's probability of this token (softmax of its logits, before sampling)
    top: list[tuple[str, float]]  # the TOP most likely tokens and their probabilities
    entropy: float  # of the model's distribution over the next token, in nats


@dataclass
class Generation:
    """A prompt and its continuation, with every head's attention over the whole sequence.

    run: causal AttentionRun over prompt + generated tokens, dense or long (`run.is_dense`; read it with
    `run.rows`, `layer_rows`, `column`: they work on both). The row that chose step t's token is
    query position `num_prompt_tokens - 1 + t` (`row_of(t)`). Every token has its own row, the
    newest one's too (also in the snapshots `on_step` receives).
    """

    run: AttentionRun
    num_prompt_tokens: int
    steps: list[GenerationStep] = field(default_factory=list)
    text: str = ""  # the continuation, decoded
    full_text: str = ""  # prompt and continuation, decoded from the token ids
    stopped_by: str = "length"  # "eos" | "length" (max_new_tokens reached) | "stopped" (by on_step)

    @property
    def new_tokens(self) -> list[str]:
        return [s.token for s in self.steps]

    def row_of(self, step: int) -> int:
        """The query position whose attention chose step `step`'s token."""
        return self.num_prompt_tokens - 1 + step


def check_decoder(model: LoadedModel) -> None:
    """GenerationError unless the model is a decoder with a language-model head."""
    if model.is_encoder_decoder:
        raise GenerationError(f"{model.name} is an encoder–decoder: leave the sidebar's Target text empty and it "
                              "writes its target from the sentence (greedy), shown as its Decoder and Cross "
                              "attention.")
    if not model.is_causal or loss_kind(model) != NEXT_TOKEN:
        raise GenerationError(f"{model.name} cannot write text: generation needs a decoder with a "
                              "language-model head, such as the bundled smollm2 or toy-induction.")
    if memory_layouts(getattr(model.hf_model, "config", None)):  # a step's keys: its window's cache and entries
        raise GenerationError(f"{model.name} has compressed memory layers (DeepSeek-V4): step by step, each new "
                              "token's row runs over its sliding window's cache and the memory entries, which "
                              "mha-viz does not place on the text yet. Its attention on a whole text is shown on "
                              "every other page.")


def goes_long(model: LoadedModel, size: int) -> bool:
    """Whether a generation ending at `size` tokens is long (keeps the new tokens' rows): its every-head array past
    MHA_VIZ_DENSE_MB (`head_rows.held_densely`) or past the capture budget, where only the rows can fit."""
    return not model.effective and (not held_densely(model.num_layers, model.num_heads, size)
                                    or not capture_budget.fits(model.attention_bytes(size)))


def need_bytes(model: LoadedModel, n_prompt: int, max_new: int, long: bool | None = None) -> int:
    """The bytes of attention a generation of `max_new` tokens after an `n_prompt`-token prompt holds against the
    capture budget: every head's rows of the new tokens (a long generation), or every head's whole array.
    long: None as `generate` decides (`goes_long` of the final length)."""
    size = n_prompt + max_new
    if long is None:
        long = goes_long(model, size)
    if long:
        return recorded_bytes(model.num_layers, model.num_heads, n_prompt, max_new)
    return model.attention_bytes(size)  # float32 (L, H, n, n)


def check_limits(model: LoadedModel, prompt: Tokens, max_new: int, limit: int, long: bool | None = None) -> None:
    """GenerationError, before anything runs, when `max_new` tokens after `prompt` would pass the token `limit` or
    the capture budget (`need_bytes`); the message says what would fit. long as in `need_bytes`."""
    n_prompt = prompt.n
    if prompt.total > limit:
        raise GenerationError(f"The prompt has {count_text(prompt.total, prompt.total_is_estimate)} tokens, more "
                              f"than the limit of {limit} for {model.name} here: shorten it (or raise the token "
                              "limit in the sidebar).")
    if n_prompt >= limit:
        raise GenerationError(f"The prompt already fills the limit of {limit} tokens: there is no room to "
                              "generate. Shorten it, or raise the token limit in the sidebar.")
    if max_new < 1:
        raise GenerationError("Ask for at least one new token.")
    if n_prompt + max_new > limit:
        raise GenerationError(f"At most {limit - n_prompt} new tokens fit after this {n_prompt}-token prompt "
                              f"(the limit is {limit} tokens): lower the number of new tokens.")
    if long is None:
        long = goes_long(model, n_prompt + max_new)
    need = need_bytes(model, n_prompt, max_new, long)
    if capture_budget.fits(need):
        return
    fits = capture_budget.longest(lambda k: need_bytes(model, n_prompt, k, long), top=max_new)
    if fits:
        advice = f"ask for at most {fits:,} new tokens."
    else:  # not even one: the prompt that one would fit after
        shorter = capture_budget.longest(lambda n: need_bytes(model, n, 1, long), top=n_prompt)
        advice = f"shorten the prompt to {shorter:,} tokens or fewer."
    kept = "Keeping every head's row of" if long else "Capturing every head over"
    capture_budget.check(need, f"{kept} {max_new} new tokens after a {n_prompt:,}-token prompt", advice,
                         error=GenerationError)


def _pick(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, rng: torch.Generator) -> int:
    """Greedy (temperature <= 0) or a sample from the tempered, top-k and top-p filtered distribution."""
    if temperature <= 0:
        return int(torch.argmax(logits))
    scores = logits / temperature
    if 0 < top_k < scores.numel():
        kth = torch.topk(scores, top_k).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if top_p < 1.0:
        order = torch.argsort(scores, descending=True)
        cumulative = torch.softmax(scores[order], dim=-1).cumsum(-1)
        drop = cumulative - torch.softmax(scores[order], dim=-1) >= top_p  # keep the smallest set reaching p
        scores[order[drop]] = float("-inf")
    return int(torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=rng))


def _display(model: LoadedModel, ids: list[int]) -> tuple[list[str], list[int], list[str], list[bool]]:
    t = label_ids(model, ids)
    return t.display, t.word_ids, t.raw, t.special


def _eos_ids(model: LoadedModel) -> set[int]:
    ids = {model.tokenizer.eos_token_id}
    configured = getattr(getattr(model.hf_model, "generation_config", None), "eos_token_id", None)
    ids |= set(configured) if isinstance(configured, (list, tuple)) else {configured}
    return {int(i) for i in ids if i is not None}


class _Rows:
    """Every layer's attention probabilities of one forward call, recorded as the model makes them."""

    def __init__(self, model: LoadedModel) -> None:
        self.model, self.probs = model, []
        self.hooks = [a.register_forward_hook(lambda _m, _i, out: self.probs.append(out[1]))
                      for a in model.adapters] if model.local_attention else []

    def __call__(self, ids: torch.Tensor, cache=None, last: bool = False):
        """(logits of the last position (vocab,), per-layer probabilities (1, H, n_new, n), cache); `last`: the last
        row alone will be read (a model of effective layers alone makes no other where it can: Mamba-2)."""
        self.probs = []
        if self.model.effective:  # state-space layers alone (`loading.effective_only`): the whole sequence, no cache
            return (*effective_run.sequence_rows(self.model, ids, last), None)
        out = self.model.hf_model(input_ids=ids, past_key_values=cache, use_cache=True,
                                  output_attentions=not self.model.local_attention)
        probs = self.probs if self.model.local_attention else list(out.attentions or ())
        if len(probs) != self.model.num_layers or any(p is None for p in probs):
            raise GenerationError(f"{self.model.name} did not return the attention of its layers while "
                                  "generating; it cannot be watched step by step.")
        return out.logits[0, -1].float(), probs, getattr(out, "past_key_values", None)

    def close(self) -> None:
        for h in self.hooks:
            h.remove()


def _write_row(row: np.ndarray, probs: torch.Tensor, name: str) -> None:
    """Write one new token's attention (H, m) over the keys the model attended to into `row`
    (H, n). A sliding-window layer's cache holds only the last m < n keys: they are the last m
    positions, and the keys it no longer holds get 0, which is what the model computed."""
    m, n = probs.shape[-1], row.shape[-1]
    if m > n:
        raise GenerationError(f"{name} attended to {m} keys at position {n - 1}, more than the {n} tokens "
                              "written so far; its attention cannot be recorded step by step.")
    row[:, : n - m] = 0.0
    row[:, n - m:] = as_probabilities(probs).cpu().numpy()  # half precision: float32 rows summing to 1


def _read_prompt(model: LoadedModel, ids: list[int], progress: Progress | None = None):
    """The KV cache of `ids` from one forward with fused attention, no probabilities recorded (None when
    there is nothing to read or the model keeps no cache). `progress(0, message)` after each attention layer:
    a long prompt's one forward takes minutes on a CPU."""
    if not ids:
        return None
    extra = {"logits_to_keep": 1} if keeps_last_logits(model.hf_model) else {}  # not n × vocab logits
    layers = [m for m, _ in model.attention_modules] if progress is not None else []
    read = [0]

    def layer_read(*_args) -> None:
        read[0] += 1
        progress(0.0, f"Reading the prompt's {len(ids):,} tokens: layer {read[0]} of {len(layers)}")

    hooks = [m.register_forward_hook(layer_read) for m in layers]
    try:
        out = model.fused_forward(torch.tensor([ids]), use_cache=True, **extra)
    finally:
        for hook in hooks:
            hook.remove()
    return getattr(out, "past_key_values", None)


def _long_run(model: LoadedModel, ids: list[int], text: str, build: LongRun, progress=None) -> AttentionRun:
    """A long run of `ids` by `build` (`scan.long_run`), without the model's own outputs: no page reads a
    generation's (its text is not the run's), and at 8,192 tokens they cost seconds."""
    return build(model, label_ids(model, ids), text, progress=progress, keep_own=False)


@dataclass(frozen=True)
class Prepared:
    """A generation read and checked before it runs (`prepare`): its prompt's tokens, the new tokens asked for, and
    whether it is long (keeps the new tokens' rows, `goes_long`)."""

    tokens: Tokens
    max_new: int
    long: bool


def prepare(model: LoadedModel, prompt: str, max_new_tokens: int = 32, *, max_tokens: int | None = None,
            dense: bool | None = None) -> Prepared:
    """The prompt read once and the generation checked (`check_decoder`, `check_limits`), before anything runs:
    raises GenerationError saying what would fit. dense as in `generate`."""
    check_decoder(model)
    toks = tokenize(model, prompt, max_tokens)
    long = (not dense) if dense is not None else goes_long(model, toks.n + int(max_new_tokens))
    check_limits(model, toks, int(max_new_tokens), token_limit(model, max_tokens), long)
    return Prepared(toks, int(max_new_tokens), long)


def generate(model: LoadedModel, prompt: str, max_new_tokens: int = 32, *, temperature: float = 0.0,
             top_k: int = 50, top_p: float = 1.0, seed: int = 0, stop_at_eos: bool = True,
             max_tokens: int | None = None, progress: Progress | None = None,
             on_step: Callable[[Generation], bool | None] | None = None, dense: bool | None = None,
             long_run: LongRun | None = None, views: bool = True, prepared: Prepared | None = None) -> Generation:
    """Continue `prompt` by up to `max_new_tokens` tokens, recording every head's attention.

    The prompt and the new tokens together stay within `token_limit(model, max_tokens)` (the
    session's cap, the model's positions) and the memory budget; raises GenerationError (an
    InputError) with a message for the user otherwise, for an encoder, and for attention or logits that are
    not finite (NotFiniteGeneration, also a NotFiniteError: the message names the precision and what to do).
    `on_step(generation so far)` is called after each token; returning False stops there
    (`stopped_by == "stopped"`). `progress(fraction, message)` likewise.
    dense: hold every head's (L, H, n, n) array (True) or make a long generation (False, see above);
    None: as `goes_long` decides of the final length. long_run: what makes a
    long generation's run (`mha_viz.generate` passes the scan's); needed for a long generation. views: a long
    generation ends with one scan of the whole sequence (the run's summary, for the views); False: its run
    reads the recorded rows and, only when asked for one, scans the prompt for the rows before them.
    prepared: the prompt already read and checked (`prepare`, with the same arguments): not read again.
    """
    prepared = prepared or prepare(model, prompt, max_new_tokens, max_tokens=max_tokens, dense=dense)
    toks, long, max_new_tokens = prepared.tokens, prepared.long, prepared.max_new
    L, H = model.num_layers, model.num_heads
    if long and long_run is None:
        raise ValueError("a long generation needs long_run= (mha_viz.generate passes mha_viz.scan's)")
    progress = progress or (lambda _f, _m: None)
    n_prompt, size = toks.n, toks.n + int(max_new_tokens)
    attn = None if long else np.zeros((L, H, size, size), dtype=np.float32)
    recorded = Recorded(n_prompt - 1)  # a long generation's rows
    ids = list(toks.ids)
    earlier = Earlier(lambda: _long_run(model, ids[:n_prompt - 1], "", long_run).source)  # rows before
    steps: list[GenerationStep] = []
    rng = torch.Generator().manual_seed(int(seed))
    eos = _eos_ids(model) if stop_at_eos else set()
    stopped_by = "length"

    def snapshot(n: int, run: AttentionRun | None = None) -> Generation:
        display, word_ids, raw, special = _display(model, ids[:n])
        if run is None:
            held = (dict(attentions=attn[:, :, :n, :n]) if attn is not None
                    else dict(source=GrownRows(recorded, n, earlier), shape=(L, H)))
            run = AttentionRun(tokens=display, **held, is_causal=True, num_kv_heads=model.num_kv_heads,
                               model_name=model.name, token_ids=ids[:n], raw_tokens=raw, special_mask=special,
                               word_ids=word_ids, num_input_tokens=n, precision=model.precision,
                               layer_ids=model.layer_ids, model_layers=model.total_layers,
                               layer_kv_heads=model.layer_kv_heads)
        new = ids[n_prompt:n]
        text = model.tokenizer.decode(new, skip_special_tokens=True)
        full = model.tokenizer.decode(ids[:n], skip_special_tokens=True)
        run.text = full
        return Generation(run, n_prompt, list(steps), text, full, stopped_by)

    def record(n: int, probs) -> None:
        """Every layer's row of position n − 1, the last of each forward's probabilities."""
        row = np.zeros((L, H, n), np.float32) if long else None
        for layer, p in enumerate(probs):
            _write_row(row[layer] if long else attn[layer, :, n - 1, :n],
                       check.see(p[0, :, -1], f"attention in layer {layer}"), model.name)
        check.verify()
        if long:
            recorded.add(row)

    rows = _Rows(model)
    check = FiniteCheck(model, NotFiniteGeneration)  # each forward's attention, as it is made
    try:
        with model.lock, torch.inference_mode():
            dev = model.device
            if long:  # the prompt but its last token without probabilities; the last one's row through the cache
                cache = _read_prompt(model, ids[:-1], progress)
                logits, probs, cache = rows(torch.tensor([ids[-1:] if cache is not None else ids], device=dev), cache)
                record(n_prompt, probs)
            else:
                logits, probs, cache = rows(torch.tensor([ids], device=dev))
                for layer, p in enumerate(probs):  # the prompt's rows
                    prompt_rows = check.see(as_probabilities(p[0]), f"attention in layer {layer}")
                    attn[layer, :, :n_prompt, :n_prompt] = prompt_rows.cpu().numpy()
                check.verify()
            progress(0.0, f"Prompt read: {n_prompt} tokens")
            for t in range(int(max_new_tokens)):
                if not torch.isfinite(logits).all():
                    raise NotFiniteGeneration(message(model, f"scores for new token {t + 1}") + " Generation "
                                              "stopped there.")
                dist = torch.softmax(logits, dim=-1)
                token_id = _pick(logits, temperature, top_k, top_p, rng)
                top_p_, top_i = dist.topk(TOP)
                top_names = _display(model, [int(i) for i in top_i])[0]
                steps.append(GenerationStep(token=_display(model, [token_id])[0][0], token_id=token_id,
                                  prob=float(dist[token_id]), top=list(zip(top_names, map(float, top_p_))),
                                  entropy=float(-(dist * torch.log(dist.clamp_min(1e-30))).sum())))
                ids.append(token_id)
                n = len(ids)
                # the new token's own row (and the logits for the next one): one position through the cache
                if cache is not None:
                    logits, probs, cache = rows(torch.tensor([[token_id]], device=dev), cache)
                else:  # no KV cache (toy-induction): the whole sequence again, its last row kept
                    logits, probs, _ = rows(torch.tensor([ids], device=dev), last=True)
                record(n, probs)
                if token_id in eos:
                    stopped_by = "eos"
                progress((t + 1) / max_new_tokens, f"{t + 1} of {max_new_tokens} new tokens")
                if on_step is not None and on_step(snapshot(n)) is False:
                    stopped_by = "stopped"
                if stopped_by in ("eos", "stopped"):
                    break
    finally:
        rows.close()
    if not long:
        gen = snapshot(len(ids))
        gen.run.attentions = np.ascontiguousarray(gen.run.attentions)
        return gen
    if not views:
        return snapshot(len(ids))
    # one scan of the final sequence: the summary and the rows before the recorded ones
    whole = _long_run(model, ids, "", long_run, lambda f, m: progress(f, f"Every head over the {len(ids)} "
                                                                          f"tokens, for the views: {m}"))
    whole.source = GrownRows(recorded, len(ids), lambda scanned=whole.source: scanned)
    return snapshot(len(ids), whole)
