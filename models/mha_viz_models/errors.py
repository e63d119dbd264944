"""The errors of the models layer, with messages written for the person who asked for the model."""


class ModelLoadError(Exception):
    """A model could not be loaded; the message is written for the person who asked for it."""


class UnsupportedArchitecture(ValueError):
    """The model has no self-attention that our MHA knows how to replace."""
