"""Activation patching of heads (`docs/attribution.md`, section 3): a clean and a corrupted
text of the same length, the metric m = logit(answer) − logit(wrong) at the last position, and per
head how much swapping its output z between the runs moves m (`patch_heads`, `patch_positions`).
What every patching refuses, and the metric's two ends, are here too, for the first-order
estimate of the same numbers (`mha_viz.interventions.estimate`)."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import torch

from mha_viz.progress import report
from mha_viz.text.encode import encode
from mha_viz.text.tokenize import InputError, count_text, label_ids, tokenize
from mha_viz_models import LoadedModel, UnsupportedArchitecture
from mha_viz_models.families.builtin import output_projection
from mha_viz_models.loading import switch
from mha_viz_models.loading.outputs_run import head_outputs_run
from mha_viz_models.reading.hooks import layer_pre_hooks
from mha_viz_models.reading.readout import keeps_last_logits
from mha_viz_models.reading.stream import block_of

MODES = ("denoise", "noise")


def require_decoder(model: LoadedModel, what: str) -> None:
    """InputError unless `model` is a decoder whose heads' outputs mha-viz reads."""
    if not model.is_causal or model.is_encoder_decoder:
        raise InputError(f"{model.name} is not a decoder: {what} needs a language-model head that predicts the "
                         "next token (an encoder's masked-LM head does not read the residual stream linearly).")
    if not model.has_head_outputs:
        raise InputError(f"The heads' outputs of {model.name} cannot be read by mha-viz: no {what}.")


def token_id(model: LoadedModel, token) -> int:
    """A token id from an id or a string that is exactly one token (" Mary")."""
    if isinstance(token, (int, np.integer)):
        return int(token)
    ids = encode(model.tokenizer, token, add_special_tokens=False)["input_ids"]
    if len(ids) != 1:
        raise InputError(f"{token!r} is {len(ids)} tokens for {model.name}: give a single token.")
    return int(ids[0])


def check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be 'denoise' or 'noise', not {mode!r}")


@dataclass
class Patching:
    """Per head, how much patching its output z moves the metric m = logit(answer) − logit(wrong)
    at the last position: denoising (`restored`: the corrupted run with the head's clean z, as a
    fraction of the gap) or noising (`damage`: the clean run with its corrupted z)."""

    mode: str  # "denoise" | "noise"
    # (layers, heads): restored or damage; (n,) for `patch_positions`; (layers, heads, n) for `estimate_positions`
    values: np.ndarray
    m_clean: float
    m_corrupted: float
    answer: int
    wrong: int
    position: int | None  # the patched position, or None: every position
    estimated: bool = False  # True: the first-order estimate (`mha_viz.interventions.estimate`), not a patched run

    @property
    def restored(self) -> np.ndarray:
        if self.mode != "denoise":
            raise AttributeError("a noising run has .damage, not .restored")
        return self.values

    @property
    def damage(self) -> np.ndarray:
        if self.mode != "noise":
            raise AttributeError("a denoising run has .restored, not .damage")
        return self.values


def logit_difference(logits: torch.Tensor, a: int, b: int) -> torch.Tensor:
    """m = logit(a) − logit(b) at the last position, for each sequence of a batch (B,)."""
    return logits[:, -1, a] - logits[:, -1, b]


_UNSPLIT: weakref.WeakSet = weakref.WeakSet()  # models whose blocks could not be split over copies
# a block's arguments that hold a row a sequence and do not broadcast over the copies: GLM-5's shared layers' picks,
# which the layer scatters into a mask of its batch's size
UNBROADCAST = ("prev_topk_indices",)


