"""A run captured: `analyze`, the one entry point, and what it returns (`run`: `AttentionRun`, `capture_text`;
`seq2seq`: encoder–decoders), every live run checked for NaN and infinity (`finite`), generation step by step,
device-to-host transfer, run files, hidden tokens, read-only arrays.
"""

from mha_viz.capture.finite import NotFiniteError
from mha_viz.capture.generation import Generation, GenerationError, GenerationStep
from mha_viz.capture.run import AttentionRun
from mha_viz.capture.seq2seq import CrossAttention, EncoderDecoderRun
from mha_viz.capture.sinks import Hidden, drop_tokens, hide_mask

__all__ = ["AttentionRun", "CrossAttention", "EncoderDecoderRun", "Generation", "GenerationError", "Hidden",
           "NotFiniteError", "GenerationStep", "drop_tokens", "hide_mask"]
