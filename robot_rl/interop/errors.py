"""The one error type of interop: an input that cannot be mapped, said in one line that names every culprit."""


class InteropError(ValueError):
    """A pipeline or ONNX export that cannot become one of our bundles (the message lists what and why)."""