def _splitting(batch: int, copies: int):
    """A forward pre-hook (with kwargs) for each decoder block from where the copies start on: every tensor of
    the call that holds one row a sequence (the first block's input, the masks and positions the model hands
    every block) gets each row repeated `copies` times; the stream, already repeated, passes. One sequence
    (`batch` 1; the hook on the first block only): its input only, since the rest broadcast (a long text's mask
    is not copied), and what does not broadcast (UNBROADCAST)."""
    def grow(x):
        if isinstance(x, torch.Tensor) and x.dim() >= 2 and x.shape[0] == batch:
            return x.repeat_interleave(copies, dim=0)
        if isinstance(x, tuple) and x and all(isinstance(t, torch.Tensor) for t in x):  # rotary (cos, sin)
            return tuple(grow(t) for t in x)
        return x

    def hook(_module, args, kwargs):
        stream = args[0] if args else kwargs.get("hidden_states")
        if isinstance(stream, torch.Tensor) and stream.dim() != 3:  # Gemma 3n's AltUp streams (streams, B, n, d):
            raise RuntimeError("the block's input is not one stream a sequence")  # the whole batch of copies runs
        if batch > 1:
            return tuple(grow(a) for a in args), {k: grow(v) for k, v in kwargs.items()}
        kwargs = {k: grow(v) if k in UNBROADCAST else v for k, v in kwargs.items()}
        if args:
            return (grow(args[0]), *args[1:]), kwargs
        if "hidden_states" in kwargs:
            return args, {**kwargs, "hidden_states": grow(kwargs["hidden_states"])}
        return None  # no input found: the copies do not reach the output, and the whole batch runs
    return hook


def swapped_forward(model: LoadedModel, batch: torch.Tensor, layer: int, swap, copies: int = 1, *,
                    last: bool = False) -> torch.Tensor:
    """The logits of one forward of `batch` (B, n) in which layer `layer`'s W_O input, as every head's z
    (B, n, H, d_v), is first handed to swap(z), which changes the copy it is given in place. `last`: the last
    position's logits only, (B, 1, vocab), where the model can make them alone (the LM head over n positions
    and a large vocabulary is a large share of a small model's forward).

    `copies` > 1: the logits of `batch.repeat_interleave(copies, 0)` (B · copies sequences, each sequence's copies
    side by side), with the layers before `layer` run once, on the B sequences: each is repeated at the input of
    the decoder block that holds `layer`, from where the copies differ. Where that cannot be done (a layer shared
    by others, a block outside a list of layers, a family whose blocks take another shape), the whole batch of
    copies runs, and the model is remembered."""
    H = model.num_heads
    modules = [m for m, _ in model.attention_modules]
    blocks = None
    if copies > 1 and model.hf_model not in _UNSPLIT and sum(m is modules[layer] for m in modules) == 1:
        try:
            blocks = [block_of(model.hf_model, m) for m in modules[layer:]]
        except UnsupportedArchitecture:
            _UNSPLIT.add(model.hf_model)
    if copies > 1 and blocks is None:
        batch, copies = batch.repeat_interleave(copies, dim=0), 1

    def hook_for(row: int):
        def swapped(_module, args):
            if row != layer:
                return None
            x = args[0]  # (B, n, H · d_v)
            z = x.reshape(*x.shape[:-1], H, -1).clone()  # (B, n, H, d_v)
            swap(z)
            return (z.reshape(x.shape), *args[1:])
        return swapped
    with model.lock, torch.inference_mode():
        hooks = layer_pre_hooks([output_projection(m, fam) for m, fam in model.attention_modules], hook_for)
        hooks += [b.register_forward_pre_hook(_splitting(batch.shape[0], copies), with_kwargs=True)
                  for b in (blocks or ())[:None if batch.shape[0] > 1 else 1]]
        extra = {"logits_to_keep": 1} if last and keeps_last_logits(model.hf_model) else {}
        try:
            with switch.fused(model):
                logits = model.hf_model(input_ids=batch, attention_mask=torch.ones_like(batch), use_cache=False,
                                        **extra).logits
        except torch.OutOfMemoryError:
            raise
        except (RuntimeError, IndexError):  # IndexError: a block that reads its mask per sequence (Qwen4-Exp's
            if copies == 1:                  # indexer), handed one sequence's for several copies
                raise
            logits = None  # run whole, below, without the hooks of this try
        finally:
            for h in hooks:
                h.remove()
    if copies > 1 and (logits is None or logits.shape[0] != batch.shape[0] * copies):  # not split to the end
        _UNSPLIT.add(model.hf_model)
        return swapped_forward(model, batch.repeat_interleave(copies, dim=0), layer, swap, last=last)
    return logits


