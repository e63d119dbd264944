"""The families of attention modules mha-viz reads: the registry (`registry`), the built-in families (`builtin`),
the adapters that put our MHA in their place and what is refused at load (`architectures`).
"""
