"""The attention maths: our multi-head attention (`mha`), rotary positions, which keys a query sees, the head mask,
and what a Llama relative's layer adds.
"""