def patched_metric(model: LoadedModel, ids: torch.Tensor, layer: int, heads: list[int], source: torch.Tensor,
                   a: int, b: int, position: int | None | list) -> torch.Tensor:
    """One forward of len(heads) copies of `ids`: copy k gets head heads[k]'s slice of layer
    `layer`'s W_O input replaced by that head's z in `source` (H, n, d_v) at `position` (None:
    every position; a list: copy k at position[k]). The m of each copy, (len(heads),)."""
    where = position if isinstance(position, list) else [position] * len(heads)
    where = [slice(None) if p is None else slice(p, p + 1) for p in where]

    def swap(z: torch.Tensor) -> None:
        for k, h in enumerate(heads):
            z[k, where[k], h] = source[h, where[k], :z.shape[-1]].to(z.dtype)  # a smaller head's: its own d_v
    logits = swapped_forward(model, ids, layer, swap, copies=len(heads), last=True)
    return logit_difference(logits.float(), a, b)


@dataclass
class Texts:
    """A clean and a corrupted text checked for patching: their ids (1, n) and the answer and
    wrong token ids asked for (None: each run's prediction, `ends`)."""

    ids_c: torch.Tensor
    ids_x: torch.Tensor
    answer: int | None
    wrong: int | None

    @property
    def n(self) -> int:
        return int(self.ids_c.shape[1])


@dataclass
class Ends:
    """The metric's two ends: the answer and wrong token ids, m on the clean and the corrupted text."""

    a: int
    b: int
    m_clean: float
    m_corr: float

    def moved(self, m: torch.Tensor, mode: str) -> torch.Tensor:
        """The restored fraction (denoise) or the damage (noise) of patched metrics m."""
        return ((m - self.m_corr) if mode == "denoise" else (self.m_clean - m)) / (self.m_clean - self.m_corr)

    def result(self, mode: str, values: np.ndarray, position: int | None, *, estimated: bool = False) -> Patching:
        return Patching(mode, values, self.m_clean, self.m_corr, self.a, self.b, position, estimated)


def texts(model: LoadedModel, clean: str, corrupted: str, answer, wrong, position, max_tokens,
          what: str = "patching") -> Texts:
    """Both texts tokenized, after every refusal that needs no forward (section 3's list):
    encoders, texts cut at the cap or of different lengths, a position outside them, an answer
    or wrong token that is not one token."""
    require_decoder(model, what)
    c, x = tokenize(model, clean, max_tokens), tokenize(model, corrupted, max_tokens)
    for name, t in (("clean", c), ("corrupted", x)):
        if t.truncated:  # patched at the cut, the metric would not be the text's next token
            raise InputError(f"The {name} text has {count_text(t.total, t.total_is_estimate)} tokens, more than "
                             f"the {t.n} allowed here: shorten it (or raise the token limit in the sidebar).")
    if c.n != x.n:
        raise InputError(f"The clean text has {c.n} tokens and the corrupted one {x.n}: {what} compares the same "
                         "positions, so both must have the same number of tokens.")
    if position is not None and not -c.n <= position < c.n:
        raise InputError(f"Position {position} is outside the texts' {c.n} tokens.")
    a = None if answer is None else token_id(model, answer)
    b = None if wrong is None else token_id(model, wrong)
    return Texts(torch.tensor([c.ids], device=model.device), torch.tensor([x.ids], device=model.device), a, b)


class NoGap(InputError):
    """The two texts give the same logit difference: nothing for a head to restore (a task leaves such a pair out)."""


def ends(model: LoadedModel, t: Texts, logits_c: torch.Tensor, logits_x: torch.Tensor) -> Ends:
    """The metric's ends from both runs' logits (1, n, vocab) or (1, 1, vocab): the answer
    defaults to the clean run's prediction, the wrong token to the corrupted run's (its
    runner-up when it predicts the answer too). InputError for equal tokens or equal metrics."""
    a = int(logits_c[0, -1].argmax()) if t.answer is None else t.answer
    b = t.wrong
    if b is None:
        top2 = logits_x[0, -1].topk(2).indices.tolist()
        b = top2[1] if top2[0] == a else top2[0]
    if a == b:
        name = label_ids(model, [a]).display[0]
        raise InputError(f"The answer and the wrong token are both {name!r}: give a different wrong token.")
    m_clean = float(logit_difference(logits_c.float(), a, b)[0])
    m_corr = float(logit_difference(logits_x.float(), a, b)[0])
    if abs(m_clean - m_corr) < 1e-6:
        raise NoGap(f"The two texts give the same logit difference ({m_clean:.4g}) between the answer and the "
                         "wrong token: there is nothing for a head to restore.")
    return Ends(a, b, m_clean, m_corr)


