"""How much each head's weights compose with every later head's (Q-, K- and V-composition) and copy their input
tokens (copying), after Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from mha_viz import settings
from mha_viz.circuits import kept
from mha_viz.circuits.folded import F64, folded_layers, read_through
from mha_viz.progress import Cancelled, Progress, report
from mha_viz.text.tokenize import InputError
from mha_viz_models import LoadedModel
from mha_viz_models.errors import UnsupportedArchitecture
from mha_viz_models.loading import weight_versions
from mha_viz_models.output_head import output_head
from mha_viz_models.reading import readout
from mha_viz_models.reading.stream import layout

KINDS = ("q", "k", "v")
BLOCK = 2**25  # elements of one block of the pairwise product (256 MB in float64)


def _r(m: torch.Tensor) -> torch.Tensor:
    """R of m = U R (m (..., d, r), U orthonormal): ‖x mᵀ‖_F = ‖x Rᵀ‖_F for any x (..., r, d)."""
    return torch.linalg.qr(m, mode="r").R  # (..., r, r)


def _factors(w: dict[str, torch.Tensor]) -> dict[str, tuple]:
    """One layer's small factors: with W_OV = W_V W_O and W_QK = W_Q W_Kᵀ, each divided by the head's
    own ‖W_OV‖_F or ‖W_QK‖_F (NaN for a head whose matrix is 0), ‖W_OV Y‖ = ‖left Y‖ (left (H, d_v, d))
    and, for kind "q", "k", "v", ‖X W_QK‖, ‖X W_QKᵀ‖, ‖X W_OV‖ = ‖X base[kv] post‖: base (B, d, r), one
    per query head (B = H) or per K/V head (B = G), kv (H,) the base of each query head, post (H, r, r)."""
    h, g = len(w["W_Q"]), len(w["W_K"])
    kv = torch.arange(h) // (h // g)  # query head h reads K/V head h // (H / G)
    q, k, v, o = w["W_Q"], w["W_K"], w["W_V"], w["W_O"]  # (H, d, d_k), (G, d, d_k), (G, d, d_v), (H, d_v, d)
    r_q, r_k, r_v, r_o = _r(q), _r(k)[kv], _r(v)[kv], _r(o.transpose(1, 2))  # (H, r, r), r = d_k | d_k | d_v | d_v
    ov = torch.linalg.matrix_norm(r_v @ r_o.transpose(1, 2))  # (H,) ‖W_V W_O‖_F
    qk = torch.linalg.matrix_norm(r_q @ r_k.transpose(1, 2))  # (H,) ‖W_Q W_Kᵀ‖_F
    ov, qk = ov.where(ov > 0, torch.nan)[:, None, None], qk.where(qk > 0, torch.nan)[:, None, None]
    return {"left": r_v @ o / ov,
            "q": (q @ r_k.transpose(1, 2) / qk, torch.arange(h), None),
            "k": (k, kv, r_q.transpose(1, 2) / qk),
            "v": (v, kv, r_o.transpose(1, 2) / ov)}


def _told(progress: Progress | None, done: int, total: int, message: str, unit: str) -> None:
    """`report` `done` of `total` `unit`; Cancelled where `progress` asks to stop."""
    if not report(progress, done / total, message):
        raise Cancelled(done, total, unit)


def _asking(progress: Progress | None, what: str) -> Callable[[], bool]:
    """A `going` for the weights' hash (`kept.read`): `progress` told that `what`'s kept scores are looked for, and
    asked whether to go on."""
    return lambda: report(progress, 0.0, f"{what}: looking for the kept ones")


def _pair_scores(lefts: torch.Tensor, rights: list[dict[str, tuple]], device,
                 progress: Progress | None = None) -> dict[str, np.ndarray]:
    """scores[kind][l1, h1, l2, h2] = ‖lefts[l1, h1] right[l2][kind][h2]‖_F for l1 < l2, NaN elsewhere;
    lefts (L, H, d_v, d). `progress` is told before each layer's pairs, and may stop them there (`Cancelled`)."""
    L, H, d_v, d = lefts.shape
    out = {kind: torch.full((L, H, L, H), torch.nan, dtype=F64) for kind in KINDS}
    for l2 in range(1, L):
        _told(progress, l2 - 1, L - 1, f"composition scores: layer {l2 + 1} of {L}", "layers")
        right = [tuple(None if t is None else t.to(device) for t in rights[l2][kind]) for kind in KINDS]
        cols = torch.cat([base.permute(1, 0, 2).reshape(d, -1) for base, _, _ in right], 1)  # (d, Σ B·r)
        widths = [base.shape[0] * base.shape[2] for base, _, _ in right]
        step = max(1, BLOCK // (H * d_v * cols.shape[1]))
        for l0 in range(0, l2, step):
            rows = lefts[l0:min(l0 + step, l2)].to(device)  # (n, H, d_v, d)
            n = len(rows)
            block = rows.reshape(-1, d) @ cols  # (n·H·d_v, Σ B·r): the one large product
            for kind, part, (base, kv, post) in zip(KINDS, block.split(widths, 1), right):
                y = part.reshape(-1, base.shape[0], base.shape[2])[:, kv].transpose(0, 1)  # (H2, n·H·d_v, r)
                y = y if post is None else y @ post  # (H2, n·H·d_v, r)
                sq = torch.linalg.vector_norm(y.reshape(H, n, H, -1), dim=-1)  # (H2, n, H1): d_v·r summed
                out[kind][l0:l0 + n, :, l2] = sq.permute(1, 2, 0).cpu()
    return {kind: s.numpy().astype(np.float32) for kind, s in out.items()}


def _single(factors: dict[str, tuple]) -> dict[str, tuple]:
    """`_factors`' tensors in float32, for the pairs' products: factored in float64, then multiplied in float32
    (the scores are float32: on SmolLM2 that moved them by at most 3e-8, and took 2.7 s instead of 7.7 s)."""
    def one(t):
        return t.float() if t is not None and t.is_floating_point() else t
    return {kind: one(part) if kind == "left" else tuple(one(t) for t in part) for kind, part in factors.items()}


_COMPOSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> (weights' version, its scores)
_COMPUTING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> the lock of its one computation
_LOCKS = threading.Lock()  # guards _COMPUTING


def _kept(found: weakref.WeakKeyDictionary, model: LoadedModel, now: tuple | None = None):
    """What `found` holds for `model` (`_COMPOSED`, `_COPYING`), where it was computed from the weights as they are
    (`now`: their version, where the caller read it already): None once one was changed in place since (a notebook's
    head zeroed: `weight_versions`)."""
    entry = found.get(model.hf_model)
    if entry is None:
        return None
    return entry[1] if entry[0] == (weight_versions.version(model.hf_model) if now is None else now) else None


def _computing(model: LoadedModel) -> threading.Lock:
    """The lock under which `model`'s weights-only results are computed: a page and the computation ahead of it
    (`circuits.ahead`) asking at once compute once, the second reading what the first kept."""
    with _LOCKS:
        return _COMPUTING.setdefault(model.hf_model, threading.Lock())


def composition_scores(model: LoadedModel, *, device: str | torch.device | None = None,
                       progress: Progress | None = None) -> dict[str, np.ndarray]:
    """Every pair of heads' composition scores from the weights, norms folded in (`folded_weights`):
    {"q", "k", "v"} → float32 (layers, heads, layers, heads), [l1, h1, l2, h2] for head (l1, h1) writing
    into head (l2, h2), l1 < l2 (NaN elsewhere, and for a head whose matrix is 0):
    Q: ‖W_OV¹ W_QK²‖_F / (‖W_OV¹‖_F ‖W_QK²‖_F), K: the same with W_QK²ᵀ, V: with W_OV² (W_OV = W_V W_O,
    W_QK = W_Q W_Kᵀ, x @ W convention). Factored in float64, multiplied in float32 (`_single`) through
    d_head-wide factors, never a d × d matrix a pair: one (H·d_v × d) by (d × (H + 2G)·d_head) product a pair of
    layers (SmolLM2: 3·10¹¹ flops in all, seconds on a CPU; a 32-layer model with d = 4096: 10¹⁴, for a GPU:
    `device`, default the CPU). Compare with `composition_baseline`: random matrices of the same shapes do not
    score 0. Computed once per model (kept while it lives; callers at once wait for the one computing), and kept on
    disk for the next process that loads the same weights where that is worth it (`worth_keeping`, `circuits.kept`).
    `progress` (`mha_viz.progress`) is told before each layer's factors and each layer's pairs, and stops the
    computation between two by returning False (`Cancelled`, nothing kept). A weight changed in place since: computed
    again."""
    found = _kept(_COMPOSED, model)
    if found is None:
        with _computing(model):
            now = weight_versions.version(model.hf_model)  # before: an edit meanwhile makes these stale
            found = _kept(_COMPOSED, model, now)
            if found is None:
                layout(model)  # a stream it cannot split is refused here, before the weights are hashed
                shape = (model.num_layers, model.num_heads) * 2
                keep = worth_keeping(model)
                found = kept.read(model, "composition", dict.fromkeys(KINDS, shape),
                                  _asking(progress, "composition scores")) if keep else None
                if found is None:
                    parts = []
                    for layer, w in enumerate(folded_layers(model)):  # told before each: 0 of the pairs done
                        _told(progress, 0, 1, f"composition scores: the factors of layer {layer + 1}", "layers")
                        parts.append(_single(_factors(w)))
                    found = _pair_scores(torch.stack([p["left"] for p in parts]), parts,
                                         torch.device(device or "cpu"), progress)
                    if keep:
                        kept.write(model, "composition", found)
                _COMPOSED[model.hf_model] = (now, found)  # minutes for a large model: once per model
    return {kind: s.copy() for kind, s in found.items()}


CPU_RATE, GPU_RATE = 4.5e10, 3e12  # multiply-adds a second: measured on 2 cores (SmolLM2: 4.9–5.5 s); a GPU's
# is a guess (none was lent to measure it), about 1/20 of an H100's float64 peak


def composition_seconds(model: LoadedModel) -> float:
    """How long `composition_scores` takes: three kinds × every pair of layers × every pair of heads × one
    d_v × d_model × d_k product, at CPU_RATE or GPU_RATE (an 8B model's shapes: about 37 minutes on 2 cores by
    this estimate; one run on synthetic weights of those shapes took about 27)."""
    L, H, d, d_k = model.num_layers, model.num_heads, model.d_model, model.d_k
    work = 3 * L * (L - 1) / 2 * H * H * d * d_k * d_k
    return work / (GPU_RATE if on_gpu(model) else CPU_RATE)


def worth_keeping(model: LoadedModel) -> bool:
    """Whether `model`'s composition and copying scores are kept on disk (`circuits.kept`): where MHA_VIZ_KEEP_SCORES
    allows it and the composition scores take over twice as long as hashing the weights to find them again, both by
    their estimates (`composition_seconds`, `kept.hash_seconds`): SmolLM2 5.5 s against 1.0 s (measured 5.1 s and
    0.9 s), MiniLM 0.06 s against 0.15 s."""
    try:
        return settings.from_env().keep_scores and composition_seconds(model) > 2 * kept.hash_seconds(model)
    except Exception:  # noqa: BLE001 - weights that cannot be sized: computed, as without keeping
        return False


def on_gpu(model: LoadedModel) -> bool:
    """Whether the model sits on a CUDA device (its composition scores are multiplied there)."""
    return getattr(model.device, "type", "cpu") == "cuda"


def composition_known(model: LoadedModel) -> bool:
    """Whether `composition_scores` has run for this model already (its scores are kept)."""
    return _kept(_COMPOSED, model) is not None


def recall(model: LoadedModel, going: Callable[[], bool] | None = None) -> bool:
    """`model`'s composition and copying scores read back where they were kept (`kept.hinted`: only then are its
    weights hashed), none computed: whether its composition scores are known now (`circuits.ahead`, a large model).
    They are known only where the copying scores were kept too, or are refused at once (`copying_refusal`): the page,
    finding the composition scores, would compute the copying ones unasked. Weights that hash to no kept scores lose
    their hint (`kept.forget_hint`); `going` is asked before each weight is hashed (False: stop, nothing read)."""
    if (known := composition_known(model)) or not (worth_keeping(model) and kept.hinted(model)):
        return known
    shape = (model.num_layers, model.num_heads)
    with _computing(model):
        now = weight_versions.version(model.hf_model)
        if _kept(_COMPOSED, model, now) is not None:
            return True  # known meanwhile
        if kept.fingerprint(model, going) is None:
            return False  # stopped, or weights that cannot be hashed
        composed = kept.read(model, "composition", dict.fromkeys(KINDS, shape * 2))
        if not composed:
            kept.forget_hint(model)
            return False
        copying = _kept(_COPYING, model, now)
        if copying is None and (found := kept.read(model, "copying", {"copying": shape})):
            copying = found["copying"]
            _COPYING[model.hf_model] = (now, copying)
        if copying is None and copying_refusal(model) is None:
            return False  # the page would compute the copying scores unasked
        _COMPOSED[model.hf_model] = (now, composed)
        return True


def composition_baseline(model: LoadedModel, *, seed: int = 0, samples: int = 64) -> dict[str, float]:
    """The mean composition score ("q", "k", "v") of `samples` pairs of heads with Gaussian weights of the
    model's shapes (W_Q, W_K: d × d_k; W_V: d × d_v; W_O: d_v × d): what shapes alone give, the level a
    score must clear to mean anything. The score is scale-invariant, so the random matrices need not be
    scaled to the model's own norms. Seeded: the same numbers every call (kept by shapes)."""
    w = model.head_weights()
    if "W_Q" not in w:
        raise UnsupportedArchitecture(f"The W_Q, W_K and W_V of '{model.name}' cannot be read: no composition.")
    return dict(_baseline(w["W_Q"].shape[-2], w["W_Q"].shape[-1], w["W_V"].shape[-1], seed, samples))


@functools.lru_cache(maxsize=16)
def _baseline(d: int, d_k: int, d_v: int, seed: int, samples: int) -> dict[str, float]:
    gen = torch.Generator().manual_seed(seed)
    sums = dict.fromkeys(KINDS, 0.0)
    for start in range(0, samples, 16):
        n = min(16, samples - start)

        def draw(*shape):
            return torch.randn(n, *shape, generator=gen, dtype=F64)
        first = _factors({"W_Q": draw(d, d_k), "W_K": draw(d, d_k), "W_V": draw(d, d_v), "W_O": draw(d_v, d)})
        second = _factors({"W_Q": draw(d, d_k), "W_K": draw(d, d_k), "W_V": draw(d, d_v), "W_O": draw(d_v, d)})
        for kind in KINDS:
            base, kv, post = second[kind]
            right = base[kv] if post is None else base[kv] @ post  # (n, d, r)
            sums[kind] += float(torch.linalg.matrix_norm(first["left"] @ right).sum())
    return {kind: sums[kind] / samples for kind in KINDS}


def _unembedding(model: LoadedModel) -> torch.Tensor:
    """W_U (d, vocab) float64, read from the residual stream: a decoder's LM head with its final norm's
    scale folded in (`readout.find`, once per model); an encoder's masked-LM decoder as it is (its
    transform, a dense layer, activation and norm before it, is not linear and is left out, as
    TransformerLens's HookedEncoder does)."""
    if not model.is_causal:  # a linear masked-LM head: `copying_scores` checked `copying_refusal` first
        return output_head(model.hf_model).weight.detach().to("cpu", F64).T
    ro = readout.of(model)
    if ro is None:
        raise InputError(NO_LINEAR_UNEMBEDDING.format(model=model.name))
    return read_through(ro, ro.unembed.to(F64).T)


NO_LINEAR_UNEMBEDDING = ("{model} has no linear unembedding (its final norm or its logit soft-capping cannot be read "
                         "as one): copying scores need one.")


def copying_refusal(model: LoadedModel) -> str | None:
    """Why `model` has no copying scores, where its shapes and config say so without running it (an encoder–decoder,
    no linear output head, a decoder's logit soft-capping), else None (a decoder's final norm is checked by running
    it, `readout.of`, when they are computed)."""
    if model.is_encoder_decoder:
        return (f"{model.name} is an encoder–decoder: copying scores need one stream from the embeddings to the "
                "unembedding.")
    if not isinstance(output_head(model.hf_model), nn.Linear):
        if not model.is_causal:
            return f"{model.name} has no unembedding (no masked-LM head): copying scores need one."
        return NO_LINEAR_UNEMBEDDING.format(model=model.name)
    if model.is_causal and getattr(model.hf_model.config, "final_logit_softcapping", None):
        return NO_LINEAR_UNEMBEDDING.format(model=model.name)
    return None


_COPYING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # hf model -> (version, its scores or the refusal)
COPYING_WORK = 5e10  # multiply-adds (W_U W_E: d² · vocab) a head table spends on copying scores unasked (SmolLM2:
# 1.6e10, 0.67 s on 2 cores; an 8B model's 2e12 are 130 times the work, not timed: the Head composition
# page computes them on request, and every head table has them from then on)


def table_weights(model: LoadedModel, *, copying: bool = True) -> dict | None:
    """The per-head weights a head table reads (`model.head_weights()`), with each head's copying score under
    "copying" (the copying measure) where the model has one and it is cheap or known already (`copying=False`:
    never); None when the architecture does not expose its heads' weights (those columns are then absent)."""
    if not model.has_head_outputs:
        return None
    try:
        w = model.head_weights()
    except Exception:  # noqa: BLE001 - ModelLoadError, or weights that cannot be read: no weight measures
        return None
    vocab = getattr(model.hf_model.config, "vocab_size", 0) or 0
    if not copying or (not copying_known(model) and model.d_model ** 2 * vocab > COPYING_WORK):
        return w
    try:
        return {**w, "copying": torch.as_tensor(copying_scores(model))}
    except (InputError, ValueError):  # no unembedding, a stream that cannot be split: the column stays empty
        return w


def copying_known(model: LoadedModel) -> bool:
    """Whether `copying_scores` has run for this model already (its result, or its refusal, is kept)."""
    return _kept(_COPYING, model) is not None


def copying_scores(model: LoadedModel, progress: Progress | None = None) -> np.ndarray:
    """Each head's copying score, float32 (layers, heads): Σλ / Σ|λ| over the eigenvalues λ of its full OV
    circuit W_E W_V W_O W_U (vocab × vocab), from those of W_O (W_U W_E) W_V (d_v × d_v, the same nonzero
    ones), norms folded in (`folded_weights`, and a decoder's final norm into W_U). 1: the head copies the
    tokens it attends to into the logits (a positive circuit); −1: it suppresses them; NaN for a head that
    writes nothing. Decoders, and encoders with a masked-LM head; InputError for any other model. Computed
    once per model (kept while it lives). `progress` is told before each part of W_U W_E and each layer, and stops
    the computation there by returning False (`Cancelled`; nothing kept)."""
    found = _kept(_COPYING, model)
    if found is None:
        with _computing(model):
            now = weight_versions.version(model.hf_model)  # before: an edit meanwhile makes these stale
            found = _kept(_COPYING, model, now)
            if found is None:
                shape = (model.num_layers, model.num_heads)
                refused = copying_refusal(model)  # refused before the weights are hashed
                try:
                    layout(model)
                    keep = refused is None and worth_keeping(model)
                except (InputError, UnsupportedArchitecture):
                    keep = False  # refused below, as before
                found = (kept.read(model, "copying", {"copying": shape}, _asking(progress, "copying scores"))
                         or {}).get("copying") if keep else None
                if refused is not None:  # a refusal: cheap, and not kept on disk
                    found = InputError(refused)
                elif found is None:
                    try:
                        found = _copying(model, progress)
                        if keep:
                            kept.write(model, "copying", {"copying": found})
                    except (InputError, UnsupportedArchitecture) as exc:  # a refusal: cheap, and not kept on disk
                        found = exc
                _COPYING[model.hf_model] = (now, found)
    if isinstance(found, Exception):
        raise type(found)(str(found))  # a fresh one: the kept one's traceback would grow with every raise
    return found.copy()


COPYING_PARTS = 8  # W_U W_E over the vocabulary in this many parts (SmolLM2's: 33 GFLOP in float64, seconds)


def _copying(model: LoadedModel, progress: Progress | None = None) -> np.ndarray:
    # W_U, W_E, the parts of W_U W_E, the layers (the layout has one a layer): counted before the unembedding may refuse
    # (a final norm that does not read as linear), so that a stop at once says how many
    layers = model.num_layers
    steps = COPYING_PARTS + layers + 2
    _told(progress, 0, steps, "copying scores: the unembedding", "parts")
    W_U = _unembedding(model)  # (d, vocab)
    layout(model)  # a stream it cannot split is refused here, before W_U W_E
    embeddings = getattr(model.hf_model, "get_input_embeddings", lambda: None)()
    if not isinstance(embeddings, nn.Embedding):
        raise InputError(f"The token embeddings of {model.name} cannot be read: no copying scores.")
    _told(progress, 1, steps, "copying scores: the embeddings", "parts")
    W_E = embeddings.weight.detach().to("cpu", F64)  # (vocab, d)
    if W_U.shape[0] != model.d_model or W_E.shape[1] != model.d_model or W_U.shape[1] != W_E.shape[0]:
        raise InputError(f"The embeddings of {model.name} ({tuple(W_E.shape)}) and its unembedding "
                         f"({tuple(W_U.T.shape)}) do not meet its {model.d_model}-wide stream: no copying scores.")
    G = torch.zeros(W_U.shape[0], W_E.shape[1], dtype=W_U.dtype)  # W_U W_E (d, d), once per model
    bounds = np.linspace(0, W_E.shape[0], COPYING_PARTS + 1).astype(int)
    for part, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        _told(progress, 2 + part, steps, f"copying scores: the unembedding, part {part + 1} of {COPYING_PARTS}",
              "parts")
        G += W_U[:, a:b] @ W_E[a:b]
    del W_U, W_E
    scores = []
    for layer, w in enumerate(folded_layers(model)):
        _told(progress, 2 + COPYING_PARTS + layer, steps, f"copying scores: layer {layer + 1} of {layers}", "parts")
        h, g = len(w["W_O"]), len(w["W_V"])
        v = w["W_V"][torch.arange(h) // (h // g)]  # (H, d, d_v)
        eig = torch.linalg.eigvals(w["W_O"] @ G @ v)  # (H, d_v) complex
        size = eig.abs().sum(-1)
        scores.append(eig.real.sum(-1) / size.where(size > 0, torch.nan))
    return torch.stack(scores).numpy().astype(np.float32)
