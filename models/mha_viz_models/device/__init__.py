"""Where a model's tensors live and in what precision: the device a name means (`placement.resolve_device`),
copies that stay resident, offloaded layers, and the precisions a machine computes in (`precision`).
"""
