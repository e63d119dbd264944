"""What a computation may cost before it runs: the bytes it needs and the room there is (`memory`), the capture
budget checked in one place (`capture_budget`), admission by count and bytes (`admission`), one load per model for
all sessions (`model_cache`).
"""
