"""The precisions a user may ask for, by name: a module of its own (no PyTorch) for the command line and the
settings, which name them before any model is loaded (`precision` maps each to a dtype)."""

PRECISIONS = ("auto", "float32", "bfloat16", "float16")
