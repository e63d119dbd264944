"""What a computation may cost before it runs: the bytes it needs and the room there is (`memory`), admission by
count and bytes (`admission`), one load per model for all sessions (`model_cache`).
"""
