"""A run captured: `analyze`, the one entry point, and what it returns (`run`: `AttentionRun`, `capture_text`;
`seq2seq`: encoder–decoders), every live run checked for NaN and infinity (`finite`), generation step by step,
device-to-host transfer, run files, hidden tokens, read-only arrays.
"""
