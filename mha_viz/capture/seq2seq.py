"""Encoder–decoders (T5, BART, Marian, mBART, Pegasus): a source text and a target text, and the
three attentions that connect them (the one entry point for every model, `analyze`, is
`mha_viz.analyze_text`).

`analyze_seq2seq(model, source, target)` (what `mha_viz.analyze` does for these models) runs the
model once and returns an `EncoderDecoderRun`:
- `.encoder`: an `AttentionRun` of the encoder's self-attention over the source tokens;
- `.decoder`: a causal `AttentionRun` of the decoder's self-attention over the target tokens
  (the decoder's input: its start token, then the target);
- `.cross`: a `CrossAttention`, (decoder layers, heads, n_target, n_source): each target token
  (query) over the source tokens (keys).

With no target, the model writes one: greedy, at most `max_new_tokens` (32 by default), within
the token cap.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from mha_viz.budget import capture_budget
from mha_viz.capture.finite import FiniteCheck
from mha_viz.capture.generation import TOP, GenerationStep
from mha_viz.capture.run import AttentionRun, HeadArray
from mha_viz.capture.transfer import to_host
from mha_viz.text.encode import encode
from mha_viz.text.tokenize import InputError, Tokens, label_ids, token_limit, tokenize
from mha_viz_models import LoadedModel, as_probabilities

MAX_NEW_TOKENS = 32  # a written target's length, by default


@dataclass
class CrossAttention(HeadArray):
    """Every decoder head's attention from the target tokens (queries, rows) to the source tokens
    (keys, columns): float32 (layers, heads, n_target, n_source), rows summing to 1."""

    attentions: np.ndarray
    query_tokens: list[str]  # the target side, as shown
    key_tokens: list[str]  # the source side
    query_token_ids: list[int] = field(default_factory=list)
    key_token_ids: list[int] = field(default_factory=list)
    query_raw: list[str] = field(default_factory=list)
    key_raw: list[str] = field(default_factory=list)
    query_special: list[bool] = field(default_factory=list)
    key_special: list[bool] = field(default_factory=list)
    model_name: str = "array"
    precision: str = ""  # what the model computed in (see AttentionRun.precision)

    def __post_init__(self) -> None:
        L, H, n_q, n_k = self.attentions.shape
        if (n_q, n_k) != (len(self.query_tokens), len(self.key_tokens)):
            raise ValueError(f"{len(self.query_tokens)} query and {len(self.key_tokens)} key tokens for "
                             f"cross-attention of shape {self.attentions.shape}")
        self.query_raw = self.query_raw or list(self.query_tokens)
        self.key_raw = self.key_raw or list(self.key_tokens)
        self.query_special = self.query_special or [False] * n_q
        self.key_special = self.key_special or [False] * n_k

    is_causal = False  # target queries see every source key

    @property
    def layer_ids(self) -> list[int]:
        """The decoder's layer number of each row (every layer is captured)."""
        return list(range(self.num_layers))

    @property
    def n_queries(self) -> int:
        return len(self.query_tokens)

    @property
    def n_keys(self) -> int:
        return len(self.key_tokens)


@dataclass
class EncoderDecoderRun:
    """The three attentions of one source and target through an encoder–decoder."""

    encoder: AttentionRun
    decoder: AttentionRun
    cross: CrossAttention
    source: str
    target: str  # as typed, or as the model wrote it (decoded)
    written: bool  # whether the model wrote the target (greedy)
    model_name: str = "array"
    # steps[t]: the decoder's prediction of target token t + 1 from decoder row t (what it wrote,
    # or for a typed target what it gave the typed token), as the Generate page's steps
    steps: list[GenerationStep] = field(default_factory=list)

    @property
    def parts(self) -> dict[str, AttentionRun | CrossAttention]:
        return {"encoder": self.encoder, "decoder": self.decoder, "cross": self.cross}


def _run(tokens: Tokens, attentions: np.ndarray, model: LoadedModel, *, causal: bool, text: str,
         heads_kv: int) -> AttentionRun:
    return AttentionRun(
        tokens=tokens.display, attentions=attentions, is_causal=causal, num_kv_heads=heads_kv,
        model_name=model.name, token_ids=tokens.ids, raw_tokens=tokens.raw, special_mask=tokens.special,
        word_ids=tokens.word_ids, text=text, num_input_tokens=tokens.total,
        num_input_tokens_is_estimate=tokens.total_is_estimate, precision=model.precision)


def _target_ids(model: LoadedModel, target: str, limit: int) -> tuple[list[int], int]:
    """The decoder's input for a typed target: its start token, then the target's tokens (as the
    tokenizer writes a target: `text_target`), cut to `limit` in all; and the uncut length."""
    tok = model.tokenizer
    try:
        ids = encode(tok, None, text_target=target, add_special_tokens=True)["input_ids"]
    except (TypeError, ValueError):  # a tokenizer without a target side
        ids = encode(tok, target, add_special_tokens=True)["input_ids"]
    ids = [model.decoder_start()] + [int(i) for i in ids]
    return ids[:limit], len(ids)


