"""``torch.nn.parameter``'s path to ``Parameter``."""

from pargraph.nn.module import Parameter

__all__ = ["Parameter"]
