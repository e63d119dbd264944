"""The model intervened on: heads switched off (`ablation`, `ablation_outcome`; their loss, computed once for every
caller: `heads_off_loss`), what heads write (`attribution`), activation patching and its estimate (`patching`,
`estimate`), heads behind a prediction (`prediction`).
"""