def analyze_seq2seq(model: LoadedModel, source: str, target: str | None = None, *,
                    max_tokens: int | None = None, max_new_tokens: int = MAX_NEW_TOKENS) -> EncoderDecoderRun:
    """Run `source` (and `target`, or the model's greedy output) through an encoder–decoder and
    capture its encoder, decoder and cross-attention. Both sides stay within the token cap
    (`token_limit`); raises InputError for a blank source or target, or a model that is not an
    encoder–decoder."""
    if not model.is_encoder_decoder:
        raise InputError(f"{model.name} is not an encoder–decoder: a target text is for models such as T5, "
                         "BART or Marian.")
    src = tokenize(model, source, max_tokens)
    limit = token_limit(model, max_tokens)
    written = target is None
    if written:
        ids = model.greedy_target(torch.tensor([src.ids]), max(1, min(int(max_new_tokens), limit - 1)))
        total = len(ids)
    else:
        if not target.strip():
            raise InputError("Type a target text, or leave it out and let the model write one.")
        ids, total = _target_ids(model, target, limit)
    tgt = label_ids(model, ids, total=total)
    capture_budget.check(capture_bytes(model, src.n, tgt.n),
                         f"Every attention of {model.name} over {src.n} source and {tgt.n} target tokens",
                         "shorten the texts or lower the token limit.")
    text = model.tokenizer.decode(tgt.ids, skip_special_tokens=True) if written else target
    return _capture(model, src, tgt, source, text, written)


def capture_bytes(model: LoadedModel, n_source: int, n_target: int) -> int:
    """Bytes of float32 probabilities one encoder–decoder capture holds: the encoder's
    L·H·n_s², the decoder's L_d·H_d·n_t² and the cross-attention's L_d·H_d·n_t·n_s."""
    enc = model.num_layers * model.num_heads * n_source * n_source
    dec = model.decoder_layers * model.decoder_heads * n_target * (n_target + n_source)
    return 4 * (enc + dec)


def same_tokens(model: LoadedModel, res: EncoderDecoderRun) -> EncoderDecoderRun:
    """`res`'s source and target token ids through another encoder–decoder of the same tokenizer
    (a random-init baseline): the same tokens on every axis."""
    src = label_ids(model, res.encoder.token_ids, total=res.encoder.num_input_tokens,
                    total_is_estimate=res.encoder.num_input_tokens_is_estimate)
    tgt = label_ids(model, res.decoder.token_ids, total=res.decoder.num_input_tokens)
    return _capture(model, src, tgt, res.source, res.target, res.written)


def _capture(model: LoadedModel, src: Tokens, tgt: Tokens, source: str, text: str, written: bool) -> EncoderDecoderRun:
    cap = model.capture_seq2seq(torch.tensor([src.ids]), torch.tensor([tgt.ids]))
    check = FiniteCheck(model)  # one sum a layer (and the scores), on the device

    def stack(layers, part: str) -> np.ndarray:  # half precision: float32 rows summing to 1
        return to_host(check.see(as_probabilities(a[0]), f"{part} attention in layer {i}")
                       for i, a in enumerate(layers))
    encoder = _run(src, stack(cap.encoder, "encoder"), model, causal=False, text=source, heads_kv=model.num_heads)
    decoder = _run(tgt, stack(cap.decoder, "decoder"), model, causal=True, text=text, heads_kv=model.decoder_heads)
    crossed = stack(cap.cross, "cross")
    check.see(cap.output.logits, "decoder's scores for the target tokens", probabilities=False)
    check.verify()
    steps = _steps(model, cap.output.logits[0], tgt)
    cross = CrossAttention(
        crossed, query_tokens=tgt.display, key_tokens=src.display, query_token_ids=tgt.ids,
        key_token_ids=src.ids, query_raw=tgt.raw, key_raw=src.raw, query_special=tgt.special,
        key_special=src.special, model_name=model.name, precision=model.precision)
    return EncoderDecoderRun(encoder, decoder, cross, source=source, target=text, written=written,
                             model_name=model.name, steps=steps)


def _steps(model: LoadedModel, logits: torch.Tensor, tgt: Tokens) -> list[GenerationStep]:
    """Each target token after the start, with the probability the decoder gave it at the row
    before, its TOP alternatives and the entropy of that distribution."""
    dist = torch.softmax(logits.float(), dim=-1)  # (n_tgt, vocab)
    out = []
    for t in range(1, len(tgt.ids)):
        d, token_id = dist[t - 1], tgt.ids[t]
        top_p, top_i = d.topk(min(TOP, d.numel()))
        names = label_ids(model, [int(i) for i in top_i]).display
        out.append(GenerationStep(token=tgt.display[t], token_id=token_id, prob=float(d[token_id]),
                        top=list(zip(names, map(float, top_p))),
                        entropy=float(-(d * torch.log(d.clamp_min(1e-30))).sum())))
    return out
