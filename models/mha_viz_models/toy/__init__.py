"""toy-induction: the 2-layer attention-only model built from our MHA (`model`), its trained weights
(`toy_induction/`) and how it was trained (`train`).
"""
