"""toy-induction: a 2-layer attention-only transformer, trained here, whose heads we understand.

Built from our `MultiHeadAttention` (no MLPs): token and learned absolute position embeddings,
two causal attention layers added to the residual stream, an unembedding. Trained by
`models/mha_viz_models/toy/train.py` on distinct random letters repeated ([BOS] x1..xk x1..xk, often
after some filler letters), a task that needs a previous-token head in layer 0 and an induction
head in layer 1 reading its output.
Its tokens are the lowercase letters a–z, written space-separated ("a b c" -> [BOS] a b c);
anything else is the unknown token.

`loading.toy_loader.load_toy` returns a `LoadedModel` like any other: each layer's attention module is an adapter
around our MHA (`ToyAttention`), so eager capture, lean capture with recompute, head outputs
and weights all work the same way as for a pretrained model computed with our MHA.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from mha_viz_models.attention.config import Shape
from mha_viz_models.attention.mha import MultiHeadAttention
from mha_viz_models.families.adapters import Adapter

NAME = "toy-induction"
FOLDER = Path(__file__).resolve().with_name("toy_induction")  # config.json, model.safetensors
LETTERS = "abcdefghijklmnopqrstuvwxyz"
BOS, UNK, PAD = "<bos>", "<unk>", "<pad>"
SPECIALS = (BOS, UNK, PAD)  # ids 0, 1, 2; the letters follow (a = 3 ... z = 28)


@dataclass
class ToyConfig:
    """Hyperparameters, named as in Hugging Face configs so that generic code can read them."""

    vocab_size: int = len(SPECIALS) + len(LETTERS)
    hidden_size: int = 128
    num_attention_heads: int = 4
    num_hidden_layers: int = 2
    max_position_embeddings: int = 64
    layer_norm: bool = False
    model_type: str = NAME

    @classmethod
    def from_dict(cls, values: dict) -> "ToyConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if k in names})

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclass
class ToyOutput:
    """What `ToyInductionModel.forward` returns, with the fields of Hugging Face's outputs."""

    last_hidden_state: torch.Tensor  # (B, n, d_model), after the final norm (if any)
    logits: torch.Tensor  # (B, n, vocab)
    hidden_states: tuple[torch.Tensor, ...] | None = None  # embeddings, then after each layer
    attentions: tuple[torch.Tensor, ...] | None = None  # (B, h, n, n) per layer


class ToyAttention(Adapter):
    """One layer's causal self-attention: our MHA, nothing else. Returns (output, probabilities);
    `need_weights = False` runs PyTorch's fused attention and returns None for them."""

    def __init__(self, d_model: int, num_heads: int) -> None:
        super().__init__()
        self.mha = MultiHeadAttention(Shape(d_model, num_heads, bias=False))

    def forward(self, hidden_states: torch.Tensor, key_padding_mask: torch.Tensor | None = None):
        return self.mha(hidden_states, key_padding_mask=key_padding_mask, is_causal=True,
                        need_weights=self.need_weights)


class ToyLayer(nn.Module):
    """x + attention(norm(x)); the norm is the identity unless the config asks for LayerNorm."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        d = config.hidden_size
        self.norm = nn.LayerNorm(d) if config.layer_norm else nn.Identity()
        self.attn = ToyAttention(d, config.num_attention_heads)

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None):
        out, probs = self.attn(self.norm(x), key_padding_mask=key_padding_mask)
        return x + out, probs


class ToyInductionModel(nn.Module):
    """Embeddings + learned positions, attention-only layers, unembedding (causal LM)."""

    def __init__(self, config: ToyConfig) -> None:
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.embed = nn.Embedding(config.vocab_size, d)
        self.pos = nn.Embedding(config.max_position_embeddings, d)
        self.layers = nn.ModuleList(ToyLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = nn.LayerNorm(d) if config.layer_norm else nn.Identity()
        self.unembed = nn.Linear(d, config.vocab_size, bias=False)

    def get_output_embeddings(self) -> nn.Linear:
        """The unembedding, as Hugging Face models name it (`mha_viz_models.reading.readout` finds it so)."""
        return self.unembed

    def get_input_embeddings(self) -> nn.Embedding:
        """The token embeddings, as Hugging Face models name them (copying scores read them)."""
        return self.embed

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                output_hidden_states: bool = False, output_attentions: bool = False,
                use_cache: bool = False, **kwargs) -> ToyOutput:
        """input_ids (B, n); attention_mask (B, n), 1 for tokens and 0 for padding."""
        n = input_ids.shape[1]
        if n > self.config.max_position_embeddings:
            raise ValueError(f"toy-induction takes at most {self.config.max_position_embeddings} "
                             f"tokens; got {n}.")
        positions = torch.arange(n, device=input_ids.device)
        x = self.embed(input_ids) + self.pos(positions)  # (B, n, d_model)
        padding = None if attention_mask is None else attention_mask == 0  # (B, n), True = padding
        hidden, attentions = [x], []
        for layer in self.layers:
            x, probs = layer(x, key_padding_mask=padding)
            hidden.append(x)
            attentions.append(probs)
        x = self.norm(x)
        hidden[-1] = x  # as in Hugging Face models: the last hidden state is after the final norm
        kept = output_attentions and all(a is not None for a in attentions)  # None: fused attention
        return ToyOutput(
            last_hidden_state=x, logits=self.unembed(x),
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(attentions) if kept else None,
        )


def make_tokenizer(max_length: int = 64):
    """The letters a–z as a word-level vocabulary, split on whitespace, [BOS] first."""
    # heavy (transformers): imported only when a tokenizer is made
    from tokenizers import Tokenizer, pre_tokenizers, processors
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIALS + tuple(LETTERS))}
    backend = Tokenizer(WordLevel(vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A $B", special_tokens=[(BOS, vocab[BOS])],
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token=BOS, unk_token=UNK, pad_token=PAD,
                                   model_max_length=max_length)


def save(model: ToyInductionModel, folder: Path = FOLDER, extra: dict | None = None) -> Path:
    """Write config.json (hyperparameters, plus `extra`: how it was trained) and model.safetensors."""
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {**model.config.to_dict(), **(extra or {})}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    return folder / "model.safetensors"