def _captured(model: LoadedModel, clean: str, corrupted: str, answer, wrong, position, max_tokens):
    """(texts, both captures, the ends): both texts run once, after every refusal."""
    t = texts(model, clean, corrupted, answer, wrong, position, max_tokens)
    cap_c, cap_x = head_outputs_run(model, t.ids_c), head_outputs_run(model, t.ids_x)  # z and logits, fused
    return t, cap_c, cap_x, ends(model, t, cap_c.output.logits, cap_x.output.logits)


def measured_ends(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, *,
                  max_tokens: int | None = None) -> Ends:
    """The metric's ends (`ends`) from one run of each text, after every refusal of `patch_heads`."""
    return _captured(model, clean, corrupted, answer, wrong, None, max_tokens)[3]


def patch_heads(model: LoadedModel, clean: str, corrupted: str, answer=None, wrong=None, mode: str = "denoise",
                position: int | None = None, *, max_tokens: int | None = None, progress=None) -> Patching:
    """Activation patching of every head's output (`docs/attribution.md`, section 3).
    The heads of one layer are patched in one batched forward (one sequence per head), so a
    model costs L forwards of H sequences, not L·H forwards. Raises InputError (nothing run) for
    texts of different token counts, an answer or wrong token that is not one token, equal
    metrics on both texts, and encoders. answer and wrong default to each text's prediction (wrong:
    the corrupted text's runner-up when it predicts the answer too). progress(fraction, message): after
    each layer (a callback that raises stops the work)."""
    check_mode(mode)
    t, cap_c, cap_x, e = _captured(model, clean, corrupted, answer, wrong, position, max_tokens)
    pos = None if position is None else position % t.n
    base, run_ids = (cap_c, t.ids_x) if mode == "denoise" else (cap_x, t.ids_c)
    heads = list(range(model.num_heads))
    out = np.zeros((model.num_layers, model.num_heads), dtype=np.float32)
    for layer in range(model.num_layers):
        source = base.head_outputs[layer][0]  # (H, n, d_v): every head's z in the other run
        m = patched_metric(model, run_ids, layer, heads, source, e.a, e.b, pos)  # (H,)
        out[layer] = e.moved(m, mode).cpu().numpy()
        report(progress, (layer + 1) / model.num_layers, f"Patched layer {layer + 1} of {model.num_layers}")
    return e.result(mode, out, pos)


def patch_positions(model: LoadedModel, clean: str, corrupted: str, layer: int, head: int, answer=None, wrong=None,
                    mode: str = "denoise", *, max_tokens: int | None = None) -> Patching:
    """One head patched at one position at a time: `.values` (n,), the restored fraction (or the
    damage) of patching head (layer, head)'s z at position i only, all n positions in one batched
    forward. The refusals of `patch_heads`."""
    check_mode(mode)
    if not (0 <= layer < model.num_layers and 0 <= head < model.num_heads):
        raise InputError(f"{model.name} has no layer {layer}, head {head}.")
    t, cap_c, cap_x, e = _captured(model, clean, corrupted, answer, wrong, None, max_tokens)
    base, run_ids = (cap_c, t.ids_x) if mode == "denoise" else (cap_x, t.ids_c)
    n, chunk = t.n, model.num_heads  # batches no larger than patch_heads' (its memory budget)
    m = torch.cat([patched_metric(model, run_ids, layer, [head] * len(part), base.head_outputs[layer][0], e.a, e.b,
                                  part) for part in (list(range(i, min(i + chunk, n))) for i in range(0, n, chunk))])
    return e.result(mode, e.moved(m, mode).cpu().numpy().astype(np.float32), None)
