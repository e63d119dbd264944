"""Loading a model: names, hub ids and folders to a `LoadedModel` (`loader`, `resolve`, `loaded`), precision,
placement over devices, the GGUF cache and the bundled models.
"""
