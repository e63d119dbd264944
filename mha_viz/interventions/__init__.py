"""The model intervened on: heads switched off (`ablation`, `ablation_outcome`), what heads write (`attribution`),
activation patching and its estimate (`patching`, `estimate`), heads behind a prediction (`prediction`).
"""
