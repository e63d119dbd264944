"""A run captured: `analyze` and what it returns (`run`: `AttentionRun`; `seq2seq`: encoder–decoders), generation
step by step, device-to-host transfer, run files, hidden tokens, read-only arrays.
"""
